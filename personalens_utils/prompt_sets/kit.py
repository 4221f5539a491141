"""The kit's own prompts (`prompt_templates.dialogue`, `prompt_templates.judge`) turned into requests.

Each request carries the rendered prompt (what a real model reads) and the structured context it
was rendered from (what the offline backend answers from); see docs/architecture.md for the keys.
The user agent's and the judge's prompts start with a head that every call on the same profile
repeats word for word; `cache_prefix_chars` tells a caching backend where it ends (docs/scale.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from personalens_utils.llm import CallKind, Message, Request
from personalens_utils.prompt_sets.base import JudgedDimension, PromptSet, Setting, Turn
from personalens_utils.prompt_sets.context import ScenarioContext
from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS
from personalens_utils.prompt_templates import dialogue as P
from personalens_utils.prompt_templates import judge as J
from personalens_utils.prompt_templates.dialogue import DIALOGUE_PROMPT_VERSION
from personalens_utils.prompt_templates.render import (
    render_conversation,
    render_fields,
    render_fields_as_keyed,
    render_history,
    render_interactions,
    render_preferences,
)

USER_TEMPERATURE = 0.5
ASSISTANT_TEMPERATURE = 0.0
MAX_TOKENS = 800
JUDGE_TEMPERATURE = 0.0
KIT_MAX_TOKENS = 1024


def user_context(ctx: ScenarioContext, turns: Sequence[Turn]) -> dict[str, Any]:
    """The user agent's request context (the same under every prompt set)."""
    return {
        "demographics": ctx.demographics,
        "preferences": ctx.preferences,
        "interactions": ctx.interactions,
        "situation": ctx.situation,
        "task": ctx.scenario.task_context(),
        "turn": sum(t["role"] == "user" for t in turns),
        "dialogue": [dict(t) for t in turns],
    }


def assistant_context(setting: Setting, ctx: ScenarioContext) -> dict[str, Any]:
    """The assistant's request context: only what its setting gives it, plus the `oracle` (the user's
    whole profile for the task), which only the offline reference assistants read
    (assistants/reference_assistants.py); a real model never sees it."""
    context: dict[str, Any] = {
        "setting": setting.name,
        "task_type": ctx.scenario.task_type,
        "domains": list(ctx.scenario.domains),
        "oracle": {"preferences": ctx.preferences, "interactions": ctx.interactions,
                   "situation": ctx.situation, "task": ctx.scenario.task_context()},
    }
    if setting.sees("D"):
        context["demographics"] = ctx.demographics
    if setting.sees("I"):
        context["interactions"] = ctx.interactions
    if setting.sees("S"):
        context["situation"] = ctx.situation
    return context


def _profile(ctx: ScenarioContext) -> str:
    return P.USER_PROFILE.format(
        demographics=render_fields(ctx.demographics),
        preferences=render_preferences(ctx.preferences),
        interactions=render_interactions(ctx.interactions),
        situation=render_fields(ctx.situation),
        task=ctx.scenario.user_intent,
    )


def user_request(ctx: ScenarioContext, turns: Sequence[Turn], model: str) -> Request:
    """The user agent's next message with the kit's prompts: the opening one when `turns` is empty.
    The message starts with the profile, which every call of the dialogue repeats word for word."""
    profile = _profile(ctx)
    if turns:
        prompt = P.USER_NEXT.format(profile=profile, history=render_history(turns))
    else:
        prompt = P.USER_OPENING.format(profile=profile)
    context = {**user_context(ctx, turns), "cache_prefix_chars": len(profile)}
    return Request(kind=CallKind.USER_TURN, system=P.USER_SYSTEM, messages=(Message("user", prompt),),
                   model=model, temperature=USER_TEMPERATURE, max_tokens=MAX_TOKENS, context=context)


def assistant_system(setting: Setting, ctx: ScenarioContext) -> str:
    """Instructions, then one section per context part the setting gives, then the closing line."""
    parts = [P.ASSISTANT_BASE if setting.instructions == "base" else P.ASSISTANT_VANILLA]
    sections = []
    if setting.sees("D"):
        sections.append(P.ASSISTANT_DEMOGRAPHICS.format(demographics=render_fields(ctx.demographics)))
    if setting.sees("I"):
        sections.append(P.ASSISTANT_INTERACTIONS.format(interactions=render_interactions(ctx.interactions)))
    if setting.sees("S"):
        sections.append(P.ASSISTANT_SITUATION.format(situation=render_fields(ctx.situation)))
    if sections:
        parts.append(P.ASSISTANT_CONTEXT_INTRO + "\n".join(sections))
    parts.append(P.ASSISTANT_CLOSING)
    return "\n".join(parts)


def assistant_request(setting: Setting, ctx: ScenarioContext, turns: Sequence[Turn], model: str) -> Request:
    """The assistant's next reply with the kit's prompts: the context its setting gives in the system
    text and the dialogue as chat messages."""
    messages = tuple(Message(t["role"], t["content"] or P.EMPTY_CLOSING) for t in turns)  # type: ignore[arg-type]
    return Request(kind=CallKind.ASSISTANT_TURN, system=assistant_system(setting, ctx), messages=messages,
                   model=model, temperature=ASSISTANT_TEMPERATURE, max_tokens=MAX_TOKENS,
                   context=assistant_context(setting, ctx))


class _Fill(dict[str, Any]):
    """Template values made on first use, so a template renders only the material it names."""

    def __init__(self, makers: Mapping[str, Callable[[], Any]]) -> None:
        super().__init__()
        self._makers = makers

    def __missing__(self, key: str) -> Any:
        value = self[key] = self._makers[key]()
        return value


def build_prompt(
    dimension: JudgedDimension, context: Mapping[str, Any], turn: int | None = None
) -> tuple[str, str]:
    """The kit's judge prompt for one dimension, filled from a judge context (docs/architecture.md).

    Returned as (head, tail): the head (instructions, scale, the user's profile) is the same for every
    call on this dimension and profile, so a provider can serve it from its prompt cache.
    """
    task = context["task"]
    speaker = str(dimension.speaker)
    fill = _Fill({
        "conversation": lambda: render_conversation(context["dialogue"]),
        "goal": lambda: task["task_goal"],
        "task_description": lambda: task["task_description"],
        "levels": lambda: J.PERSONALIZATION_LEVELS,
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
    dimension: JudgedDimension, context: Mapping[str, Any], judge_model: str, turn: int | None = None
) -> Request:
    """One kit judge call; the context travels along for the offline backend and the records."""
    ctx = {**context, "dimension": dimension.name}
    if turn is not None:
        ctx["turn"] = turn
    head, tail = build_prompt(dimension, ctx, turn)
    ctx["cache_prefix_chars"] = len(head)
    return Request(kind=CallKind.JUDGE, messages=(Message("user", head + tail),), model=judge_model,
                   temperature=JUDGE_TEMPERATURE, max_tokens=KIT_MAX_TOKENS, task=dimension.name, context=ctx)


def assistant_turn_ends(turns: Sequence[Mapping[str, str]]) -> list[int]:
    """Indices just past each assistant turn: the dialogue prefixes turn-level scoring reads."""
    return [i + 1 for i, t in enumerate(turns) if t.get("role") == "assistant"]


class KitPrompts(PromptSet):
    """The kit's own prompts and dialogue rules (docs/simulation.md)."""

    name = KIT_PROMPTS

    @classmethod
    def load(cls, official_code: str | Path | None = None) -> Self:
        return cls()

    @property
    def version(self) -> str:
        return DIALOGUE_PROMPT_VERSION

    def user_request(self, ctx: ScenarioContext, turns: Sequence[Turn], model: str) -> Request:
        return user_request(ctx, turns, model)

    def assistant_request(self, setting: Setting, ctx: ScenarioContext, turns: Sequence[Turn],
                          model: str) -> Request:
        return assistant_request(setting, ctx, turns, model)

    def judge_requests(self, dimension: JudgedDimension, context: Mapping[str, Any],
                       judge_model: str) -> list[Request]:
        if not dimension.turn_level:
            return [judge_request(dimension, context, judge_model)]
        turns = context["dialogue"]
        return [judge_request(dimension, {**context, "dialogue": turns[:end]}, judge_model, k)
                for k, end in enumerate(assistant_turn_ends(turns), start=1)]


KIT = KitPrompts()
"""The kit's prompt set, the default of every run."""
