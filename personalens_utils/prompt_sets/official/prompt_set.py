"""The official authors' prompts and rules, with templates read from the user's copy of their code
(`prompt_sets.official.templates`; the kit ships none of that text).

Requests: the official scripts' system text and one user message, their temperature and max_tokens;
the context stays the kit's, so the offline backend answers either set, plus `cache_prefix_chars`: where
the part of the message every turn repeats (the filled profile, before the transcript) ends, so a
caching backend marks it without changing the text (docs/scale.md). The assistant's templates
depend on its model's family (Claude, Llama, Mistral), told from the model's name as the official
scripts tell it. The judge prompts exist for every dimension but turn-level personalization, which
is judged with the kit's; an official judge call is asked once (the official script never re-asks).

Rules, since they decide what the next prompt holds: a message ends the dialogue when it contains
the text TERMINATE anywhere, which is then deleted and the message stripped; other messages, the
opening one included, are kept as the model wrote them; a Llama or Mistral assistant's reply loses
its leading whitespace; the cap counts assistant replies, so a capped dialogue ends with the user's
message after the last of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from personalens_utils.base.errors import KitError
from personalens_utils.llm import CallKind, Message, Request, registry
from personalens_utils.prompt_sets.base import JudgedDimension, PromptSet, Setting, Turn
from personalens_utils.prompt_sets.context import ScenarioContext
from personalens_utils.prompt_sets.kit import (
    ASSISTANT_TEMPERATURE,
    JUDGE_TEMPERATURE,
    KIT,
    MAX_TOKENS,
    USER_TEMPERATURE,
    assistant_context,
    user_context,
)
from personalens_utils.prompt_sets.official import templates as official
from personalens_utils.prompt_sets.official.templates import (
    JUDGE_TEMPLATES,
    OFFICIAL_PROMPTS,
    OfficialPrompts,
)
from personalens_utils.prompt_templates.dialogue import TERMINATE
from personalens_utils.reference.situation import SITUATION_FIELDS

OFFICIAL_MAX_TOKENS = 4000
"""The official judge's answer limit (src/evaluate_dialogue.py)."""


class OfficialContextError(KitError, ValueError):
    """A judge context that lacks what the official prompts name."""


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


def scenario_profile(ctx: ScenarioContext) -> official.Profile:
    """The material the official dialogue scripts fill their prompts from, under their labels."""
    scenario = ctx.scenario
    return official.Profile(
        task_type=scenario.task_type, domains=list(scenario.domains), demographics=ctx.demographics,
        user_field=f"user{scenario.user_id}", preferences=ctx.preferences, interactions=ctx.interactions,
        situation={SITUATION_FIELDS[k]: v for k, v in ctx.situation.items()},
        user_intent=scenario.user_intent, task_goal=scenario.task_goal,
    )


def judge_profile(context: Mapping[str, Any]) -> official.Profile:
    """A judge context as the official evaluation script reads the user and the task."""
    task = context["task"]
    if "user_id" not in context:
        raise OfficialContextError("the official personalization prompt names the user: the judge context "
                                   "needs 'user_id' (judge_context gives it)")
    return official.Profile(
        task_type=task["task_type"], domains=list(task["domains"]),
        demographics=context.get("demographics") or {}, user_field=f"user{context['user_id']}",
        preferences=context.get("preferences") or {}, interactions=context.get("interactions") or {},
        situation={SITUATION_FIELDS.get(k, k): v for k, v in (context.get("situation") or {}).items()},
        user_intent=task["user_intent"], task_goal=task["task_goal"],
    )


class OfficialPromptSet(PromptSet):
    """The official prompts (`templates`, read from one copy of the code) and the official rules."""

    name = OFFICIAL_PROMPTS
    reminds = False

    def __init__(self, templates: OfficialPrompts) -> None:
        self.templates = templates

    @classmethod
    def load(cls, official_code: str | Path | None = None) -> Self:
        return cls(official.load_official_prompts(official_code))

    @property
    def version(self) -> str:
        return self.templates.version

    @property
    def folder(self) -> Path:
        """The copy of the official code the templates were read from."""
        return self.templates.folder

    def user_request(self, ctx: ScenarioContext, turns: Sequence[Turn], model: str) -> Request:
        profile = scenario_profile(ctx)
        system, prompt = official.user_prompt(self.templates, profile, turns)
        head = official.user_prompt_head(self.templates, profile, turns)
        return Request(kind=CallKind.USER_TURN, system=system, messages=(Message("user", prompt),),
                       model=model, temperature=USER_TEMPERATURE, max_tokens=MAX_TOKENS,
                       context={**user_context(ctx, turns), "cache_prefix_chars": head})

    def assistant_request(self, setting: Setting, ctx: ScenarioContext, turns: Sequence[Turn],
                          model: str) -> Request:
        profile, family = scenario_profile(ctx), assistant_family(model)
        system, text = official.assistant_prompt(self.templates, profile, setting.name, family, turns)
        head = official.assistant_prompt_head(self.templates, profile, setting.name, family)
        return Request(kind=CallKind.ASSISTANT_TURN, system=system, messages=(Message("user", text),),
                       model=model, temperature=ASSISTANT_TEMPERATURE, max_tokens=MAX_TOKENS,
                       context={**assistant_context(setting, ctx), "cache_prefix_chars": head})

    def check_setting(self, setting: str, assistant_model: str) -> None:
        self.templates.assistant_templates(setting, assistant_family(assistant_model))

    def judge_set(self, dimension: JudgedDimension) -> PromptSet:
        return self if dimension.name in JUDGE_TEMPLATES else KIT

    def judge_version(self, kit_version: str) -> str:
        return self.version

    def judge_requests(self, dimension: JudgedDimension, context: Mapping[str, Any],
                       judge_model: str) -> list[Request]:
        text = official.judge_prompt(self.templates, judge_profile(context), dimension.name,
                                     context["dialogue"])
        return [Request(kind=CallKind.JUDGE, messages=(Message("user", text),), model=judge_model,
                        temperature=JUDGE_TEMPERATURE, max_tokens=OFFICIAL_MAX_TOKENS, task=dimension.name,
                        context={**context, "dimension": dimension.name})]

    def read_user_message(self, text: str, opening: bool) -> tuple[str, bool]:
        if opening or TERMINATE not in text:
            return text, False
        return text.replace(TERMINATE, "").strip(), True

    def kept_reply(self, text: str, assistant_model: str) -> str:
        return text if assistant_family(assistant_model) == "CLAUDE" else text.lstrip()

    def user_messages(self, cap: int) -> int:
        return cap + 1

    def described(self) -> str:
        return (f"the official code's (`prompt_set={self.name}`, read from `{self.folder}`, prompt version "
                f"`{self.version}`); turn-level personalization, which the official code never runs, with "
                "the kit's prompt")

    def judge_details(self, dimensions: Sequence[JudgedDimension]) -> dict[str, str]:
        details = {"prompt_set": self.name, "official_prompt_version": self.version}
        if any(d.turn_level for d in dimensions):
            details["turn_level_prompts"] = "kit (the official code has no turn-level prompt)"
        return details
