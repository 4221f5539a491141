"""The records of the judging stage: judgments of a dialogue's dimensions, and reviews of who caused a
dialogue's failure. A judgment's id includes its judge's backend and resolved model id (run identity)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar

from personalens_utils.base.stored import BackendName
from personalens_utils.llm.role import Role, resolved_model
from personalens_utils.outputs.display import esc, fields_html, inline
from personalens_utils.runstore.identity import (
    STORED_KEYS,
    Variant,
    blame_id,
    judgment_id,
    stable_id,
)
from personalens_utils.runstore.records.base import VARIANT, NonEmpty, Record, _Varied, run_identity


@dataclass(frozen=True, kw_only=True)
class Judgment(Record, _Varied):
    """One dimension's judgment of one dialogue. Status "ok", "missing" (no valid score) or "error"."""

    table: ClassVar[str] = "judgments"
    summary_fields: ClassVar[tuple[str, ...]] = (
        "id", "dialogue_id", "dimension", "judge_model", *STORED_KEYS, "backend",
        "judge_model_id", "status", "score", "turn_scores",
    )
    """The fields analysis reads: everything but the judge's texts."""
    layout: ClassVar[tuple[str, ...]] = (
        "id", "dialogue_id", "dimension", "judge_model", "variant", "backend", "judge_model_id", "status",
    )
    dialogue_id: str
    dimension: str
    judge_model: str
    variant: Variant = field(metadata=VARIANT.meta())
    """Whose judge prompt it was given (turn-level personalization: always the kit's) and which judge
    sample it is."""
    backend: BackendName
    """The judge's backend."""
    judge_model_id: str = field(default="", metadata=run_identity())
    """The id the judge's backend is called with; empty: resolved from `judge_model`."""
    score: float | None = None
    turn_scores: tuple[float | None, ...] | None = None
    explanation: str = ""
    raw: str = ""
    attempts: int = 0

    def __post_init__(self) -> None:
        if not self.judge_model_id:
            object.__setattr__(self, "judge_model_id", resolved_model(self.judge_model, self.backend))
        super().__post_init__()

    @property
    def failure(self) -> str:
        return f"dialogue {self.dialogue_id}, {self.dimension}: {self.explanation}"

    @property
    def judge(self) -> tuple[str, str]:
        """The judge's (backend, resolved model id)."""
        return self.backend, self.judge_model_id

    def identity(self) -> str:
        return judgment_id(self.dialogue_id, self.dimension, judge=Role(self.judge_model, *self.judge),
                           variant=self.variant)

    def _repr_html_(self) -> str:
        """The judgment's fields, then the full explanation (never cut) and the raw answer folded."""
        fields = {name: getattr(self, name) for name in self.summary_fields}
        fields["attempts"] = self.attempts
        explanation = f'<div class="pl-explanation">{esc(self.explanation)}</div>'
        raw = f'<summary>raw answer</summary><div class="pl-explanation pl-muted">{esc(self.raw)}</div>'
        return inline(f"{fields_html(fields)}{explanation}<details>{raw}</details>")


@dataclass(frozen=True, kw_only=True)
class Blame(Record, _Varied):
    """Which party caused one dialogue's failure, as a reviewer read it (`validity.blame`). Status "ok",
    "missing" (the answer was never read) or "error"; `party` and `fault` are None unless "ok"."""

    table: ClassVar[str] = "blames"
    layout: ClassVar[tuple[str, ...]] = (
        "id", "dialogue_id", "reviewer_model", "variant", "backend", "reviewer_model_id", "judge_model",
        "judge_backend", "judge_model_id", "status",
    )
    dialogue_id: str
    reviewer_model: str
    variant: Variant = field(metadata=VARIANT.meta())
    """The reviewer prompt's set and version."""
    backend: BackendName
    """The reviewer's backend."""
    reviewer_model_id: str = ""
    """The id the reviewer's backend is called with; empty: resolved from `reviewer_model`."""
    judge_model: str
    """The judge whose verdicts were reviewed (its key), its backend and resolved id."""
    judge_backend: BackendName
    judge_model_id: str
    party: str | None = None
    fault: str | None = None
    turn: int | None = None
    """The number (from 1) of the message that shows the fault; None when the reviewer named none."""
    explanation: str = ""
    raw: str = ""
    attempts: int = 0

    def __post_init__(self) -> None:
        if not self.reviewer_model_id:
            object.__setattr__(self, "reviewer_model_id", resolved_model(self.reviewer_model, self.backend))
        super().__post_init__()

    @property
    def failure(self) -> str:
        return f"dialogue {self.dialogue_id}, review: {self.explanation}"

    def identity(self) -> str:
        reviewer = Role(self.reviewer_model, self.backend, self.reviewer_model_id)
        judge = Role(self.judge_model, self.judge_backend, self.judge_model_id)
        return blame_id(self.dialogue_id, reviewer=reviewer, judge=judge, variant=self.variant)


@dataclass(frozen=True, kw_only=True)
class ProbeJudgment(Judgment):
    """A judgment of a dialogue under a judge probe (`trust.probes`): the fields of `Judgment`, the probe
    and the probe's variant for this dialogue (`probe_variant`; `variant` is the judgment's own prompt set
    and sample). Kept in a table of its own, which no reader of judgments opens."""

    table: ClassVar[str] = "probe_judgments"
    summary_fields: ClassVar[tuple[str, ...]] = (*Judgment.summary_fields, "probe", "probe_variant")
    probe: NonEmpty
    probe_variant: NonEmpty

    def identity(self) -> str:
        return stable_id(super().identity(), "probe", self.probe_variant)

    @classmethod
    def of(cls, judgment: Judgment, probe: str, variant: str) -> ProbeJudgment:
        """`judgment`, made on the context of the probe named `probe`, as a probe record."""
        kept = {f.name: getattr(judgment, f.name) for f in fields(Judgment) if f.name != "id"}
        return cls(**kept, probe=probe, probe_variant=variant)
