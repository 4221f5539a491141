"""The prompt-based assistant: a language model behind an `LLMClient` answers the kit's request as is."""

from __future__ import annotations

from contextlib import AbstractContextManager

from personalens_utils.assistants.base import Pricing
from personalens_utils.llm import LLMClient, Request, Response
from personalens_utils.llm.role import Role
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.runstore.records import OFFLINE


class PromptedAssistant:
    """A model on any backend, prompted with the request the prompt set built for its setting: a
    `llm.role.Role` (its spec and client) with what the kit asks of an assistant besides."""

    def __init__(self, client: LLMClient, spec: ModelSpec):
        if client.backend_name != spec.backend:
            raise ValueError(f"assistant {spec}: its client calls {client.backend_name!r}, "
                             f"not {spec.backend!r}")
        self.role = Role.served(spec, client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.role)!r})"

    @property
    def model(self) -> str:
        return self.role.model

    @property
    def backend(self) -> str:
        return self.role.backend

    @property
    def model_id(self) -> str:
        return self.role.model_id

    @property
    def made_offline(self) -> bool:
        return self.backend == OFFLINE

    @property
    def max_concurrency(self) -> int:
        return self.role.serves.max_concurrency

    def clients(self) -> list[LLMClient]:
        return [self.role.serves]

    def stage(self, name: str) -> AbstractContextManager[object]:
        return self.role.serves.stage(name)

    def prepared(self, request: Request) -> Request:
        """The request as this assistant sends it (a subclass may add to its context)."""
        return request

    async def respond(self, request: Request) -> Response:
        return await self.role.respond(self.prepared(request))

    def preflight(self, role: str) -> list[str]:
        key = self.role.spec.client_key
        lines = self.role.serves.preflight({role: self.model})
        return lines if key == self.backend else [f"{line} ({key})" for line in lines]

    def describe(self, role: str) -> list[str]:
        return self.role.describe(role)

    def pricing(self) -> Pricing:
        return Pricing(self.backend, self.model, f"{self.backend}:{self.model}")
