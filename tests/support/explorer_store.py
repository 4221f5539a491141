"""A run store of four hand-made dialogues and their judgments (one turn-level, one missing), for the
explorer and catalog tests."""

from __future__ import annotations

from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from support.records import dialogue_json, put

LONG = ("The assistant proposed a jazz documentary before the user named a genre, then followed up with a "
        "drama once asked; it never checked the time of day. " * 2).strip()
"""A judge explanation far longer than the 50 characters notebook 04 used to show."""


def chat(*texts: str) -> list[dict[str, str]]:
    """Messages from the user and the assistant in turn, the user first."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


DIALOGUES = {
    "d-base": dict(scenario_id="user1/SD-Movies-task-1", user_id=1, task_id="SD-Movies-task-1",
                   domains=["Movies"], assistant_model="model-a", assistant_setting="base",
                   turns=chat("Hi, find me a movie for tonight.", "How about a jazz documentary?",
                              "Sounds good <b>bold</b> & more", "Then a drama after it: jazzy and calm."),
                   n_turns=2),
    "d-plus-i": dict(scenario_id="user1/SD-Movies-task-1", user_id=1, task_id="SD-Movies-task-1",
                     domains=["Movies"], assistant_model="model-a", assistant_setting="base+I",
                     turns=chat("Hi, find me a movie for tonight.", "You liked drama before: this one?",
                                "Yes.", "Booked.", "Thanks, bye."),
                     n_turns=3),
    "d-music": dict(scenario_id="user2/SD-Music-task-1", user_id=2, task_id="SD-Music-task-1",
                    domains=["Music"], assistant_model="model-b", assistant_setting="base",
                    turns=chat("Play something.", "Here is a pop playlist."), n_turns=1),
    "d-md": dict(scenario_id="user3/MD-task-1", user_id=3, task_id="MD-task-1", task_type="MD",
                 domains=["Movies", "Music", "Events"], assistant_model="model-a", assistant_setting="base",
                 turns=chat("Plan my evening.", "A jazz concert, then a film."), n_turns=1),
}
SCORES = {"d-base": (4.0, 1.0), "d-plus-i": (3.0, 1.0), "d-music": (1.0, 0.0), "d-md": (2.0, 1.0)}


def judgment(dialogue_id: str, dimension: str, score: float | None, **fields) -> dict:
    return {"id": f"{dialogue_id}-{dimension}", "dialogue_id": dialogue_id, "dimension": dimension,
            "judge_model": "judge-1", "prompt_version": "v1", "backend": "offline",
            "judge_model_id": "judge-1", "status": "ok",
            "score": score, "turn_scores": None, "explanation": f"{dimension} of {dialogue_id}: {LONG}",
            "raw": f"raw answer of {dialogue_id}", "attempts": 1, **fields}


def build(root) -> RunStore:
    store = RunStore(root)
    put(store, Dialogue, [dialogue_json(i, **fields) for i, fields in DIALOGUES.items()])
    rows = []
    for did, (personalization, completed) in SCORES.items():
        rows.append(judgment(did, "personalization", personalization))
        rows.append(judgment(did, "task_completion", completed))
    notes = "turn 1: offered jazz unprompted\nturn 2: no valid score: no label found"
    rows.append(judgment("d-base", "turn_personalization", 3.0, turn_scores=[3.0, None], explanation=notes))
    rows.append(judgment("d-music", "naturalness_assistant", None, status="missing", attempts=2,
                          explanation="no valid score: the answer had no 'Naturalness Score:' line"))
    put(store, Judgment, rows)
    return store
