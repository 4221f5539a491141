"""The run-store record of PERSONA Bench: one model's answer to one item, with full identity.

Status "ok" (the answer was read: `prediction` holds it), "missing" (the answer did not parse:
`prediction` is null and `raw` keeps the text; the metrics report it as lost coverage, and count it
wrong in their strict form) or "error" (the llm layer failed; a rerun asks again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from personalens_utils.identity import Role, Variant, prediction_id
from personalens_utils.llm.types import Usage
from personalens_utils.records import Record, _Reader, spending_json

_TEXTS = ("task", "setting", "user", "domain", "target", "model", "backend", "model_id", "status")
"""The string fields stored between the variant and the truth, in their stored order."""


@dataclass(frozen=True, kw_only=True)
class PersonaPrediction(Record):
    table: ClassVar[str] = "persona_bench"
    item: str
    """The item's key (`PersonaItem.key`: dataset, prompt set, task, setting, target)."""
    dataset: str
    variant: Variant
    """Whose prompts and their version (stored in full: set and version on every line)."""
    task: str
    setting: str
    user: str
    domain: str
    target: str
    model: str
    backend: str
    model_id: str
    truth: str | float
    prediction: str | float | None = None
    raw: str = ""
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    retries: int = 0

    def identity(self) -> str:
        return prediction_id(self.item, Role(self.model, self.backend, self.model_id), self.variant)

    @property
    def failure(self) -> str:
        return f"{self.task} {self.setting} {self.target}: {self.error or self.status}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "item": self.item,
            "dataset": self.dataset,
            **self.variant.stored_in_full(),
            **{key: getattr(self, key) for key in _TEXTS},
            "truth": self.truth,
            "prediction": self.prediction,
            "raw": self.raw,
            "error": self.error,
            **spending_json(self),
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        """The record of a stored line, read with the run store's one reader (`records._Reader`)."""
        r = _Reader(data, cls, where)
        texts = {key: r.str(key) for key in ("item", "dataset", *_TEXTS, "raw")}
        answer = {"truth": r.get("truth", (str, int, float)),
                  "prediction": r.get("prediction", (str, int, float), optional=True)}
        return cls(id=cls.read_id(data, where), variant=r.variant(), **texts, **answer,
                   error=r.str("error", optional=True), **r.spending())
