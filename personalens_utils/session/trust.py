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
from personalens_utils.runstore.store import ReproductionStore, RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import list_param
from personalens_utils.trust import probe_design as design

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
