"""The run-store record of PERSONA Bench: one model's answer to one item, with full identity.

Status "ok" (the answer was read: `prediction` holds it), "missing" (the answer did not parse:
`prediction` is null and `raw` keeps the text; the metrics report it as lost coverage, and count it
wrong in their strict form) or "error" (the llm layer failed; a rerun asks again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from personalens_utils.llm.types import Usage
from personalens_utils.records import Record, _Reader, stable_id


@dataclass(frozen=True, kw_only=True)
class PersonaPrediction(Record):
    table: ClassVar[str] = "persona_bench"
    item: str
    """The item's key (`PersonaItem.key`: dataset, prompt set, task, setting, target)."""
    dataset: str
    prompt_set: str
    prompt_version: str
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

    @staticmethod
    def make_id(item: str, model: str, backend: str, model_id: str, prompt_version: str) -> str:
        return stable_id(item, model, backend, model_id, prompt_version)

    def identity(self) -> str:
        return self.make_id(self.item, self.model, self.backend, self.model_id, self.prompt_version)

    @property
    def failure(self) -> str:
        return f"{self.task} {self.setting} {self.target}: {self.error or self.status}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "item": self.item,
            "dataset": self.dataset,
            "prompt_set": self.prompt_set,
            "prompt_version": self.prompt_version,
            "task": self.task,
            "setting": self.setting,
            "user": self.user,
            "domain": self.domain,
            "target": self.target,
            "model": self.model,
            "backend": self.backend,
            "model_id": self.model_id,
            "status": self.status,
            "truth": self.truth,
            "prediction": self.prediction,
            "raw": self.raw,
            "error": self.error,
            "usage": self.usage.to_dict(),
            "cost_usd": self.cost_usd,
            "retries": self.retries,
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        r = _Reader(data, cls, where)
        return cls(
            id=cls.read_id(data, where),
            item=r.str("item"),
            dataset=r.str("dataset"),
            prompt_set=r.str("prompt_set"),
            prompt_version=r.str("prompt_version"),
            task=r.str("task"),
            setting=r.str("setting"),
            user=r.str("user"),
            domain=r.str("domain"),
            target=r.str("target"),
            model=r.str("model"),
            backend=r.str("backend"),
            model_id=r.str("model_id"),
            status=r.str("status"),
            truth=r.get("truth", (str, int, float)),
            prediction=r.get("prediction", (str, int, float), optional=True),
            raw=r.str("raw"),
            error=r.str("error", optional=True),
            usage=r.usage("usage"),
            cost_usd=r.number("cost_usd"),
            retries=r.int("retries"),
        )
