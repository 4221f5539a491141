"""Python assistants for the tests of the `python:` spec: good ones, and ones that break the protocol."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

SEEN: list[Any] = []
"""Every view `Recorder` was given, in order."""


class Recorder:
    """Keeps each view it gets and answers without a model (a plain, not async, reply)."""

    def reply(self, view: Any, llm: Any) -> str:
        SEEN.append(view)
        return "Noted."


class Declared:
    """Calls its declared model through the door; `version` and `model` come from the spec's options."""

    def __init__(self, model: str = "offline", version: str = "1"):
        self.model, self.version = model, version

    async def reply(self, view: Any, llm: Any) -> str:
        return await llm.complete(view.instructions)


class Undeclared:
    """Calls a model without declaring one."""

    async def reply(self, view: Any, llm: Any) -> str:
        return await llm.complete("hello")


class NoReply:
    """Has no reply method."""

    def answer(self, view: Any) -> str:
        return ""


class NotText:
    async def reply(self, view: Any, llm: Any) -> int:
        return 42


class BadModel:
    model = "Claude 3 Sonnet"  # names no backend

    def reply(self, view: Any, llm: Any) -> str:
        return ""


INSTANCE = Recorder()


HANG_S = 30.0
"""How long `Hangs` waits before giving up on its own (far beyond any timeout a test sets)."""


class Hangs:
    """A plain reply that does not return (for as long as any test waits)."""

    def reply(self, view: Any, llm: Any) -> str:
        threading.Event().wait(HANG_S)
        return "Too late."


class HangsAsync:
    """An async reply that does not return."""

    async def reply(self, view: Any, llm: Any) -> str:
        await asyncio.sleep(HANG_S)
        return "Too late."


class Raises:
    """A reply that raises from the user's own code."""

    def reply(self, view: Any, llm: Any) -> str:
        raise ValueError("the notes index is empty")


class Empty:
    """A reply with nothing in it."""

    async def reply(self, view: Any, llm: Any) -> str:
        return "  \n"
