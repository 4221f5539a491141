"""Judge requests: the judge's view of a dialogue (its context) and the calls made from it.

The context is the structured material of docs/architecture.md (task, profile for the task's
domains, the dialogue); the prompt is the dimension's template filled from it. The offline
backend answers from the context, a real model reads the prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from personalens_utils.data import Benchmark
from personalens_utils.llm import CallKind, Message, Request
from personalens_utils.prompts import judge as prompts
from personalens_utils.prompts.render import (
    render_conversation,
    render_fields_as_keyed,
    render_interactions,
    render_preferences,
)
from personalens_utils.records import Dialogue
from personalens_utils.simulation.prompting import ScenarioContext

from .dimensions import Dimension, JudgingError

ContextFor = Callable[[Dialogue], Mapping[str, Any]]
"""Gives a stored dialogue's judge context (`benchmark_contexts`, or any function of the record)."""

JUDGE_TEMPERATURE = 0.0


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
        max_tokens=1024,
        task=dimension.name,
        context=ctx,
    )


def reminder_request(request: Request, answer: str, dimension: Dimension) -> Request:
    """The retry: the same conversation plus the unreadable answer and a format reminder."""
    note = prompts.RETRY_REMINDER.format(label=dimension.label, form=dimension.answer_form)
    messages = (*request.messages, Message("assistant", answer or "(empty answer)"), Message("user", note))
    return replace(request, messages=messages, context={**request.context, "retry": True})


def assistant_turn_ends(turns: Sequence[Mapping[str, str]]) -> list[int]:
    """Indices just past each assistant turn: the dialogue prefixes turn-level scoring reads."""
    return [i + 1 for i, t in enumerate(turns) if t.get("role") == "assistant"]


def dimension_requests(dimension: Dimension, context: Mapping[str, Any], judge_model: str) -> list[Request]:
    """The calls behind one judgment: one, or one per assistant turn for turn-level scoring."""
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
    user's TERMINATE or the turn cap): the stored text no longer holds the word TERMINATE.
    """
    return {
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
