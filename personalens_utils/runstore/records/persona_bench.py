"""The run-store record of PERSONA Bench: one model's answer to one item, with full identity.

Status "ok" (the answer was read: `prediction` holds it), "missing" (the answer did not parse:
`prediction` is null and `raw` keeps the text; the metrics report it as lost coverage, and count it
wrong in their strict form) or "error" (the llm layer failed; a rerun asks again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from personalens_utils.base.stored import BackendName
from personalens_utils.llm.role import Role
from personalens_utils.llm.types import Usage
from personalens_utils.runstore.identity import Variant, prediction_id
from personalens_utils.runstore.records.base import USAGE, VARIANT_IN_FULL, Record


@dataclass(frozen=True, kw_only=True)
class PersonaPrediction(Record):
    table: ClassVar[str] = "persona_bench"
    layout: ClassVar[tuple[str, ...]] = (
        "id", "item", "dataset", "variant", "task", "setting", "user", "domain", "target", "model", "backend",
        "model_id", "status",
    )
    item: str
    """The item's key (`PersonaItem.key`: dataset, prompt set, task, setting, target)."""
    dataset: str
    variant: Variant = field(metadata=VARIANT_IN_FULL.meta())
    """Whose prompts and their version (stored in full: set and version on every line)."""
    task: str
    setting: str
    user: str
    domain: str
    target: str
    model: str
    backend: BackendName
    model_id: str
    truth: str | int | float
    """A label or a rating; a rating stored as a whole number is read back as one (the same line)."""
    prediction: str | int | float | None = None
    raw: str = ""
    error: str | None = None
    usage: Usage = field(default_factory=Usage, metadata=USAGE.meta())
    cost_usd: float = 0.0
    retries: int = 0

    def identity(self) -> str:
        return prediction_id(self.item, Role(self.model, self.backend, self.model_id), self.variant)

    @property
    def failure(self) -> str:
        return f"{self.task} {self.setting} {self.target}: {self.error or self.status}"
