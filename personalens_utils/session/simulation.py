"""Notebook 03's setup in one call: the session on the notebook's parameters, the user agent and the
assistant under test, and what to simulate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from personalens_utils.assistants import Assistant
from personalens_utils.data import Benchmark
from personalens_utils.llm.role import Role
from personalens_utils.outputs.ids import OutputId
from personalens_utils.prompt_templates.user_styles import COOPERATIVE
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session
from personalens_utils.simulation.config import SimulationConfig

NOTEBOOK = "03_simulation"
TABLE_S1 = OutputId("table", "S1", "dialogue_outcomes", NOTEBOOK)
TABLE13 = OutputId("table", 13, notebook=NOTEBOOK)
"""Table 13 of the assistant simulated, one file per setting (06 makes the paper's, of the focus)."""
OUTPUTS = (TABLE_S1, TABLE13)
"""Notebook 03's tables."""


@dataclass(frozen=True)
class SimulationRun:
    """What notebook 03 simulates: the benchmark of the session's users, the run store, the user agent
    and the assistant under test, and the selection (`SimulationConfig`) the notebook's parameters make."""

    default_output: ClassVar[str] = "simulation-report"

    benchmark: Benchmark
    store: RunStore
    out: Path
    user: Role
    assistant: Assistant
    selection: SimulationConfig
    note: str
    """The setup cell's line: the benchmark, the run store, both roles and the prompt set."""

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, SimulationRun]:
        """The session (an `assistant_model` of None: the reproduction's focus on its store, else the
        backend's default assistant) and the selection; nothing is checked with a model call yet."""
        session = Session.from_parameters(
            parameters, models=("user_model",), assistants=("assistant_model",),
            default_output=cls.default_output, focus_defaults=("assistant_model",))
        benchmark, store = session.benchmark, session.run_store
        given = session.parameters
        user = session.role("user_model").playing(given.user_style)
        assistant = session.assistant("assistant_model")
        selection = SimulationConfig(
            settings=given.settings, task_types=list(given.task_types), user_model=user.model,
            user_style=user.style, assistant_model=assistant.model, assistant=assistant,
            prompts=given.prompts, retry_errors=parameters["retry_errors"], shard=given.shard,
            max_cost_usd=given.max_cost_usd, repeats=given.repeats, batch=parameters["batch"])
        users = given.users
        note = (f"`{session.places.benchmark_dir}`, users: **{users if users is not None else 'default'}** → "
                f"{benchmark}; run store `{store.root}`; user agent `{user}`, assistant "
                f"`{assistant.backend}:{assistant.model}`; prompts: **{given.prompt_set}**"
                + (f", user style **{selection.user_style}**" if selection.user_style != COOPERATIVE else ""))
        return session, cls(benchmark, store, session.output_dir, user, assistant, selection, note)

    @property
    def roles(self) -> dict[str, Role | Assistant]:
        """Both roles under the names the preflight and the role lines print."""
        return {"user agent": self.user, "assistant": self.assistant}
