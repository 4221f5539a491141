"""What a notebook calls models with (`Runtime`): one client per backend, made on first use with the
session's bounds and time limits; each role made from the spec its parameter named; the preflight that
checks every role once before any work is planned; and the calls (and their cost) made, per role."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from personalens_utils.assistants import Assistant, AssistantSpec
from personalens_utils.assistants.prompted import PromptedAssistant
from personalens_utils.llm import LLMClient
from personalens_utils.llm.client import Clients
from personalens_utils.llm.offline import OFFLINE_RULES
from personalens_utils.llm.role import Role
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.outputs.display import UsageTable
from personalens_utils.session.parameters import Parameters, SessionError

Given = str | ModelSpec | Role | Assistant
"""A role as `Runtime.preflight` takes it: a model (text on the session's backend, spec, or resolved) or an
assistant under test."""


def _model_spec(value: Given, backend: str) -> ModelSpec | None:
    """The model spec of a role that is one model on one client; None for an assistant of another kind."""
    if isinstance(value, str):
        return ModelSpec(backend, value)
    if isinstance(value, ModelSpec):
        return value
    if isinstance(value, PromptedAssistant):
        return value.role.spec
    if isinstance(value, Role):
        return value.spec
    return None


@dataclass
class Runtime:
    """The session's clients and roles. `assistant_specs` are the parameters' own, with a finished
    reproduction's focus assistant for those given as None (`places.focus_defaults`)."""

    parameters: Parameters
    assistant_specs: dict[str, AssistantSpec]
    _clients: Clients | None = field(default=None, repr=False)
    _assistants: dict[str, Assistant] = field(default_factory=dict, repr=False)

    @property
    def clients(self) -> Clients:
        """One client per backend (`llm.clients.Clients`), made on first use with the session's bounds
        (`max_concurrency`: one number, or a mapping backend -> number), time limits and backend seed."""
        if self._clients is None:
            given, limits = self.parameters, self.parameters.timeouts
            self._clients = Clients(given.backend, max_concurrency=given.max_concurrency, stage=given.stage,
                                    seed=given.backend_seed, request_timeout_s=limits.request_timeout_s,
                                    call_deadline_s=limits.call_deadline_s)
        return self._clients

    @property
    def client(self) -> LLMClient:
        """The client of the session's own `backend`."""
        return self.clients.client(ModelSpec(self.parameters.backend, ""))

    def spec(self, text: str, parameter: str, *, default_model: str = "") -> ModelSpec:
        """A role's model parameter as a `ModelSpec` (`backend:model`, or a bare model on `backend`)."""
        return self.clients.spec(text, default_model=default_model, what=parameter)

    def role(self, parameter: str) -> Role:
        """The role whose model the parameter `parameter` names (given in `SessionConfig.models`)."""
        specs = self.parameters.model_specs
        if parameter not in specs:
            raise SessionError(f"no model role {parameter!r} was given when the session opened "
                               f"(roles: {sorted(specs)})")
        return Role.served(specs[parameter], self.clients.client(specs[parameter]))

    def assistant(self, parameter: str) -> Assistant:
        """The assistant under test the parameter `parameter` names (given in `SessionConfig.assistants`),
        made once on first use."""
        if parameter not in self.assistant_specs:
            raise SessionError(f"no assistant {parameter!r} was given when the session opened "
                               f"(assistants: {sorted(self.assistant_specs)})")
        if parameter not in self._assistants:
            self._assistants[parameter] = self.assistant_specs[parameter].make(
                self.clients, self.parameters.assistant_options)
        return self._assistants[parameter]

    def usage_frame(self, stage: str | None = None) -> pd.DataFrame:
        """Calls of every client with the role and backend of each (`Clients.usage_frame`)."""
        return self.clients.usage_frame(stage)

    def usage(self, stage: str | None = None) -> UsageTable:
        """`usage_frame` for display: the table, or one line when this session made no model calls."""
        frame = self.usage_frame(stage)
        offline = frame["backend"] == "offline"  # no model answered these: name the rules that did
        frame.loc[offline, "model"] = [f"{OFFLINE_RULES} in the role of {m}"
                                       for m in frame.loc[offline, "model"]]
        return UsageTable(frame, stage)

    def preflight(self, roles: Mapping[str, Given]) -> str:
        """Check each role once on its own backend's client, before any work is planned or stored
        (`LLMClient.preflight`; a Python assistant checks the model it calls); a failure stops the
        notebook with one message. The lines to show. A role given as text is a model on the session's
        backend; roles with the same model on one client share one check."""
        by_client: dict[str, dict[str, str]] = {}
        specs: dict[str, ModelSpec] = {}
        lines = []
        for role, value in roles.items():
            spec = _model_spec(value, self.parameters.backend)
            if spec is None:
                lines += value.preflight(role)  # type: ignore[union-attr]  # an assistant of its own kind
                continue
            specs[role] = spec
            by_client.setdefault(spec.client_key, {})[role] = spec.model
        for key, group in by_client.items():
            spec = next(specs[role] for role in group)
            lines += [line if key == spec.backend else f"{line} ({key})"
                      for line in self.clients.client(spec).preflight(group)]
        return "\n".join(lines)

    def describe(self, roles: Mapping[str, ModelSpec | Role | Assistant]) -> str:
        """One line per role naming the backend and the id of each model it will call."""
        lines = []
        for role, value in roles.items():
            lines += [value.describe(role)] if isinstance(value, ModelSpec) else value.describe(role)
        return "\n".join(lines)

    def close(self) -> None:
        """Close the clients (if any were made) and forget the assistants made on them."""
        if self._clients is not None:
            self._clients.close()
            self._clients = None
        self._assistants.clear()
