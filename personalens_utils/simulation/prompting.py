"""Turning a scenario and the dialogue so far into the next user-agent or assistant request.

Each request carries the rendered prompt (what a real model reads) and the structured context it
was rendered from (what the offline backend answers from); see docs/architecture.md for the keys.
Given the official templates (`prompts.official`, `prompt_set="official"`), the prompt is the one
the official scripts send: their system text, one user message, their temperature and max_tokens;
the context stays the same, so the offline backend answers either set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from personalens_utils.data.types import Scenario, User
from personalens_utils.llm import CallKind, Message, Request, registry
from personalens_utils.prompts import dialogue as P
from personalens_utils.prompts import official
from personalens_utils.prompts.official import OfficialPrompts
from personalens_utils.prompts.render import (
    render_fields,
    render_history,
    render_interactions,
    render_preferences,
)
from personalens_utils.reference.situation import SITUATION_FIELDS

from .settings import AssistantSetting

USER_TEMPERATURE = 0.5
ASSISTANT_TEMPERATURE = 0.0
MAX_TOKENS = 800

Turn = Mapping[str, str]


@dataclass(frozen=True)
class ScenarioContext:
    """Everything about one user x task that prompts draw on, limited to the task's domains."""

    scenario: Scenario
    demographics: dict[str, str]
    preferences: dict[str, dict[str, Any]]
    interactions: dict[str, str]

    @classmethod
    def of(cls, scenario: Scenario, user: User) -> ScenarioContext:
        if user.user_id != scenario.user_id:
            raise ValueError(f"scenario {scenario.scenario_id} belongs to user {scenario.user_id}, "
                             f"not user {user.user_id}")
        return cls(scenario, dict(user.demographics), user.preferences_for(scenario.domains),
                   user.interactions_for(scenario.domains))

    @property
    def situation(self) -> dict[str, str]:
        return dict(self.scenario.situation)

    def official_profile(self) -> official.Profile:
        """The material the official scripts fill their prompts from, under their labels."""
        scenario = self.scenario
        return official.Profile(
            task_type=scenario.task_type, domains=list(scenario.domains), demographics=self.demographics,
            user_field=f"user{scenario.user_id}", preferences=self.preferences,
            interactions=self.interactions,
            situation={SITUATION_FIELDS[k]: v for k, v in self.situation.items()},
            user_intent=scenario.user_intent, task_goal=scenario.task_goal,
        )


def assistant_family(model: str) -> str:
    """The official prompt family of an assistant model, chosen by its name as the official scripts
    choose it: Llama, Mistral/Mixtral, else Claude (models the official code does not name get the
    Claude prompts, its chat-message path)."""
    info = registry.lookup(model)
    names = " ".join([model, *((info.name, *info.ids.values()) if info else ())]).lower()
    if "llama" in names:
        return "LLAMA"
    if "mistral" in names or "mixtral" in names:
        return "MISTRAL"
    return "CLAUDE"


def _profile(ctx: ScenarioContext) -> str:
    return P.USER_PROFILE.format(
        demographics=render_fields(ctx.demographics),
        preferences=render_preferences(ctx.preferences),
        interactions=render_interactions(ctx.interactions),
        situation=render_fields(ctx.situation),
        task=ctx.scenario.user_intent,
    )


def user_request(
    ctx: ScenarioContext, turns: Sequence[Turn], model: str, prompts: OfficialPrompts | None = None
) -> Request:
    """The user agent's next message: the opening one when `turns` is empty.

    Kit prompts: the message starts with the profile, which every call of the dialogue repeats word
    for word; `cache_prefix_chars` tells a caching backend where it ends (docs/scale.md). With
    `prompts` (the official templates) the call is the official script's.
    """
    if prompts is not None:
        system, prompt = official.user_prompt(prompts, ctx.official_profile(), turns)
        cache: dict[str, int] = {}
    else:
        system, profile = P.USER_SYSTEM, _profile(ctx)
        if turns:
            prompt = P.USER_NEXT.format(profile=profile, history=render_history(turns))
        else:
            prompt = P.USER_OPENING.format(profile=profile)
        cache = {"cache_prefix_chars": len(profile)}
    context = {
        "demographics": ctx.demographics,
        "preferences": ctx.preferences,
        "interactions": ctx.interactions,
        "situation": ctx.situation,
        "task": ctx.scenario.task_context(),
        "turn": sum(t["role"] == "user" for t in turns),
        "dialogue": [dict(t) for t in turns],
        **cache,
    }
    return Request(kind=CallKind.USER_TURN, system=system, messages=(Message("user", prompt),),
                   model=model, temperature=USER_TEMPERATURE, max_tokens=MAX_TOKENS, context=context)


def assistant_system(setting: AssistantSetting, ctx: ScenarioContext) -> str:
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


def assistant_request(
    setting: AssistantSetting, ctx: ScenarioContext, turns: Sequence[Turn], model: str,
    prompts: OfficialPrompts | None = None,
) -> Request:
    """The assistant's next reply; it sees only its setting's context. Kit prompts: the context in
    the system text and the dialogue as chat messages; official prompts (`prompts`): the official
    system text and one user message holding the context parts and the transcript.

    The `oracle` entry is the user's whole profile for the task; only the offline backend's reference
    assistants read it (assistants/reference.py), a real model never sees it.
    """
    if prompts is not None:
        system, text = official.assistant_prompt(prompts, ctx.official_profile(), setting.name,
                                                 assistant_family(model), turns)
        messages: tuple[Message, ...] = (Message("user", text),)
    else:
        system = assistant_system(setting, ctx)
        messages = tuple(Message(t["role"], t["content"] or P.EMPTY_CLOSING) for t in turns)  # type: ignore[arg-type]
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
    return Request(kind=CallKind.ASSISTANT_TURN, system=system, messages=messages,
                   model=model, temperature=ASSISTANT_TEMPERATURE, max_tokens=MAX_TOKENS, context=context)
