"""Judge requests: the judge's view of a dialogue (its context) and the calls made from it.

The context is the structured material of docs/architecture.md (task, profile for the task's
domains, the dialogue); the prompt is the dimension's template filled from it. The offline
backend answers from the context, a real model reads the prompt. With the official templates
(`prompt_set="official"`) a dimension the official code judges gets the official call: no system
text, one user message filled as src/evaluate_dialogue.py fills it, temperature 0, max_tokens 4000,
asked once (the official script never re-asks). Turn-level personalization has no official prompt
and is judged with the kit's under either set (`judge_prompt_identity`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from personalens_utils.data import Benchmark
from personalens_utils.llm import CallKind, Message, Request
from personalens_utils.prompts import judge as prompts
from personalens_utils.prompts import official
from personalens_utils.prompts.official import JUDGE_TEMPLATES, OfficialPrompts
from personalens_utils.prompts.render import (
    render_conversation,
    render_fields_as_keyed,
    render_interactions,
    render_preferences,
)
from personalens_utils.records import KIT_PROMPTS, OFFICIAL_PROMPTS, Dialogue
from personalens_utils.reference.situation import SITUATION_FIELDS
from personalens_utils.simulation.prompting import ScenarioContext

from .dimensions import Dimension, JudgingError

ContextFor = Callable[[Dialogue], Mapping[str, Any]]
"""Gives a stored dialogue's judge context (`benchmark_contexts`, or any function of the record)."""

JUDGE_TEMPERATURE = 0.0
KIT_MAX_TOKENS = 1024
OFFICIAL_MAX_TOKENS = 4000
"""The official judge's answer limit (src/evaluate_dialogue.py)."""


def official_judged(dimension: Dimension, prompts: OfficialPrompts | None) -> bool:
    """Whether `dimension` is judged with the official prompt (`prompts` given and the official code
    has one for it)."""
    return prompts is not None and dimension.name in JUDGE_TEMPLATES


def judge_prompt_identity(
    dimension: Dimension, prompts: OfficialPrompts | None, prompt_version: str
) -> tuple[str, str]:
    """(prompt set, prompt version) of a judgment on `dimension`: the official templates' when they
    judge it, else the kit's (`prompt_version`), as turn-level personalization always is."""
    if official_judged(dimension, prompts):
        assert prompts is not None
        return OFFICIAL_PROMPTS, prompts.version
    return KIT_PROMPTS, prompt_version


class _Fill(dict[str, Any]):
    """Template values made on first use, so a template renders only the material it names."""

    def __init__(self, makers: Mapping[str, Callable[[], Any]]) -> None:
        super().__init__()
        self._makers = makers

    def __missing__(self, key: str) -> Any:
        value = self[key] = self._makers[key]()
        return value


def build_prompt(
    dimension: Dimension, context: Mapping[str, Any], turn: int | None = None
) -> tuple[str, str]:
    """The judge prompt for one dimension, filled from a judge context (docs/architecture.md).

    Returned as (head, tail): the head (instructions, scale, the user's profile) is the same for every
    call on this dimension and profile, so a provider can serve it from its prompt cache.
    """
    task = context["task"]
    speaker = str(dimension.speaker)
    fill = _Fill({
        "conversation": lambda: render_conversation(context["dialogue"]),
        "goal": lambda: task["task_goal"],
        "task_description": lambda: task["task_description"],
        "levels": lambda: prompts.PERSONALIZATION_LEVELS,
        "demographics": lambda: render_fields_as_keyed(context.get("demographics") or {}),
        "preferences": lambda: render_preferences(context.get("preferences") or {}),
        "interactions": lambda: render_interactions(context.get("interactions") or {}),
        "situation": lambda: render_fields_as_keyed(context.get("situation") or {}),
        "turn": lambda: turn,
        "speaker": lambda: speaker,
        "speaker_upper": lambda: speaker.upper(),
    })
    return dimension.head.format_map(fill), dimension.tail.format_map(fill)


def judge_request(
    dimension: Dimension, context: Mapping[str, Any], judge_model: str, turn: int | None = None
) -> Request:
    """One judge call; the context travels along for the offline backend and the records.

    `cache_prefix_chars` tells a caching backend where the prompt's stable head ends (docs/scale.md).
    """
    ctx = {**context, "dimension": dimension.name}
    if turn is not None:
        ctx["turn"] = turn
    head, tail = build_prompt(dimension, ctx, turn)
    ctx["cache_prefix_chars"] = len(head)
    return Request(
        kind=CallKind.JUDGE,
        messages=(Message("user", head + tail),),
        model=judge_model,
        temperature=JUDGE_TEMPERATURE,
        max_tokens=KIT_MAX_TOKENS,
        task=dimension.name,
        context=ctx,
    )


def official_profile(context: Mapping[str, Any]) -> official.Profile:
    """A judge context as the official evaluation script reads the user and the task."""
    task = context["task"]
    if "user_id" not in context:
        raise JudgingError("the official personalization prompt names the user: the judge context needs "
                           "'user_id' (judge_context gives it)")
    return official.Profile(
        task_type=task["task_type"], domains=list(task["domains"]),
        demographics=context.get("demographics") or {}, user_field=f"user{context['user_id']}",
        preferences=context.get("preferences") or {}, interactions=context.get("interactions") or {},
        situation={SITUATION_FIELDS.get(k, k): v for k, v in (context.get("situation") or {}).items()},
        user_intent=task["user_intent"], task_goal=task["task_goal"],
    )


def official_judge_request(
    dimension: Dimension, context: Mapping[str, Any], judge_model: str, prompts: OfficialPrompts
) -> Request:
    """The official script's call for one dimension: its template, no system text, its numbers."""
    text = official.judge_prompt(prompts, official_profile(context), dimension.name, context["dialogue"])
    return Request(
        kind=CallKind.JUDGE,
        messages=(Message("user", text),),
        model=judge_model,
        temperature=JUDGE_TEMPERATURE,
        max_tokens=OFFICIAL_MAX_TOKENS,
        task=dimension.name,
        context={**context, "dimension": dimension.name},
    )


def reminder_request(request: Request, answer: str, dimension: Dimension) -> Request:
    """The retry: the same conversation plus the unreadable answer and a format reminder."""
    note = prompts.RETRY_REMINDER.format(label=dimension.label, form=dimension.answer_form)
    messages = (*request.messages, Message("assistant", answer or "(empty answer)"), Message("user", note))
    return replace(request, messages=messages, context={**request.context, "retry": True})


def assistant_turn_ends(turns: Sequence[Mapping[str, str]]) -> list[int]:
    """Indices just past each assistant turn: the dialogue prefixes turn-level scoring reads."""
    return [i + 1 for i, t in enumerate(turns) if t.get("role") == "assistant"]


def dimension_requests(
    dimension: Dimension, context: Mapping[str, Any], judge_model: str, prompts: OfficialPrompts | None = None
) -> list[Request]:
    """The calls behind one judgment: one, or one per assistant turn for turn-level scoring; the
    official call when `prompts` judge the dimension (`official_judged`)."""
    if official_judged(dimension, prompts):
        assert prompts is not None
        return [official_judge_request(dimension, context, judge_model, prompts)]
    if not dimension.turn_level:
        return [judge_request(dimension, context, judge_model)]
    turns = context["dialogue"]
    return [
        judge_request(dimension, {**context, "dialogue": turns[:end]}, judge_model, k)
        for k, end in enumerate(assistant_turn_ends(turns), start=1)
    ]


def judge_context(ctx: ScenarioContext, dialogue: Dialogue) -> dict[str, Any]:
    """The judge's view of one dialogue: the user's profile for the task's domains, and the text.

    Besides the keys of the architecture contract, `ended` carries how the dialogue stopped (the
    user's TERMINATE or the turn cap): the stored text no longer holds the word TERMINATE; `user_id`
    is the user's index (the official personalization prompt names the user).
    """
    return {
        "user_id": ctx.scenario.user_id,
        "task": ctx.scenario.task_context(),
        "demographics": ctx.demographics,
        "preferences": ctx.preferences,
        "interactions": ctx.interactions,
        "situation": ctx.situation,
        "dialogue": [t.as_dict() for t in dialogue.turns],
        "ended": dialogue.status,
    }


def benchmark_contexts(benchmark: Benchmark) -> ContextFor:
    """`context_for` of `run_judging` over a loaded benchmark; unknown scenarios raise JudgingError."""

    def context_for(dialogue: Dialogue) -> dict[str, Any]:
        try:
            scenario = benchmark.scenario(dialogue.scenario_id)
            user = benchmark.user(scenario.user_id)
        except KeyError as exc:
            raise JudgingError(
                f"dialogue {dialogue.id} is about scenario {dialogue.scenario_id!r}, which the "
                f"benchmark at {benchmark.root} does not hold ({exc.args[0]}); judge it against the "
                "benchmark it was simulated on"
            ) from None
        return judge_context(ScenarioContext.of(scenario, user), dialogue)

    return context_for
