"""The assistant under test, as the dialogue loop and the runners see it: one protocol for every kind.

The loop builds each assistant request with the prompt set and hands it to `respond`; what the
record stores about the assistant (`model`, `backend`, `model_id`), which clients its calls go
through (for accounting and the spending limit), how many of its calls may run at once, its
preflight lines and how an estimate prices it all come from the object, never from its spec text.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from personalens_utils.base.stored import BackendName
from personalens_utils.llm import LLMClient, Request, Response


@dataclass(frozen=True)
class Pricing:
    """Where an estimate prices the assistant's turns: a backend and model, or nothing (`model` None)."""

    backend: BackendName
    model: str | None
    note: str
    """How the estimate says so, e.g. "anthropic:claude-haiku-4-5"."""


@runtime_checkable
class Assistant(Protocol):
    """An assistant under test: answers assistant requests and says what it is."""

    @property
    def model(self) -> str:
        """The name dialogue records carry (`Dialogue.assistant_model`)."""

    @property
    def backend(self) -> str:
        """The backend records carry (`Dialogue.assistant_backend`)."""

    @property
    def model_id(self) -> str:
        """Its run identity on that backend (`Dialogue.assistant_model_id`)."""

    @property
    def made_offline(self) -> bool:
        """Whether its answers come from the offline backend (tables then say so)."""

    @property
    def max_concurrency(self) -> int:
        """How many of its calls may be in flight at once."""

    def clients(self) -> list[LLMClient]:
        """The clients its calls go through (what accounting and a spending limit must count)."""

    def stage(self, name: str) -> AbstractContextManager[object]:
        """Book its calls under stage `name` while inside."""

    async def respond(self, request: Request) -> Response:
        """Its reply to one assistant request of the dialogue loop."""

    def preflight(self, role: str) -> list[str]:
        """Check, before any work, that it can answer; the lines to show. A failure raises."""

    def describe(self, role: str) -> list[str]:
        """What will be called for `role`, one line each (the backend and id of every model)."""

    def pricing(self) -> Pricing:
        """How `estimate_simulation` prices its turns."""
