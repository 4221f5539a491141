"""Notebook 04's setup in one call: the session on the notebook's parameters, the judge checked, and the
users whose dialogues it would judge."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from personalens_utils.judging.plan import judged_users, skipped_offline_line
from personalens_utils.judging.scoring import check_scoring
from personalens_utils.llm.role import Role
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import list_param

NOTEBOOK = "04_judging"
TABLE_J1 = OutputId("table", "J1", "judge_missing_rate", NOTEBOOK)
TABLE_J2 = OutputId("table", "J2", "judge_scores", NOTEBOOK)
OUTPUTS = (TABLE_J1, TABLE_J2)
"""Notebook 04's tables."""


@dataclass(frozen=True)
class JudgingRun:
    """What notebook 04 judges: the run store, the judge, the dialogues in scope (`select`), whether a
    real judge also takes offline-made dialogues (`offline_dialogues`; None: it skips them), the users
    whose profiles judging needs (`needed_users`), and the dimensions and `scoring` rule checked."""

    default_output: ClassVar[str] = "judging"

    store: RunStore
    out: Path
    judge: Role
    select: Callable[[Dialogue], bool]
    offline_dialogues: bool | None
    needed_users: list[int]
    dimensions: list[str] | None
    scoring: str
    users: Any
    task_types: list[str]

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, JudgingRun]:
        """The session and its judge checked once; nothing is judged yet."""
        session = Session.from_parameters(parameters, models=("judge_model",),
                                          default_output=cls.default_output)
        scoring = check_scoring(parameters["scoring"])
        store, judge = session.run_store, session.role("judge_model")
        print(session.preflight({"judge": judge}))
        select = session.in_scope(list_param("assistant_models", parameters["assistant_models"]),
                                  session.parameters.settings)
        offline_dialogues = True if parameters["judge_offline_dialogues"] else None
        needed = judged_users(store, select, judge=judge, offline_dialogues=offline_dialogues)
        return session, cls(store, session.output_dir, judge, select, offline_dialogues, needed,
                            session.parameters.dimensions, scoring, session.parameters.users,
                            list(session.parameters.task_types))

    def describe(self) -> str:
        """The setup cell's line: what the judge will judge, or what is missing for it to judge anything."""
        if self.needed_users:
            return (f"Run store `{self.store.root}`: finished dialogues of {len(self.needed_users)} users "
                    f"to judge with **{self.judge.model}** on the `{self.judge.spec.client_key}` backend.")
        return (f"**Nothing to judge:** the run store `{self.store.root}` holds no finished dialogues "
                f"for users={self.users!r}, task_types={self.task_types!r}. Run "
                "`notebooks/03_simulation.ipynb` first, or point `run_dir` at a run store that has "
                "dialogues.")

    def skipped_offline(self) -> str:
        """How many offline-made dialogues the judge leaves alone (empty when none)."""
        return skipped_offline_line(self.store, self.select, judge=self.judge,
                                    offline_dialogues=self.offline_dialogues)
