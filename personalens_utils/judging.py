"""The judge stage: score stored dialogues on the paper's dimensions and store one record each.

Each (dialogue, dimension, judge model, prompt version) gets exactly one judgment record in the
run store's `judgments` table, so a rerun skips what is done, an interrupted run resumes, and a
second judge model adds records beside the first. An answer with no valid score is asked once
more (with a reminder of the format) and then stored as `missing` with its raw text; a call that
fails in the llm layer is stored as `error` and is judged again on the next run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .data import Benchmark, UsersArg, resolve_users
from .data_records import SITUATION_FIELDS
from .judge_parsing import ParsedAnswer, parse_score, parse_verdict
from .llm import CallKind, FatalError, LLMError, Message, Request
from .llm import registry as model_registry
from .llm.client import LLMClient
from .prompts import judge as prompts
from .simulation.loop import ABORTING_STATUSES
from .simulation.prompting import (
    EMPTY_CLOSING,
    ScenarioContext,
    render_history,
    render_interactions,
    render_preferences,
)
from .store import RunStore, stable_id

ContextFor = Callable[[Mapping[str, Any]], Mapping[str, Any]]

DIALOGUES = "dialogues"
JUDGMENTS = "judgments"
JUDGE_TEMPERATURE = 0.0
DEFAULT_JUDGE_MODEL = "Claude 3.5 Sonnet"
JUDGEABLE_STATUSES = ("terminated", "turn_cap")
RETRY_SEPARATOR = "\n\n----- answer to the format reminder -----\n\n"
TURN_SEPARATOR = "\n\n----- after assistant turn {turn} -----\n\n"


@dataclass(frozen=True)
class Dimension:
    """One thing the judge scores: its prompt family, scale and (for quality) whose turns."""

    name: str
    family: str
    low: int
    high: int
    label: str
    speaker: str | None = None
    turn_level: bool = False

    def parse(self, text: str) -> ParsedAnswer:
        if self.family == "task_completion":
            return parse_verdict(text)
        return parse_score(text, self.label, self.low, self.high)


DIMENSIONS: dict[str, Dimension] = {
    d.name: d
    for d in (
        Dimension("task_completion", "task_completion", 0, 1, "VERDICT:"),
        Dimension("personalization", "personalization", 1, 4, "Personalization Score:"),
        Dimension("naturalness_assistant", "naturalness", 1, 5, "Naturalness Score:", "assistant"),
        Dimension("naturalness_user", "naturalness", 1, 5, "Naturalness Score:", "user"),
        Dimension("coherence_assistant", "coherence", 1, 5, "Coherence Score:", "assistant"),
        Dimension("coherence_user", "coherence", 1, 5, "Coherence Score:", "user"),
        Dimension("turn_personalization", "personalization", 1, 4, "Personalization Score:", turn_level=True),
    )
}
ALL_DIMENSIONS: tuple[str, ...] = tuple(DIMENSIONS)


class JudgingError(ValueError):
    """Judging cannot start as asked: unknown dimension, dialogue without its scenario, bad record."""


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


def judgment_id(dialogue_id: str, dimension: str, judge_model: str, prompt_version: str) -> str:
    return stable_id(dialogue_id, dimension, judge_model, prompt_version)


# -- prompts ---------------------------------------------------------------------------------------


def render_conversation(turns: Sequence[Mapping[str, str]]) -> str:
    """The dialogue as the judge reads it; an empty closing message shows as the assistant saw it."""
    return render_history([{"role": t["role"], "content": t["content"] or EMPTY_CLOSING} for t in turns])


def _render_fields(values: Mapping[str, Any]) -> str:
    if not values:
        return "(none)"
    return "\n".join(
        f"- {SITUATION_FIELDS.get(key, key)}: {', '.join(v) if isinstance(v, list | tuple) else v}"
        for key, v in values.items()
    )


def build_prompt(dimension: Dimension, context: Mapping[str, Any], turn: int | None = None) -> str:
    """The judge prompt for one dimension, filled from a judge context (docs/architecture.md)."""
    conversation = render_conversation(context["dialogue"])
    task = context["task"]
    if dimension.family == "task_completion":
        return prompts.TASK_COMPLETION.format(conversation=conversation, goal=task["task_goal"])
    if dimension.family == "personalization":
        template = prompts.TURN_PERSONALIZATION if dimension.turn_level else prompts.PERSONALIZATION
        return template.format(
            turn=turn,
            levels=prompts.PERSONALIZATION_LEVELS,
            demographics=_render_fields(context.get("demographics") or {}),
            preferences=render_preferences(context.get("preferences") or {}),
            task_description=task["task_description"],
            interactions=render_interactions(context.get("interactions") or {}),
            situation=_render_fields(context.get("situation") or {}),
            conversation=conversation,
        )
    template = prompts.NATURALNESS if dimension.family == "naturalness" else prompts.COHERENCE
    speaker = str(dimension.speaker)
    return template.format(speaker=speaker, speaker_upper=speaker.upper(), conversation=conversation)


def judge_request(
    dimension: Dimension, context: Mapping[str, Any], judge_model: str, turn: int | None = None
) -> Request:
    """One judge call; the context travels along for the offline backend and the records."""
    ctx = {**context, "dimension": dimension.name}
    if turn is not None:
        ctx["turn"] = turn
    prompt = build_prompt(dimension, ctx, turn)
    return Request(
        kind=CallKind.JUDGE,
        messages=(Message("user", prompt),),
        model=judge_model,
        temperature=JUDGE_TEMPERATURE,
        max_tokens=1024,
        task=dimension.name,
        context=ctx,
    )


def _reminder(request: Request, answer: str, dimension: Dimension) -> Request:
    """The retry: the same conversation plus the unreadable answer and a format reminder."""
    form = "True or False" if dimension.family == "task_completion" else f"<{dimension.low}-{dimension.high}>"
    note = prompts.RETRY_REMINDER.format(label=dimension.label, form=form)
    messages = (*request.messages, Message("assistant", answer or "(empty answer)"), Message("user", note))
    return Request(
        kind=request.kind, messages=messages, model=request.model, temperature=request.temperature,
        max_tokens=request.max_tokens, task=request.task, context={**request.context, "retry": True},
    )


# -- one dialogue ------------------------------------------------------------------------------------


@dataclass
class _Answer:
    parsed: ParsedAnswer
    raw: str
    attempts: int


async def _ask(client: LLMClient, request: Request, dimension: Dimension) -> _Answer:
    """Ask, and ask once more with a format reminder if the answer holds no valid score."""
    first = (await client.acomplete(request)).text
    parsed = dimension.parse(first)
    if parsed.ok:
        return _Answer(parsed, first, 1)
    second = (await client.acomplete(_reminder(request, first, dimension))).text
    again = dimension.parse(second)
    return _Answer(again if again.ok else parsed, first + RETRY_SEPARATOR + second, 2)


def assistant_turn_ends(turns: Sequence[Mapping[str, str]]) -> list[int]:
    """Indices just past each assistant turn: the dialogue prefixes turn-level scoring reads."""
    return [i + 1 for i, t in enumerate(turns) if t.get("role") == "assistant"]


async def _judge_one(
    client: LLMClient, dimension: Dimension, context: Mapping[str, Any], judge_model: str
) -> dict[str, Any]:
    """Score fields of one judgment record (status, score, turn_scores, explanation, raw, attempts)."""
    if not dimension.turn_level:
        answer = await _ask(client, judge_request(dimension, context, judge_model), dimension)
        ok = answer.parsed.ok
        return {
            "status": "ok" if ok else "missing",
            "score": answer.parsed.score,
            "turn_scores": None,
            "explanation": answer.parsed.explanation if ok else f"no valid score: {answer.parsed.problem}",
            "raw": answer.raw,
            "attempts": answer.attempts,
        }
    turns = context["dialogue"]
    ends = assistant_turn_ends(turns)
    requests = [
        judge_request(dimension, {**context, "dialogue": turns[:end]}, judge_model, k)
        for k, end in enumerate(ends, start=1)
    ]
    answers = await asyncio.gather(*(_ask(client, r, dimension) for r in requests))
    scores = [a.parsed.score for a in answers]
    valid = [s for s in scores if s is not None]
    notes = [
        f"turn {k}: {a.parsed.explanation if a.parsed.ok else 'no valid score: ' + str(a.parsed.problem)}"
        for k, a in enumerate(answers, start=1)
    ]
    return {
        "status": "ok" if valid else "missing",
        "score": sum(valid) / len(valid) if valid else None,
        "turn_scores": scores,
        "explanation": "\n".join(notes) if notes else "no assistant turn to score",
        "raw": "".join(TURN_SEPARATOR.format(turn=k) + a.raw for k, a in enumerate(answers, start=1)).strip(),
        "attempts": sum(a.attempts for a in answers),
    }


async def judge_dialogue(
    client: LLMClient,
    dialogue: Mapping[str, Any],
    context: Mapping[str, Any],
    dimensions: Sequence[Dimension],
    judge_model: str,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
) -> list[dict[str, Any]]:
    """Judgment records of one dialogue on the given dimensions; llm failures become error records."""
    model_key = judge_model_key(judge_model)
    outcomes = await asyncio.gather(
        *(_judge_one(client, d, context, judge_model) for d in dimensions), return_exceptions=True
    )
    records = []
    for dimension, outcome in zip(dimensions, outcomes, strict=True):
        aborting = isinstance(outcome, FatalError) and outcome.status in ABORTING_STATUSES
        if aborting or not isinstance(outcome, dict | LLMError):
            raise outcome  # a bad key fails every call alike (or it is a bug): stop, keep what is stored
        if isinstance(outcome, BaseException):
            outcome = {
                "status": "error", "score": None, "turn_scores": None,
                "explanation": f"{type(outcome).__name__}: {outcome}", "raw": "", "attempts": 0,
            }
        records.append(
            {
                "id": judgment_id(dialogue["id"], dimension.name, model_key, prompt_version),
                "dialogue_id": dialogue["id"],
                "dimension": dimension.name,
                "judge_model": model_key,
                "prompt_version": prompt_version,
                "backend": client.backend_name,
                **outcome,
            }
        )
    return records


# -- contexts ----------------------------------------------------------------------------------------


def judge_context(ctx: ScenarioContext, dialogue: Mapping[str, Any]) -> dict[str, Any]:
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
        "dialogue": [{"role": t["role"], "content": t["content"]} for t in dialogue["turns"]],
        "ended": dialogue.get("status"),
    }


def benchmark_contexts(benchmark: Benchmark) -> ContextFor:
    """`context_for` of `run_judging` over a loaded benchmark; unknown scenarios raise JudgingError."""

    def context_for(dialogue: Mapping[str, Any]) -> dict[str, Any]:
        try:
            scenario = benchmark.scenario(dialogue["scenario_id"])
            user = benchmark.user(scenario.user_id)
        except KeyError as exc:
            raise JudgingError(
                f"dialogue {dialogue['id']} is about scenario {dialogue['scenario_id']!r}, which the "
                f"benchmark at {benchmark.root} does not hold ({exc.args[0]}); judge it against the "
                "benchmark it was simulated on"
            ) from None
        return judge_context(ScenarioContext.of(scenario, user), dialogue)

    return context_for


# -- the runner --------------------------------------------------------------------------------------


@dataclass
class JudgingReport:
    """What one judging run did, for the notebook to show."""

    judge_model: str
    prompt_version: str
    dimensions: list[str]
    dialogues_in_store: int
    dialogues_judgeable: int
    dialogues_skipped_error: int
    judgments_done_before: int
    judgments_written: int
    status_counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def as_frame(self) -> pd.DataFrame:
        rows = {k: v for k, v in self.__dict__.items() if k not in ("dimensions", "status_counts")}
        rows["dimensions"] = ", ".join(self.dimensions)
        rows.update({f"written_{k}": v for k, v in sorted(self.status_counts.items())})
        return pd.DataFrame({"value": pd.Series(rows, dtype=object)})


def pending_work(
    dialogues: Iterable[Mapping[str, Any]],
    done: set[str],
    dimensions: Sequence[Dimension],
    judge_model: str,
    prompt_version: str,
) -> list[tuple[Mapping[str, Any], list[Dimension]]]:
    """(dialogue, dimensions still to judge) for every dialogue with something left to do."""
    model_key = judge_model_key(judge_model)
    work = []
    for dialogue in dialogues:
        todo = [
            d for d in dimensions
            if judgment_id(dialogue["id"], d.name, model_key, prompt_version) not in done
        ]
        if todo:
            work.append((dialogue, todo))
    return work


def run_judging(
    store: RunStore,
    client: LLMClient,
    context_for: ContextFor,
    *,
    judge_model: str = DEFAULT_JUDGE_MODEL,
    dimensions: Iterable[str] | None = None,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
    select: Callable[[Mapping[str, Any]], bool] | None = None,
    flush_every: int = 2000,
) -> JudgingReport:
    """Judge every finished dialogue in `store` not yet judged by `judge_model` on `dimensions`.

    `context_for(dialogue_record)` gives that dialogue's judge context (see `judge_context` and
    `benchmark_contexts`). Records are appended in batches of `flush_every`, so a killed run loses
    at most one batch and the next run picks up the rest. A `FatalError` (bad key, bad request)
    stops the run after saving what was finished; other llm failures become error records.
    """
    started = time.perf_counter()
    dims = dimensions_from(dimensions)
    model_key = judge_model_key(judge_model)
    dialogues = store.records(DIALOGUES)
    judgeable = [
        d for d in dialogues if d.get("status") in JUDGEABLE_STATUSES and (select is None or select(d))
    ]
    skipped = sum(1 for d in dialogues if d.get("status") not in JUDGEABLE_STATUSES)
    done = store.ids(JUDGMENTS, include_errors=False)
    work = pending_work(judgeable, done, dims, judge_model, prompt_version)
    report = JudgingReport(
        judge_model=model_key, prompt_version=prompt_version, dimensions=[d.name for d in dims],
        dialogues_in_store=len(dialogues), dialogues_judgeable=len(judgeable),
        dialogues_skipped_error=skipped,
        judgments_done_before=len(judgeable) * len(dims) - sum(len(todo) for _, todo in work),
        judgments_written=0,
    )
    for dialogue, _ in work:
        check_dialogue(dialogue, store)
    contexts = [context_for(dialogue) for dialogue, _ in work]  # fail on bad input before any call
    buffer: list[dict[str, Any]] = []
    lock = threading.Lock()

    def flush(at_least: int = 1) -> None:
        with lock:
            if len(buffer) < at_least:
                return
            batch = buffer[:]
            buffer.clear()
            store.extend(JUDGMENTS, batch)
            report.judgments_written += len(batch)
            for rec in batch:
                report.status_counts[rec["status"]] = report.status_counts.get(rec["status"], 0) + 1

    def job(dialogue: Mapping[str, Any], todo: list[Dimension], context: Mapping[str, Any]) -> Callable:
        async def run() -> None:
            records = await judge_dialogue(client, dialogue, context, todo, judge_model, prompt_version)
            with lock:
                buffer.extend(records)
            flush(at_least=flush_every)

        return run

    jobs = [job(d, todo, ctx) for (d, todo), ctx in zip(work, contexts, strict=True)]
    try:
        with client.stage("judging"):
            client.run_all(jobs, desc=f"judging ({model_key})")
    finally:
        flush()
        report.seconds = time.perf_counter() - started
    return report


def check_dialogue(dialogue: Mapping[str, Any], store: RunStore) -> None:
    """A dialogue record has what judging reads; otherwise a JudgingError names the record and field."""
    where = f"{store.path(DIALOGUES)}: dialogue {dialogue.get('id')!r}"
    for key in ("id", "scenario_id", "turns"):
        if key not in dialogue:
            raise JudgingError(f"{where} has no {key!r}")
    turns = dialogue["turns"]
    if not isinstance(turns, list):
        raise JudgingError(f"{where}: 'turns' must be a list, got {type(turns).__name__}")
    for index, turn in enumerate(turns):
        if not (
            isinstance(turn, Mapping)
            and turn.get("role") in ("user", "assistant")
            and isinstance(turn.get("content"), str)
        ):
            raise JudgingError(
                f"{where}: turns[{index}] must be {{'role': 'user' or 'assistant', 'content': str}}, "
                f"got {turn!r}"
            )


# -- reports -----------------------------------------------------------------------------------------


def missing_rate(store: RunStore | pd.DataFrame, judge_model: str | None = None) -> pd.DataFrame:
    """Per judge model and dimension: the backend(s), judgments ok / missing / error, the missing rate.

    The rate is missing / (ok + missing): errors are infrastructure failures, judged again on the
    next run, not answers. For turn-level personalization the turn columns count assistant turns.
    """
    frame = store.frame(JUDGMENTS) if isinstance(store, RunStore) else store
    columns = ["judge_model", "dimension", "backend", "ok", "missing", "error", "missing_rate",
               "turns", "turns_missing", "turn_missing_rate"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    if judge_model is not None:
        frame = frame[frame["judge_model"] == judge_model_key(judge_model)]
    rows = []
    for (model, dimension), group in frame.groupby(["judge_model", "dimension"], sort=False):
        counts = group["status"].value_counts()
        ok, missing, error = (int(counts.get(s, 0)) for s in ("ok", "missing", "error"))
        answered = ok + missing
        row: dict[str, Any] = {
            "judge_model": model, "dimension": dimension, "backend": ", ".join(sorted(set(group["backend"]))),
            "ok": ok, "missing": missing, "error": error,
            "missing_rate": missing / answered if answered else float("nan"),
            "turns": pd.NA, "turns_missing": pd.NA, "turn_missing_rate": float("nan"),
        }
        if DIMENSIONS.get(dimension) is not None and DIMENSIONS[dimension].turn_level:
            answered_turns = group.loc[group["status"] != "error", "turn_scores"]
            turn_lists = [t for t in answered_turns if isinstance(t, list)]
            turns = sum(len(t) for t in turn_lists)
            turns_missing = sum(s is None for t in turn_lists for s in t)
            row.update(turns=turns, turns_missing=turns_missing,
                       turn_missing_rate=turns_missing / turns if turns else float("nan"))
        rows.append(row)
    out = pd.DataFrame(rows, columns=columns)
    out["_order"] = out["dimension"].map({name: i for i, name in enumerate(ALL_DIMENSIONS)})
    return out.sort_values(["judge_model", "_order"]).drop(columns="_order").reset_index(drop=True)


# -- notebook helpers -----------------------------------------------------------------------------------


def dialogue_filter(users: UsersArg = None, task_types: Iterable[str] | None = None) -> Callable[..., bool]:
    """`select` for `run_judging`: dialogues of the given users (a sample name or indices) and task types."""
    wanted_users = resolve_users(users)
    user_set = set(wanted_users) if wanted_users is not None else None
    type_set = set(task_types) if task_types is not None else None
    unknown = sorted((type_set or set()) - {"SD", "MD"})
    if unknown:
        raise JudgingError(f"unknown task types {unknown}; use 'SD' and/or 'MD'")

    def select(dialogue: Mapping[str, Any]) -> bool:
        return (user_set is None or dialogue.get("user_id") in user_set) and (
            type_set is None or dialogue.get("task_type") in type_set
        )

    return select


def judged_users(store: RunStore, select: Callable[[Mapping[str, Any]], bool] | None = None) -> list[int]:
    """User indices of the judgeable dialogues in the store: the profiles judging needs loaded."""
    return sorted(
        {
            int(d["user_id"])
            for d in store.records(DIALOGUES)
            if d.get("status") in JUDGEABLE_STATUSES and (select is None or select(d))
        }
    )
