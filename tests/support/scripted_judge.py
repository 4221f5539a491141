"""Hand-made dialogues and a scripted judge for the batch, prompt-caching and security tests.

`judge_reply` answers judge prompts sent to the fake server the way a model would: a verdict or a
labelled score. Two markers in a dialogue change that: `MUMBLE` makes the first coherence answer
unreadable (the format reminder then gets a score), `SILENT` makes every naturalness answer
unreadable (the judgment ends up missing).
"""

from __future__ import annotations

from typing import Any

from personalens_utils.runstore.records import Dialogue
from support.records import dialogue_json

MODEL = "Claude Sonnet 4.6"
JUDGE = {"judge_model": MODEL, "offline_dialogues": True}
"""The judge of these tests: its stores hold offline-made dialogues, which a real judge skips unless asked."""

TASK = {
    "task_id": "SD-Music-task-1", "task_type": "SD", "domains": ["Music"], "user_intent": "Find music.",
    "task_description": "The user wants a playlist for a long drive.", "task_goal": "A playlist is made.",
    "relevant_preferences": ["Preferred Genres", "Platform Preference"],
}
PREFERENCES = {"Music": {"Preferred Genres": ["jazz", "blues"], "Platform Preference": ["Spotify"]}}
LABELS = (("Personalization Score:", 3), ("Naturalness Score:", 4), ("Coherence Score:", 5))


def context_for(dialogue: Dialogue) -> dict[str, Any]:
    return {"task": TASK, "demographics": {"age": "35-44 years old"}, "preferences": PREFERENCES,
            "interactions": {"Music": "The user mostly streams jazz on Spotify."},
            "situation": {"device": "Laptop"}, "dialogue": [t.as_dict() for t in dialogue.turns],
            "ended": dialogue.status}


def dialogue(index: int, marker: str = "") -> dict[str, Any]:
    turns = [
        {"role": "user", "content": f"Could you make me a playlist? {marker}".strip()},
        {"role": "assistant", "content": "Sure! Some jazz and blues on Spotify?"},
        {"role": "user", "content": "Yes, exactly that."},
        {"role": "assistant", "content": "Done: a jazz and blues playlist on Spotify."},
    ]
    return dialogue_json(f"d{index:03d}", scenario_id=f"user{index}/SD-Music-task-1", user_id=index,
                         task_id="SD-Music-task-1", task_type="SD", domains=["Music"], status="terminated",
                         turns=turns, n_turns=2)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content)
    return str(content)


def judge_reply(api: str, body: dict[str, Any]) -> str:
    messages = body["messages"]
    prompt = _text(messages[0]["content"])
    reminded = len(messages) > 1
    if "SILENT" in prompt and "Naturalness Score:" in prompt:
        return "It reads fine to me."
    if "MUMBLE" in prompt and "Coherence Score:" in prompt and not reminded:
        return "Hard to say, honestly."
    if "VERDICT:" in prompt:
        return "VERDICT: True\nEXPLANATION: the playlist was made."
    for label, score in LABELS:
        if label in prompt:
            return f"<response>\n{label} {score}\nJustification: steady throughout.\n</response>"
    return "This is not a judge prompt."
