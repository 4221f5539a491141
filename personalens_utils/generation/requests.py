"""One request builder per generation step: the rendered prompt plus the structured context.

The context holds the facts the prompt was rendered from (demographics, the domain's preference
types, the task), so the offline backend can answer from them; a real model sees only the text.
Each builder returns a `StepCall`: the request and the parser that reads its answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from personalens_utils.generation import parsing
from personalens_utils.llm.types import CallKind, Message, Request
from personalens_utils.prompt_templates import generation as prompts
from personalens_utils.prompt_templates.render import render_demographics, render_preferences_nested
from personalens_utils.reference.schema import Domain, PreferenceType, Schema

MASK = "mask"
PREFERENCES = "preferences"
INTERACTIONS = "interactions"
SD_TASKS = "sd_tasks"
MD_TASKS = "md_tasks"
SITUATION = "situation"
STEPS = (SD_TASKS, MD_TASKS, MASK, PREFERENCES, INTERACTIONS, SITUATION)

_MAX_TOKENS = {MASK: 400, PREFERENCES: 800, INTERACTIONS: 900, SD_TASKS: 2500, MD_TASKS: 4000, SITUATION: 400}
MD_TASKS_PER_CALL = 8
"""Multi-domain tasks are asked for in chunks, so an answer fits the 4,096 output tokens of the
paper's Claude 3 models; each chunk sees the tasks written before it."""


@dataclass(frozen=True)
class ModelSettings:
    """The model every generation call uses (the paper used Claude 3 Sonnet) and its sampling."""

    model: str = "claude-3-sonnet"
    temperature: float = 1.0


@dataclass(frozen=True)
class StepCall:
    step: str
    request: Request
    parse: Callable[[str], Any]


def _type_line(ptype: PreferenceType) -> str:
    count = "one or more" if ptype.multi_valued else "one"
    if ptype.categorical:
        options = "; ".join(ptype.options)
        return f"- {ptype.name} (categorical, {count}): {ptype.description} Options: {options}"
    return f"- {ptype.name} (open, {count}): {ptype.description}"


def type_context(ptype: PreferenceType) -> dict[str, Any]:
    return {
        "name": ptype.name,
        "description": ptype.description,
        "categorical": ptype.categorical,
        "multi_valued": ptype.multi_valued,
        "options": list(ptype.options),
        "examples": list(ptype.examples),
    }


def _intents(domain: Domain) -> list[dict[str, str]]:
    return [{"name": i.name, "description": i.description} for i in domain.intents]


def _request(
    step: str, settings: ModelSettings, system: str, prompt: str, context: dict[str, Any]
) -> Request:
    return Request(
        kind=CallKind.GENERATION,
        task=step,
        system=system,
        messages=(Message("user", prompt),),
        model=settings.model,
        temperature=settings.temperature,
        max_tokens=_MAX_TOKENS[step],
        context={"step": step, **context},
    )


def mask_call(demographics: Mapping[str, str], schema: Schema, settings: ModelSettings) -> StepCall:
    names = list(schema.domain_names)
    domains = "\n".join(f"- {d.name}: {d.description}" for d in schema.domains)
    prompt = prompts.MASK.format(demographics=render_demographics(demographics), domains=domains)
    request = _request(MASK, settings, prompts.PROFILE_SYSTEM, prompt,
                       {"demographics": dict(demographics), "domains": names})
    return StepCall(MASK, request, partial(parsing.parse_mask, domains=names))


def preferences_call(demographics: Mapping[str, str], domain: Domain, settings: ModelSettings) -> StepCall:
    prompt = prompts.PREFERENCES.format(
        domain=domain.name,
        domain_description=domain.description.rstrip("."),
        demographics=render_demographics(demographics),
        preference_types="\n".join(_type_line(p) for p in domain.preferences),
    )
    context = {
        "demographics": dict(demographics),
        "domain": domain.name,
        "preference_types": [type_context(p) for p in domain.preferences],
    }
    request = _request(PREFERENCES, settings, prompts.PROFILE_SYSTEM, prompt, context)
    return StepCall(PREFERENCES, request, partial(parsing.parse_preferences, domain=domain))


def interactions_call(
    demographics: Mapping[str, str], domain: Domain, preferences: Mapping[str, Any], settings: ModelSettings
) -> StepCall:
    prompt = prompts.INTERACTIONS.format(
        domain=domain.name,
        demographics=render_demographics(demographics),
        preferences=render_preferences_nested({domain.name: preferences}),
    )
    context = {
        "demographics": dict(demographics),
        "domain": domain.name,
        "domain_description": domain.description,
        "intents": _intents(domain),
        "preferences": dict(preferences),
    }
    request = _request(INTERACTIONS, settings, prompts.PROFILE_SYSTEM, prompt, context)
    return StepCall(INTERACTIONS, request, parsing.parse_interactions)


def sd_tasks_call(domain: Domain, n_tasks: int, settings: ModelSettings) -> StepCall:
    prompt = prompts.SD_TASKS.format(
        n_tasks=n_tasks,
        domain=domain.name,
        domain_description=domain.description.rstrip("."),
        preference_types="\n".join(f"- {p.name}: {p.description}" for p in domain.preferences),
    )
    context = {
        "domain": domain.name,
        "domain_description": domain.description,
        "intents": _intents(domain),
        "preference_types": [type_context(p) for p in domain.preferences],
        "n_tasks": n_tasks,
    }
    request = _request(SD_TASKS, settings, "", prompt, context)
    return StepCall(SD_TASKS, request, partial(parsing.parse_sd_tasks, domain=domain, n_tasks=n_tasks))


def md_tasks_call(
    domains: Sequence[Domain],
    n_tasks: int,
    settings: ModelSettings,
    earlier: Sequence[Mapping[str, Any]] = (),
) -> StepCall:
    """A chunk of at most `MD_TASKS_PER_CALL` multi-domain tasks, after the `earlier` ones."""
    low, high = parsing.MD_DOMAIN_RANGE
    domain_data = "\n".join(
        f"- {d.name}: {d.description} Preference types: {', '.join(d.preference_names)}" for d in domains
    )
    listed = "\n".join(f"- {t['task_description']} ({', '.join(t['relevant_domains'])})" for t in earlier)
    prompt = prompts.MD_TASKS.format(
        n_tasks=n_tasks, domain_data=domain_data, min_domains=low, max_domains=high,
        earlier=prompts.MD_EARLIER.format(tasks=listed) if earlier else "",
    )
    context = {
        "domains": [
            {
                "name": d.name,
                "description": d.description,
                "intents": _intents(d),
                "preference_types": list(d.preference_names),
            }
            for d in domains
        ],
        "n_tasks": n_tasks,
        "domain_range": [low, high],
        "earlier": [list(t["relevant_domains"]) for t in earlier],
    }
    request = _request(MD_TASKS, settings, "", prompt, context)
    by_name = {d.name: d for d in domains}
    descriptions = [t["task_description"] for t in earlier]
    parse = partial(parsing.parse_md_tasks, domains=by_name, n_tasks=n_tasks, earlier=descriptions)
    return StepCall(MD_TASKS, request, parse)


def situation_call(
    demographics: Mapping[str, str],
    preferences: Mapping[str, Mapping[str, Any]],
    task: Mapping[str, Any],
    settings: ModelSettings,
) -> StepCall:
    """The situation of one user x task, conditioned on the preferences of the task's domains."""
    prompt = prompts.SITUATION.format(
        devices=" / ".join(parsing.DEVICES),
        times_of_day=" / ".join(parsing.TIMES_OF_DAY),
        days=" / ".join(parsing.DAYS_OF_WEEK),
        environments=" / ".join(parsing.ENVIRONMENTS),
        demographics=render_demographics(demographics),
        preferences=render_preferences_nested(preferences),
        task_description=task["task_description"],
    )
    context = {
        "demographics": dict(demographics),
        "preferences": {d: dict(v) for d, v in preferences.items()},
        "task": {k: task[k] for k in ("task_id", "task_description", "relevant_domains")},
    }
    request = _request(SITUATION, settings, prompts.PROFILE_SYSTEM, prompt, context)
    return StepCall(SITUATION, request, parsing.parse_situation)


def retry_request(request: Request, answer: str, error: str, attempt: int) -> Request:
    """The request again, with the rejected answer and the reason appended as a correction turn."""
    messages = (*request.messages, Message("assistant", answer or "(empty)"),
                Message("user", prompts.RETRY.format(error=error)))
    context = {**request.context, "attempt": attempt, "previous_error": error}
    return Request(
        kind=request.kind, task=request.task, system=request.system, messages=messages, model=request.model,
        temperature=request.temperature, max_tokens=request.max_tokens, context=context, stop=request.stop,
    )
