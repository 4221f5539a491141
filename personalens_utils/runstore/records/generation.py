"""The records of the generation stage: one table per step, each record one step's answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from personalens_utils.base.stored import BackendName
from personalens_utils.runstore.identity import stable_id
from personalens_utils.runstore.records.base import Form, Record, RecordError

ABOUT = Form(lambda step, about: {key: about[key] for key in step.about_keys},
             lambda r: {key: r.get(key) for key in r.kind.about_keys})
"""What a step is about, stored as its own keys (`about_keys`) at the front of the line."""


@dataclass(frozen=True, kw_only=True)
class GenerationStep(Record):
    """One generation step's result (status "ok" with its parsed `value`, or "error" with the reasons).

    Each step has its own table; `about` holds what the step is about (user, domain, task), under
    the keys `about_keys` of its type. The id mixes everything that changes the answer, some of it
    not kept in the record, so it is made by the caller (`make_id`).
    """

    table: ClassVar[str]
    step: ClassVar[str]
    about_keys: ClassVar[tuple[str, ...]]
    layout: ClassVar[tuple[str, ...]] = (
        "id", "status", "about", "value", "raw", "error", "attempts", "input_tokens", "output_tokens",
        "cost_usd", "step",
    )
    derived: ClassVar[Mapping[str, str]] = {"step": "the table is that of step {!r}"}
    about: Mapping[str, Any] = field(metadata=ABOUT.meta())
    value: Any = None
    raw: str | None = None
    error: str | None = None
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    backend: BackendName
    model: str
    prompt_version: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if sorted(self.about) != sorted(self.about_keys):
            raise RecordError(
                f"a {self.step} step is about {list(self.about_keys)}, got {sorted(self.about)}"
            )

    @property
    def failure(self) -> str:
        about = ", ".join(f"{k} {self.about[k]}" for k in self.about_keys)
        return f"{self.step} ({about}): {self.error or self.status}"

    @staticmethod
    def make_id(step: str, key: Sequence[Any], backend: BackendName, model: str, prompt_version: str) -> str:
        return stable_id(step, *key, backend, model, prompt_version)


class MaskStep(GenerationStep):
    table = "generation_mask"
    step = "mask"
    about_keys = ("user_id",)


class PreferencesStep(GenerationStep):
    table = "generation_preferences"
    step = "preferences"
    about_keys = ("user_id", "domain")


class InteractionsStep(GenerationStep):
    table = "generation_interactions"
    step = "interactions"
    about_keys = ("user_id", "domain")


class SdTasksStep(GenerationStep):
    table = "generation_sd_tasks"
    step = "sd_tasks"
    about_keys = ("domain",)


class MdTasksStep(GenerationStep):
    table = "generation_md_tasks"
    step = "md_tasks"
    about_keys = ("domains", "first_task")


class SituationStep(GenerationStep):
    table = "generation_situation"
    step = "situation"
    about_keys = ("user_id", "task_id")


GENERATION_STEPS: dict[str, type[GenerationStep]] = {
    t.step: t for t in (SdTasksStep, MdTasksStep, MaskStep, PreferencesStep, InteractionsStep, SituationStep)
}
