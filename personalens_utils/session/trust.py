"""Notebook 07's setup in one call: the session on the notebook's parameters, 07's own store beside the
run store, the roles checked, and the probe design with the assistants it simulates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from personalens_utils.assistants import Assistant, resolve_assistant
from personalens_utils.data import Benchmark
from personalens_utils.judging import check_scoring
from personalens_utils.llm.role import Role
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.store import ReproductionStore, RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import list_param
from personalens_utils.trust import probe_design as design

NOTEBOOK = "07_trust"
TABLE_T1 = OutputId("table", "T1", "judge_report_card", NOTEBOOK, "Judge report card",
                    "each judge's checks: pass, fail or not measured, with estimate, interval, n (extra)",
                    "card")
FIGURE_T1 = OutputId("figure", "T1", "probe_checks", NOTEBOOK, "Probe checks figure",
                     "how far the profile swap and the padding moved each judge's scores (extra)", "card")
TABLE_T2 = OutputId("table", "T2", "user_agent_audit", NOTEBOOK, "User-agent audit",
                    "heuristic flags of the simulated user, rates per model (extra)", "audit")
TABLE_T6 = OutputId("table", "T6", "user_style_checks", NOTEBOOK, "User-agent styles",
                    "whether each user-agent style took effect: pass, fail or not measured (extra)", "audit")
TABLE_T3 = OutputId("table", "T3", "table3_without_flagged", NOTEBOOK, "Table 3 without flagged dialogues",
                    "Table 3 on all dialogues and without those the audit flagged (extra)", "judged")
TABLE_T4 = OutputId("table", "T4", "variance_decomposition", NOTEBOOK, "Variance decomposition",
                    "each metric's variance split into user, task, simulation and judge sample (extra)",
                    "repeats")
FIGURE_T2 = OutputId("figure", "T2", "variance_decomposition", NOTEBOOK, "Variance decomposition figure",
                     "each level's share of the variance, per assistant and metric (extra)", "repeats")
TABLE_T5 = OutputId("table", "T5", "power_plan", NOTEBOOK, "Power plan",
                    "smallest detectable P difference of two assistants per study design, and its cost "
                    "(extra)",
                    "repeats")
FIGURE_T3 = OutputId("figure", "T3", "power_plan", NOTEBOOK, "Power plan figure",
                     "smallest detectable P difference against users, one line per design (extra)", "repeats")
OUTPUTS = (TABLE_T1, FIGURE_T1, TABLE_T2, TABLE_T6, TABLE_T3, TABLE_T4, FIGURE_T2, TABLE_T5, FIGURE_T3)
"""Notebook 07's tables and figures, in the order INDEX.md lists them."""
TRUST_STORE = "trust_store"
"""07's own records (repeats, probes) under the session's `records_dir`, kept across runs."""


@dataclass(frozen=True)
class TrustRun:
    """What notebook 07 works on: the run store it reads (`run`), its own store over it (`store`), the
    user agent and judges, the probe design (`plan`) and the assistants it simulates (`names`,
    `assistants`), and the `scoring` rule checked."""

    default_output: ClassVar[str] = "trust"

    run: RunStore
    store: ReproductionStore
    out: Path
    benchmark: Benchmark
    user: Role
    judges: list[Role]
    plan: design.ProbeDesign
    names: list[str]
    assistants: list[Assistant]
    scoring: str

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, TrustRun]:
        """The session (07 writes only its own store, so the run store may be read-only; no second
        judge when `second_judge_model` is None), the roles checked once, and the probe design drawn."""
        session = Session.from_parameters(
            parameters, models=("user_model", "judge_model", "second_judge_model"),
            optional=("second_judge_model",), default_output=cls.default_output, writes_run_store=False)
        given = session.parameters
        scoring = check_scoring(parameters["scoring"])
        run = session.run_store
        store = ReproductionStore.over(run, session.records_dir / TRUST_STORE)
        user = session.role("user_model")
        judges = [session.role(name) for name in ("judge_model", "second_judge_model")
                  if name in given.model_specs]
        print(session.preflight({"user agent": user,
                                 **{f"judge {k + 1}": judge for k, judge in enumerate(judges)}}))
        benchmark = session.benchmark
        chosen = session.assistant_names(list_param("assistant_models", parameters["assistant_models"]))
        size = design.DesignSize(parameters["probe_users"], parameters["probe_tasks"], parameters["seed"])
        plan = design.ProbeDesign.sample(benchmark, given.task_types, size, setting=parameters["setting"],
                                         user_model=user.model, prompt_set=given.prompt_set,
                                         assistants=chosen)
        names = chosen or plan.assistant_models(store)
        specs = plan.assistant_specs(store)  # stored name -> the spec that resolves it
        clients = session.runtime.clients
        assistants = [resolve_assistant(specs.get(name, name), clients, what="assistant_models",
                                        options=given.assistant_options) for name in names]
        return session, cls(run, store, session.output_dir, benchmark, user, judges, plan, names, assistants,
                            scoring)

    def describe(self) -> str:
        """The setup cell's line: where the records are and what the probe design holds."""
        return (f"Run store `{self.run.root}`; 07's own records (repeats, probes) in `{self.store.own}`. "
                f"Probe design: {self.plan.describe()}.")
