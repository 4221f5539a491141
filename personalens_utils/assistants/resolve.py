"""From an assistant spec to an `Assistant`: the one place that reads assistant spec texts.

`python:package.module:Name[?options]` is the user's own class (`python.PythonAssistant`); an
offline `ref-*` name is a reference assistant (`reference.ReferenceAssistant`); anything else is a
model spec (`llm.specs.ModelSpec`) for the prompt-based assistant (`prompted.PromptedAssistant`).
"""

from __future__ import annotations

from dataclasses import dataclass

from personalens_utils.assistants.base import Assistant
from personalens_utils.assistants.prompted import PromptedAssistant
from personalens_utils.assistants.python import PYTHON, PythonAssistant, PythonOptions, Target, load
from personalens_utils.assistants.reference_assistants import (
    VIEWS,
    ReferenceAssistant,
    default_assistant,
    is_reference,
)
from personalens_utils.base.stored import BackendName
from personalens_utils.llm import LLMClient
from personalens_utils.llm.client import Clients
from personalens_utils.llm.endpoints import SERVED_AT
from personalens_utils.llm.role import Role
from personalens_utils.llm.specs import KNOWN_BACKENDS, ModelSpec, SpecError, SpecParts, served_spec
from personalens_utils.runstore.records import OFFLINE


@dataclass(frozen=True)
class AssistantSpec:
    """An assistant spec read and checked (a Python assistant is loaded), not yet connected to clients."""

    backend: BackendName
    model: str
    """The name dialogue records carry."""
    spec: ModelSpec | None = None
    """The model of a prompt-based or reference assistant; None for a Python assistant."""

    @classmethod
    def parse(cls, text: str | None, default_backend: BackendName, *,
              what: str = "assistant_model") -> AssistantSpec:
        """Read `text` (None: the default assistant of `default_backend`); a spec that cannot be read or
        loaded raises `SpecError` naming `what` and what is accepted."""
        text = default_assistant(default_backend) if text is None else text
        parts = SpecParts.of(text) if isinstance(text, str) else None
        if parts is not None and parts.backend == PYTHON:
            if parts.var is not None or not parts.rest:
                raise SpecError(f"{what}={text!r}: write python:package.module:Name (a class or object "
                                "with a reply(view, llm) method; docs/simulation.md)")
            target = str(Target.parse(parts.rest, what))
            load(target)
            return cls(PYTHON, target)
        spec = ModelSpec.parse(text, default_backend, what=what)
        if spec.backend == OFFLINE and is_reference(spec.model) and spec.model.strip().lower() not in VIEWS:
            raise SpecError(f"{what}={text!r}: no reference assistant {spec.model!r}; "
                            f"use one of {sorted(VIEWS)}")
        return cls(spec.backend, spec.model, spec)

    def make(self, clients: Clients, options: PythonOptions | None = None) -> Assistant:
        """The assistant, its calls going through `clients` (one client per backend)."""
        if self.spec is None:
            inner = load(self.model).inner
            return PythonAssistant(self.model, clients.client(inner) if inner else None, options)
        return assistant_on(clients.client(self.spec), self.model, self.spec)

    def describe(self, role: str) -> list[str]:
        """What will be called for `role`, before any client is made."""
        if self.spec is None:
            return [f"{role}: {PYTHON}:{load(self.model).model_id}"]
        return [self.spec.describe(role)]


def stored_name(text: str, default_backend: BackendName, *, what: str = "assistant_models") -> str:
    """The name the records of assistant `text` carry: a spec naming its backend (`python:...`,
    `openai@VAR:model`, `anthropic:model`) read as notebook 03 reads it, so a reproduction's 04 selects
    the dialogues 03 stored under the model's name; any other text as it is (a name records carry)."""
    if SpecParts.of(text).backend in (PYTHON, *KNOWN_BACKENDS):
        return AssistantSpec.parse(text, default_backend, what=what).model
    return text


def spec_of(assistant: Role) -> str:
    """The spec of the assistant its records name (`Dialogue.assistant_role`). The bare name would be a
    model of that name on the session's default backend (offline answers any name), so the backend is
    named, and an openai model is sent to the server its records name (`llm.specs.served_spec`)."""
    if assistant.backend == "openai":
        _, at, endpoint = assistant.model_id.rpartition(SERVED_AT)
        return served_spec(assistant.model, endpoint if at else "")
    return f"{assistant.backend}:{assistant.model}"


def assistant_on(client: LLMClient, model: str, spec: ModelSpec | None = None) -> Assistant:
    """The prompt-based (or, offline, reference) assistant `model` on `client`: what a script gets when it
    names an assistant model and no assistant."""
    spec = spec or ModelSpec(client.backend_name, model)
    if spec.backend == OFFLINE and model.strip().lower() in VIEWS:
        return ReferenceAssistant(client, spec)
    return PromptedAssistant(client, spec)


def resolve_assistant(text: str | None, clients: Clients, *, what: str = "assistant_model",
                      options: PythonOptions | None = None) -> Assistant:
    """The assistant `text` names (None: the default of the clients' backend), ready to answer."""
    return AssistantSpec.parse(text, clients.default_backend, what=what).make(clients, options)
