"""Notebook 10's setup in one call: the session on the notebook's parameters and the sensitivity grid on
its run store, every role made on the session's clients."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar

from personalens_utils.assistants import Assistant, resolve_assistant
from personalens_utils.llm.role import Role
from personalens_utils.outputs.ids import OutputId
from personalens_utils.robustness.grid import Grid, GridRun, Place
from personalens_utils.runstore.store import ReproductionStore, RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import list_param

NOTEBOOK = "10_robustness"
TABLE_R1 = OutputId("table", "R1", "condition_table", NOTEBOOK, "Robustness: Table 3 per condition",
                    "TCR and P of each assistant under each user-agent style (extra)", "grid")
TABLE_R2 = OutputId("table", "R2", "pairwise_orders", NOTEBOOK, "Robustness: pairwise orders",
                    "share of conditions in which each pair of assistants keeps its P order (extra)", "grid")
TABLE_R3 = OutputId("table", "R3", "variance_split", NOTEBOOK, "Robustness: variance split",
                    "each score's variance split into assistant, user agent, judge, interactions, residual "
                    "(extra)", "grid")
TABLE_R4 = OutputId("table", "R4", "stress_gaps", NOTEBOOK, "Robustness: stress gaps",
                    "each style minus cooperative in TCR and P, paired by scenario (extra)", "grid")
TABLE_R6 = OutputId("table", "R6", "user_style_checks", NOTEBOOK, "Robustness: did each style take effect",
                    "07's style checks on the grid's own dialogues: pass, fail or not measured (extra)",
                    "grid")
TABLE_R5 = OutputId("table", "R5", "pass_k", NOTEBOOK, "Robustness: pass^k",
                    "share of scenarios passed in all k simulations; not measured with one repeat (extra)",
                    "grid")
FIGURE_R1 = OutputId("figure", "R1", "ranking", NOTEBOOK, "Robustness ranking figure",
                     "each assistant's P rank under each condition (extra)", "grid")
OUTPUTS = (TABLE_R1, TABLE_R2, TABLE_R3, TABLE_R4, TABLE_R6, TABLE_R5, FIGURE_R1)
"""Notebook 10's tables and figure, in the order INDEX.md lists them (R6, the style checks, before R5)."""
ROBUSTNESS_STORE = "robustness_store"
"""Notebook 10's own store in its records folder, over the run store: a scenario simulated under a second
style (or judged by a second judge) would make the run store's default readers, notebook 06's Table 3 among
them, refuse it, so the grid's records stay apart, as notebooks 07 and 09 keep theirs."""


class RobustnessRun:
    """Notebook 10's opening, named like the other notebooks' (`SimulationRun.open`, ...)."""

    default_output: ClassVar[str] = "robustness"

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, GridRun]:
        """`open_grid` on the notebook's parameters."""
        return open_grid(parameters, cls.default_output)


def open_grid(parameters: Mapping[str, Any], default_output: str = RobustnessRun.default_output,
              ) -> tuple[Session, GridRun]:
    """The session and the grid its parameters name (`assistant_models`, `user_models`, `user_styles`,
    `judge_models`, `repeats`, `batch`, `max_cost_usd`) over its own store (`ROBUSTNESS_STORE`), which
    reads through the run store until its first write; nothing is called yet."""
    session = Session.from_parameters(parameters, default_output=default_output, writes_run_store=False)
    given, runtime = session.parameters, session.runtime
    own, run = session.records_dir / ROBUSTNESS_STORE, session.run_store
    store = ReproductionStore.over(run, own) if run.root.is_dir() else RunStore(own)
    grid = Grid.of(*(list_param(name, parameters[name]) or [] for name in
                     ("assistant_models", "user_models", "user_styles", "judge_models")),
                   repeats=given.repeats)

    @cache
    def assistant(spec: str) -> Assistant:
        return resolve_assistant(spec, runtime.clients, what="assistant_models",
                                 options=given.assistant_options)

    def role(spec: str) -> Role:
        model = runtime.spec(spec, "user_models or judge_models")
        return Role.served(model, runtime.clients.client(model))

    place = Place(session.benchmark, store, given.prompts, given.task_types, session.scope,
                  session.in_scope(), role, assistant)
    return session, GridRun(place, grid, batch=parameters["batch"], max_cost_usd=given.max_cost_usd)
