"""Notebook 09's setup in one call: the session on the notebook's parameters, 09's own store of reviews
beside the run store, the judge and reviewer checked, and the judgments every check reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from personalens_utils.judging import check_scoring
from personalens_utils.llm.role import Role
from personalens_utils.measures.scores import load_scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.store import ReproductionStore, RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import list_param

NOTEBOOK = "09_validity"
TABLE_V1 = OutputId("table", "V1", "human_anchored", NOTEBOOK, "Human-anchored estimates",
                    "judge, annotators' and anchored means per assistant and dimension, with intervals "
                    "(extra)",
                    "anchored")
TABLE_V1B = OutputId("table", "V1b", "anchored_differences", NOTEBOOK, "Anchored differences",
                     "each pair of assistants' differences under the three estimates (extra)", "anchored")
TABLE_V1C = OutputId("table", "V1c", "label_plan", NOTEBOOK, "Label plan",
                     "labels needed for each target interval width (extra)", "anchored")
TABLE_V2 = OutputId("table", "V2", "blame_rates", NOTEBOOK, "Blame rates",
                    "share of failures blamed on the assistant, user agent, judge or nobody (extra)", "blame")
TABLE_V3 = OutputId("table", "V3", "table3_without_user_faults", NOTEBOOK, "Table 3 without user faults",
                    "Table 3 beside Table 3 without failures blamed on the user agent (extra)", "blame")
TABLE_V4 = OutputId("table", "V4", "task_audit", NOTEBOOK, "Task audit",
                    "per task, full- minus blind-assistant gap in P and TCR, and the flag (extra)",
                    "audit_arms")
TABLE_V5 = OutputId("table", "V5", "table3_on_measuring_tasks", NOTEBOOK, "Table 3 on measuring tasks",
                    "Table 3 beside Table 3 without the flagged tasks (extra)", "audit_arms")
TABLE_V6 = OutputId("table", "V6", "fidelity", NOTEBOOK)
OUTPUTS = (TABLE_V1, TABLE_V1B, TABLE_V1C, TABLE_V2, TABLE_V3, TABLE_V4, TABLE_V5, TABLE_V6)
"""Notebook 09's tables, in the order INDEX.md lists them."""
VALIDITY_STORE = "validity_store"
"""09's reviews under the session's `records_dir`, kept across runs."""


@dataclass(frozen=True)
class ValidityRun:
    """What notebook 09 checks: the run store it reads (`run`), its own store of reviews over it
    (`store`), the judge checked and the reviewer, the judge's scores in the session's scope (`tidy`)
    and the assistants of Table 3 (`names`; None: every one)."""

    default_output: ClassVar[str] = "validity"

    run: RunStore
    store: ReproductionStore
    out: Path
    judge: Role
    reviewer: Role
    tidy: pd.DataFrame
    names: list[str] | None

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, ValidityRun]:
        """The session (09 writes only its own store, so the run store may be read-only), both roles
        checked once, and the judgments of `judge_model` on `user_model`'s dialogues, required."""
        session = Session.from_parameters(parameters, models=("judge_model", "reviewer_model"),
                                          default_output=cls.default_output, writes_run_store=False)
        scoring = check_scoring(parameters["scoring"])
        run = session.run_store
        store = ReproductionStore.over(run, session.records_dir / VALIDITY_STORE)
        judge, reviewer = session.role("judge_model"), session.role("reviewer_model")
        print(session.preflight({"judge": judge, "reviewer": reviewer}))
        user_model = parameters["user_model"]
        kept = {"judge_model": judge.model, "user_model": user_model,
                "judge_backend": judge.client.backend_name, "judge_prompt_set": session.parameters.prompt_set,
                "scoring": scoring}
        tidy = session.require(session.scope(load_scores(run, **kept)), f"judgments by {judge.model} of "
                               f"dialogues with user agent {user_model}", "notebooks 03 and 04")
        names = session.assistant_names(list_param("assistant_models", parameters["assistant_models"]))
        return session, cls(run, store, session.output_dir, judge, reviewer, tidy, names)

    def describe(self) -> str:
        """The setup cell's line: where the run store and 09's reviews are."""
        return f"Run store `{self.run.root}`; 09's reviews in `{self.store.own}`."
