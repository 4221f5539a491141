"""The prompt-based assistant: a language model behind an `LLMClient` answers the kit's request as is."""

from __future__ import annotations

from contextlib import AbstractContextManager

from personalens_utils.llm import LLMClient, Request, Response, registry
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.records import OFFLINE, resolved_model

from .base import Pricing


class PromptedAssistant:
    """A model on any backend, prompted with the request the prompt set built for its setting."""

    def __init__(self, client: LLMClient, spec: ModelSpec):
        if client.backend_name != spec.backend:
            raise ValueError(f"assistant {spec}: its client calls {client.backend_name!r}, "
                             f"not {spec.backend!r}")
        self.client, self.spec = client, spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.spec)!r})"

    @property
    def model(self) -> str:
        return self.spec.model

    @property
    def backend(self) -> str:
        return self.spec.backend

    @property
    def model_id(self) -> str:
        return resolved_model(self.model, self.backend)

    @property
    def made_offline(self) -> bool:
        return self.backend == OFFLINE

    @property
    def max_concurrency(self) -> int:
        return self.client.max_concurrency

    def clients(self) -> list[LLMClient]:
        return [self.client]

    def stage(self, name: str) -> AbstractContextManager[object]:
        return self.client.stage(name)

    def prepared(self, request: Request) -> Request:
        """The request as this assistant sends it (a subclass may add to its context)."""
        return request

    async def respond(self, request: Request) -> Response:
        return await self.client.acomplete(self.prepared(request))

    def preflight(self, role: str) -> list[str]:
        key = self.spec.client_key
        lines = self.client.preflight({role: self.model})
        return lines if key == self.backend else [f"{line} ({key})" for line in lines]

    def describe(self, role: str) -> list[str]:
        return [registry.resolve_model(self.model, self.backend).describe(role)]

    def pricing(self) -> Pricing:
        return Pricing(self.backend, self.model, f"{self.backend}:{self.model}")
