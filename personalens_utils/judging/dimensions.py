"""What the judge scores: each dimension with its prompt template, scale and answer parser.

The templates live in `prompt_templates.judge` (where to change a prompt); a dimension names the pair it
uses, so the judge request builder and the parser never branch on dimension names. Judgments are
keyed by dimension name, judge model (its registry name), prompt version and the judge's run identity:
its backend and the model id that backend is called with (`identity.judgment_id`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from personalens_utils.base.errors import KitError
from personalens_utils.judging.parsing import ParsedAnswer, parse_score, parse_verdict
from personalens_utils.llm import registry as model_registry
from personalens_utils.prompt_templates import judge as prompts
from personalens_utils.reference.rubric import SCALES, Scale

DEFAULT_JUDGE_MODEL = "Claude 3.5 Sonnet"


class JudgingError(KitError, ValueError):
    """Judging cannot start as asked: unknown dimension, dialogue without its scenario, bad record."""


@dataclass(frozen=True)
class Dimension:
    """One thing the judge scores: the rubric's scale for it (`reference.rubric.Scale`: family, scale,
    answer label, whose turns) and its prompt template (head + tail).

    `head` is the part of the prompt that stays the same for every call on one dimension and profile
    (a provider can cache it), `tail` the part that changes (the conversation); both are filled by
    `judging.requests.build_prompt`.
    """

    scale: Scale
    head: str
    tail: str

    @property
    def name(self) -> str:
        return self.scale.name

    @property
    def family(self) -> str:
        return self.scale.family

    @property
    def low(self) -> int:
        return self.scale.low

    @property
    def high(self) -> int:
        return self.scale.high

    @property
    def label(self) -> str:
        return self.scale.label

    @property
    def speaker(self) -> str | None:
        return self.scale.speaker

    @property
    def turn_level(self) -> bool:
        return self.scale.turn_level

    @property
    def answer_form(self) -> str:
        """What follows the label in a valid answer, as the format reminder states it."""
        return "True or False" if self.family == "task_completion" else f"<{self.low}-{self.high}>"

    def parse(self, text: str) -> ParsedAnswer:
        """The score in a judge answer, or why there is none (see `judging.parsing`)."""
        if self.family == "task_completion":
            return parse_verdict(text)
        return parse_score(text, self.label, self.low, self.high)


_TEMPLATES: dict[str, tuple[str, str]] = {
    "task_completion": (prompts.TASK_COMPLETION_HEAD, prompts.TASK_COMPLETION_TAIL),
    "personalization": (prompts.PERSONALIZATION_HEAD, prompts.PERSONALIZATION_TAIL),
    "naturalness_assistant": (prompts.NATURALNESS_HEAD, prompts.NATURALNESS_TAIL),
    "naturalness_user": (prompts.NATURALNESS_HEAD, prompts.NATURALNESS_TAIL),
    "coherence_assistant": (prompts.COHERENCE_HEAD, prompts.COHERENCE_TAIL),
    "coherence_user": (prompts.COHERENCE_HEAD, prompts.COHERENCE_TAIL),
    "turn_personalization": (prompts.PERSONALIZATION_HEAD, prompts.TURN_PERSONALIZATION_TAIL),
}
"""Each dimension's prompt (head, tail); its scale and label are the rubric's (`reference.rubric`)."""

DIMENSIONS: dict[str, Dimension] = {
    name: Dimension(scale, *_TEMPLATES[name]) for name, scale in SCALES.items()
}
ALL_DIMENSIONS: tuple[str, ...] = tuple(DIMENSIONS)


def dimensions_from(names: Iterable[str] | str | None) -> list[Dimension]:
    """The named dimensions (all when None); a clear error names any unknown one."""
    if names is None:
        return list(DIMENSIONS.values())
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in DIMENSIONS]
    if unknown:
        raise JudgingError(f"unknown judge dimensions {unknown}; known: {list(DIMENSIONS)}")
    return [DIMENSIONS[n] for n in dict.fromkeys(names)]


def judge_model_key(model: str) -> str:
    """The name judgments are keyed by: the registry's display name, so aliases share records."""
    if not model:
        raise JudgingError("judge_model is empty; name the model that judges (e.g. 'Claude 3.5 Sonnet')")
    info = model_registry.lookup(model)
    return info.name if info is not None else model
