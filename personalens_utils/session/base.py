"""The setup cell of every notebook: one `Session` resolves the parameters the same way everywhere.

A notebook's parameters cell names what to work on; `Session.open(SessionConfig(...))` turns those
names into things, in three parts: `parameters` (each read and checked once, typed: the users, the task
types, the prompt set, every role's spec, the work's dimensions, settings, shard, repeats and budget),
`places` (the benchmark folder, the run store, this run's output folder and the folder kept across runs,
each checked writable before any call) and `runtime` (the LLM clients, made on first use and closed by
`session.close()` or leaving a `with` block, and the roles made on them). A malformed parameter stops the
setup cell with one line naming it; below the session, code gets role objects (`llm.role.Role`,
`assistants.Assistant`), never spec texts. Each parameter has one meaning in every notebook
(docs/parameters.md):

- `users`: None is the benchmark's default users (the paper's sample_50 when the benchmark holds
  the official users, every user of a generated benchmark); "all" is every user; a sample name
  ("sample_30", "sample_50", "sample_100") or a list of user indices is exactly those users.
- `prompt_set` ("kit" or "official") picks whose prompts notebooks 03-06 use and analyse;
  "official" reads them from the official code at `official_code` or `$PERSONALENS_CODE`, checked
  when the session opens (docs/simulation.md, "Prompt sets").
- `request_timeout_s` and `call_deadline_s` bound every model call: one attempt's wait for an answer,
  and the whole call with its retries (docs/llm.md, "Concurrency, retries and time limits").
- `seed` seeds sampling and resampling (bootstrap, permutation, Self-BLEU and annotation samples);
  `backend_seed` seeds the offline backend; `demographics_seed` seeds notebook 01's demographics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from personalens_utils.assistants import Assistant
from personalens_utils.data import Benchmark
from personalens_utils.llm import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.outputs.display import UsageTable, use_in_notebook
from personalens_utils.prompt_sets import PromptSet
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.parameters import Parameters, SessionConfig, config_of
from personalens_utils.session.places import Places
from personalens_utils.session.runtime import Given, Runtime


@dataclass
class Session:
    """What a notebook works on: its parameters read (`parameters`), its folders and stores (`places`) and
    its clients and roles (`runtime`). What its notebook calls is here under the part's own name; the
    facades read the parts. Close it in the last cell."""

    parameters: Parameters
    places: Places
    runtime: Runtime
    started: float = field(default_factory=time.perf_counter)

    @classmethod
    def open(cls, config: SessionConfig | None = None) -> Session:
        """Resolve a notebook's parameters (`SessionConfig`); what cannot be is one `SessionError`."""
        config = config or SessionConfig()
        parameters = Parameters.read(config)
        use_in_notebook()
        places = Places.open(config, parameters)
        assistants = {**parameters.assistant_specs, **places.focus_specs}
        return cls(parameters, places, Runtime(parameters, assistants))

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any], *, models: Sequence[str] = (),
                        assistants: Sequence[str] = (), optional: Sequence[str] = (),
                        not_session: Sequence[str] = (), **fixed: Any) -> Session:
        """`open` on a notebook's own parameters (`globals()` in its setup cell), so no notebook repeats the
        `SessionConfig` block: every `SessionConfig` field the notebook declares is read under its own name,
        except those in `not_session` (a parameter of the notebook's own that shares a field's name, as 08's
        PERSONA Bench `prompt_set`) and those `fixed` sets (what the notebook does not take as a parameter).
        `models` and `assistants` name the role parameters; a role in `optional` is left out when its
        parameter is None or empty."""
        return cls.open(config_of(parameters, models=models, assistants=assistants, optional=optional,
                                  not_session=not_session, fixed=fixed))

    @property
    def task_types(self) -> tuple[str, ...]:
        """`Parameters.task_types`."""
        return self.parameters.task_types

    @property
    def settings(self) -> list[str] | None:
        """`Parameters.settings`."""
        return self.parameters.settings

    @property
    def prompts(self) -> PromptSet:
        """`Parameters.prompts`."""
        return self.parameters.prompts

    @property
    def users(self) -> list[int] | None:
        """`Places.users`."""
        return self.places.users

    @property
    def output_dir(self) -> Path:
        """`Places.output_dir`."""
        return self.places.output_dir

    @property
    def records_dir(self) -> Path:
        """`Places.records_dir`."""
        return self.places.records_dir

    @property
    def run_store(self) -> RunStore:
        """`Places.run_store`."""
        return self.places.run_store

    @property
    def benchmark(self) -> Benchmark:
        """`Places.benchmark`."""
        return self.places.benchmark

    def load_benchmark(self, users: Sequence[int] | None) -> Benchmark:
        """`Places.load_benchmark`."""
        return self.places.load_benchmark(users)

    def assistant_names(self, given: Sequence[str] | None) -> list[str] | None:
        """`Places.assistant_names`."""
        return self.places.assistant_names(given)

    def require(self, frame: pd.DataFrame, what: str, producer: str) -> pd.DataFrame:
        """`Places.require`."""
        return self.places.require(frame, what, producer)

    def scope(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`Places.scope`."""
        return self.places.scope(frame)

    def in_scope(self, assistants: Sequence[str] | None = None,
                 settings: Sequence[str] | None = None) -> Callable[[Dialogue], bool]:
        """`Places.in_scope`."""
        return self.places.in_scope(assistants, settings)

    def note_scoring(self, scoring: str) -> bool:
        """`Places.note_scoring`."""
        return self.places.note_scoring(scoring)

    @property
    def client(self) -> LLMClient:
        """`Runtime.client`."""
        return self.runtime.client

    def role(self, parameter: str) -> Role:
        """`Runtime.role`."""
        return self.runtime.role(parameter)

    def assistant(self, parameter: str) -> Assistant:
        """`Runtime.assistant`."""
        return self.runtime.assistant(parameter)

    def preflight(self, roles: Mapping[str, Given]) -> str:
        """`Runtime.preflight`."""
        return self.runtime.preflight(roles)

    def describe(self, roles: Mapping[str, ModelSpec | Role | Assistant]) -> str:
        """`Runtime.describe`."""
        return self.runtime.describe(roles)

    def usage_frame(self, stage: str | None = None) -> pd.DataFrame:
        """`Runtime.usage_frame`."""
        return self.runtime.usage_frame(stage)

    def usage(self, stage: str | None = None) -> UsageTable:
        """`Runtime.usage`."""
        return self.runtime.usage(stage)

    def close(self) -> str:
        """Close the clients (if any were made); returns a line saying how long the notebook took."""
        self.runtime.close()
        return f"finished in {time.perf_counter() - self.started:.1f} s; outputs under {self.output_dir}"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
