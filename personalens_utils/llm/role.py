"""A role that calls a language model (user agent, judge, generator, checker), resolved once by the session.

The assistant under test is a role too, of its own kind (`assistants.Assistant`); every other role
is a model spec bound to the client of its backend. Below the session, code receives these
objects, never spec texts.
"""

from __future__ import annotations

from dataclasses import dataclass

from personalens_utils.llm import LLMClient, Request, Response
from personalens_utils.llm.specs import ModelSpec


@dataclass(frozen=True)
class ModelRole:
    """A role's model (`spec`) and the client that serves it (shared by roles on the same backend)."""

    spec: ModelSpec
    client: LLMClient

    @property
    def model(self) -> str:
        """The model name records carry."""
        return self.spec.model

    @property
    def backend(self) -> str:
        return self.spec.backend

    @property
    def endpoint(self) -> str:
        """Where its model is served when that is part of identity (`LLMClient.endpoint`), else ""."""
        return self.client.endpoint

    async def respond(self, request: Request) -> Response:
        """The model's answer to `request` (its `model` is this role's)."""
        return await self.client.acomplete(request)

    def describe(self, role: str) -> list[str]:
        """What will be called for `role`: the backend and the id sent there."""
        return [self.spec.describe(role)]

    def __str__(self) -> str:
        return str(self.spec)
