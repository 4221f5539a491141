"""Models scripted for the tests: fake-server replies that play a whole run, and a backend that fails.

`scripted_reply` plays a short run (the user agent ends after one reply, the judge gives every label a
score); `dialogue_reply` plays dialogues of one to three replies drawn from the request, for the batch
simulation tests; `Overloaded` answers every call 529.
"""

from __future__ import annotations

import hashlib
from typing import Any

from personalens_utils.llm import Request, Response, RetryableError
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.prompt_templates.dialogue import USER_SYSTEM
from personalens_utils.simulation import SimulationConfig
from support.fake_server import content_text, last_user_text

JUDGE = "Claude 3.5 Sonnet"
"""The judge model of the runs `scripted_reply` plays."""
JUDGE_ANSWER = "VERDICT: True\nPersonalization Score: 3\nNaturalness Score: 4\nCoherence Score: 4"
UNPRICED = "fake-claude"
"""A model the registry has no price for: a dialogue's cost is 0 on both transports."""


def scripted_reply(api: str, body: dict[str, Any]) -> str:
    """User agent: ask, then end after one reply; judge: every label with a score; assistant: fixed."""
    prompt = last_user_text(api, body)
    if body.get("system") == USER_SYSTEM:
        seen = prompt.split("# The conversation so far")[-1].count("ASSISTANT:")
        return "Could you help me with this?" if seen < 1 else "That's great, thanks! TERMINATE"
    if "VERDICT" in prompt or "Score" in prompt:
        return JUDGE_ANSWER
    return "Here is what I found for you."


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def dialogue_reply(api: str, body: dict[str, Any]) -> str:
    """Deterministic from the request: the user agent ends after 1-3 assistant replies (how many drawn
    from its profile head), or never for one profile in five (the turn cap); the assistant's reply is a
    digest of what it was asked."""
    system = content_text(body.get("system", ""))
    if body.get("messages") and body["messages"][0].get("role") == "system":
        system = content_text(body["messages"][0].get("content"))
    prompt = last_user_text(api, body)
    if system != USER_SYSTEM:
        return f"Reply {_digest(prompt) % 1000}: here is an option that fits."
    head, _, rest = prompt.partition("# The conversation so far")
    seen = rest.split("# Your next message")[0].count("ASSISTANT:")
    wanted = _digest(head) % 5
    if wanted == 0 or seen < wanted:
        return f"Could you help me with step {seen + 1}?"
    return "That's great, thanks! TERMINATE"


def dialogue_config(model: str = UNPRICED, max_turns: int = 4, **kwargs: Any) -> SimulationConfig:
    """Both roles on `model` (unpriced unless named), at most `max_turns` turns."""
    return SimulationConfig(user_model=model, assistant_model=model, max_turns=max_turns, **kwargs)


class Overloaded(OfflineBackend):
    """Every call answered 529: each dialogue is stored as an error record."""

    async def acomplete(self, request: Request, model: str) -> Response:
        raise RetryableError("overloaded", status=529)
