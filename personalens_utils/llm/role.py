"""A role that calls a language model, said once: who answers it (the model's name, the backend, the id the
backend is called with and, for the user agent, the style it plays) and, when it is to be called, the client
that serves it.

The session makes each role once from the notebook's parameters; below it, code receives the whole value and
never a backend or endpoint text beside a model name. A record's identity (`runstore.identity`) reads the same
value, so what a role is called as and what its records are keyed by cannot drift apart. The assistant under
test is a role of its own kind (`assistants.Assistant`), which says its identity the same way (`role_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from personalens_utils.llm import LLMClient, Request, Response, registry
from personalens_utils.llm.endpoints import served_id
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.llm.types import FatalError
from personalens_utils.prompt_templates.user_styles import COOPERATIVE


def resolved_model(model: str, backend: str) -> str:
    """The id `backend` is called with for `model` (the registry's id; for offline, its offline id).

    A model the registry cannot place on that backend keeps its given name: such calls fail, and the
    error record still needs an identity. An assistant that is not a model (one written in Python)
    says its own id (`assistants.Assistant.model_id`), which records store as given.
    """
    try:
        return registry.resolve(model, backend)
    except FatalError:
        return model


def legacy_model_id(model: str, backend: str) -> str:
    """The id a record written before run identity was made with: the registry's id for `backend`
    without today's retirement substitutions (the kit named no successors then); `runstore.migration`
    gives old records this id."""
    info = registry.lookup(model) if model else None
    return info.ids.get(backend, model) if info else model


class Identified(Protocol):
    """Anything that says a role's identity: a `Role`, or an assistant under test."""

    @property
    def model(self) -> str: ...

    @property
    def backend(self) -> str: ...

    @property
    def model_id(self) -> str: ...


@dataclass(frozen=True)
class Role:
    """Who answers one role's requests: the model's name, the backend and the id it is called with (and
    the endpoint, when that is identity: `llm.endpoints.served_id`), and for the user agent the style it
    plays; like the model, a style makes other records (the other roles keep the default).

    `client` (and the `spec` it was made from) are how a role made to be called calls; a role read back
    from a record has neither. Neither is identity: two roles are equal when their records would be."""

    model: str
    backend: str
    model_id: str
    style: str = COOPERATIVE
    endpoint: str = field(default="", compare=False)
    spec: ModelSpec | None = field(default=None, compare=False, repr=False)
    client: LLMClient | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, model: str, backend: str, endpoint: str = "", style: str = COOPERATIVE) -> Role:
        """The role of `model` on `backend`, served at `endpoint` (`LLMClient.endpoint`; "" by default),
        playing `style`, as records key it (no client: it is not to be called)."""
        return cls(model, backend, served_id(resolved_model(model, backend), endpoint), style, endpoint)

    @classmethod
    def served(cls, spec: ModelSpec, client: LLMClient, style: str = COOPERATIVE) -> Role:
        """The role of `spec`'s model called through `client` (shared by roles on the same backend)."""
        made = cls.of(spec.model, spec.backend, client.endpoint, style)
        return replace(made, spec=spec, client=client)

    @classmethod
    def on(cls, client: LLMClient, model: str, style: str = COOPERATIVE) -> Role:
        """The role of `model` called through `client` (its backend and endpoint are the client's)."""
        made = cls.of(model, client.backend_name, client.endpoint, style)
        return replace(made, client=client)

    def playing(self, style: str) -> Role:
        """The same model and client playing `style` (the user agent's; other roles keep the default)."""
        return replace(self, style=style)

    @property
    def serves(self) -> LLMClient:
        """The client this role's calls go through; a role read back from a record has none."""
        if self.client is None:
            raise FatalError(f"role {self} is an identity read from records, not a role to call: it has no "
                             "client")
        return self.client

    async def respond(self, request: Request) -> Response:
        """The model's answer to `request` (its `model` is this role's)."""
        return await self.serves.acomplete(request)

    def describe(self, role: str) -> list[str]:
        """What will be called for `role`: the backend and the id sent there."""
        spec = self.spec or ModelSpec(self.backend, self.model)
        return [spec.describe(role)]

    def __str__(self) -> str:
        return str(self.spec or ModelSpec(self.backend, self.model))


def role_of(who: Identified, style: str = COOPERATIVE) -> Role:
    """The identity of `who` (a `Role` as it is, an assistant under test as it says its own) as a `Role`."""
    if isinstance(who, Role):
        return who
    return Role(who.model, who.backend, who.model_id, style)
