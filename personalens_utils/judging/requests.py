"""Judge requests: the judge's view of a dialogue (its context) and the calls made from it.

The context is the structured material of docs/architecture.md (task, profile for the task's
domains, the dialogue). The calls are the prompt set's (`prompt_sets`): the set whose judge prompt
scores a dimension builds them (`PromptSet.judge_set`: the official set judges turn-level
personalization with the kit's prompt, having none of its own). The offline backend answers from
the context, a real model reads the prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from personalens_utils.data import Benchmark
from personalens_utils.judging.dimensions import Dimension, JudgingError
from personalens_utils.llm import Message, Request
from personalens_utils.prompt_sets import KIT, PromptSet, ScenarioContext
from personalens_utils.prompt_templates import judge as prompts
from personalens_utils.runstore.records import Dialogue

ContextFor = Callable[[Dialogue], Mapping[str, Any]]
"""Gives a stored dialogue's judge context (`benchmark_contexts`, or any function of the record)."""


def reminder_request(request: Request, answer: str, dimension: Dimension) -> Request:
    """The retry: the same conversation plus the unreadable answer and a format reminder."""
    note = prompts.RETRY_REMINDER.format(label=dimension.label, form=dimension.answer_form)
    messages = (*request.messages, Message("assistant", answer or "(empty answer)"), Message("user", note))
    return replace(request, messages=messages, context={**request.context, "retry": True})


def dimension_requests(
    dimension: Dimension, context: Mapping[str, Any], judge_model: str, prompts: PromptSet = KIT
) -> list[Request]:
    """The calls behind one judgment with the judge prompts of `prompt_templates`: one, or one per assistant
    turn for turn-level scoring."""
    return prompts.judge_set(dimension).judge_requests(dimension, context, judge_model)


def judge_context(ctx: ScenarioContext, dialogue: Dialogue) -> dict[str, Any]:
    """The judge's view of one dialogue: the user's profile for the task's domains, and the text.

    Besides the keys of the architecture contract, `ended` carries how the dialogue stopped (the
    user's end or the turn cap), since the stored text holds no end marker (the user agent's TERMINATE
    is removed; a person ends with a button, and their words are kept as typed); `user_id` is the user's
    index (the official personalization prompt names the user).
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
