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
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from personalens_utils.data import Benchmark, UsersArg, resolve_users
from personalens_utils.data.types import SITUATION_FIELDS
from personalens_utils.judging.parsing import ParsedAnswer, parse_score, parse_verdict
from personalens_utils.llm import CallKind, FatalError, LLMError, Message, Request
from personalens_utils.llm import registry as model_registry
from personalens_utils.llm.batch import BatchRunner, Outcome
from personalens_utils.llm.budget import CostEstimate, Tally
from personalens_utils.llm.client import LLMClient
from personalens_utils.prompts import judge as prompts
from personalens_utils.shards import Shard
from personalens_utils.simulation.loop import ABORTING_STATUSES
from personalens_utils.simulation.prompting import (
    EMPTY_CLOSING,
    ScenarioContext,
    render_history,
    render_interactions,
    render_preferences,
)
from personalens_utils.store import RunStore, stable_id

ContextFor = Callable[[Mapping[str, Any]], Mapping[str, Any]]

DIALOGUES = "dialogues"
JUDGMENTS = "judgments"
JUDGE_TEMPERATURE = 0.0
DEFAULT_JUDGE_MODEL = "Claude 3.5 Sonnet"
JUDGEABLE_STATUSES = ("terminated", "turn_cap")
RETRY_SEPARATOR = "\n\n----- answer to the format reminder -----\n\n"
TURN_SEPARATOR = "\n\n----- after assistant turn {turn} -----\n\n"
ANSWER_TOKENS = 300
"""Answer length assumed by `estimate_judging` (a score line and a few sentences of justification)."""


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


def build_prompt(
    dimension: Dimension, context: Mapping[str, Any], turn: int | None = None
) -> tuple[str, str]:
    """The judge prompt for one dimension, filled from a judge context (docs/architecture.md).

    Returned as (head, tail): the head (instructions, scale, the user's profile) is the same for every
    call on this dimension and profile, so a provider can serve it from its prompt cache.
    """
    conversation = render_conversation(context["dialogue"])
    task = context["task"]
    if dimension.family == "task_completion":
        return prompts.TASK_COMPLETION_HEAD, prompts.TASK_COMPLETION_TAIL.format(
            conversation=conversation, goal=task["task_goal"]
        )
    if dimension.family == "personalization":
        head = prompts.PERSONALIZATION_HEAD.format(
            levels=prompts.PERSONALIZATION_LEVELS,
            demographics=_render_fields(context.get("demographics") or {}),
            preferences=render_preferences(context.get("preferences") or {}),
            task_description=task["task_description"],
            interactions=render_interactions(context.get("interactions") or {}),
            situation=_render_fields(context.get("situation") or {}),
        )
        tail = prompts.TURN_PERSONALIZATION_TAIL if dimension.turn_level else prompts.PERSONALIZATION_TAIL
        return head, tail.format(turn=turn, conversation=conversation)
    natural = dimension.family == "naturalness"
    head = prompts.NATURALNESS_HEAD if natural else prompts.COHERENCE_HEAD
    tail = prompts.NATURALNESS_TAIL if natural else prompts.COHERENCE_TAIL
    speaker = str(dimension.speaker)
    return head.format(speaker=speaker, speaker_upper=speaker.upper()), tail.format(conversation=conversation)


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


def _reminder(request: Request, answer: str, dimension: Dimension) -> Request:
    """The retry: the same conversation plus the unreadable answer and a format reminder."""
    form = "True or False" if dimension.family == "task_completion" else f"<{dimension.low}-{dimension.high}>"
    note = prompts.RETRY_REMINDER.format(label=dimension.label, form=form)
    messages = (*request.messages, Message("assistant", answer or "(empty answer)"), Message("user", note))
    return replace(request, messages=messages, context={**request.context, "retry": True})


# -- one dialogue ------------------------------------------------------------------------------------


@dataclass
class _Answer:
    parsed: ParsedAnswer
    raw: str
    attempts: int


def _combine(dimension: Dimension, first: str, second: str | None) -> _Answer:
    """The answer behind a score: the first reply, or the first and the reply to the format reminder."""
    parsed = dimension.parse(first)
    if parsed.ok or second is None:
        return _Answer(parsed, first, 1)
    again = dimension.parse(second)
    return _Answer(again if again.ok else parsed, first + RETRY_SEPARATOR + second, 2)


async def _ask(client: LLMClient, request: Request, dimension: Dimension) -> _Answer:
    """Ask, and ask once more with a format reminder if the answer holds no valid score."""
    first = (await client.acomplete(request)).text
    if dimension.parse(first).ok:
        return _combine(dimension, first, None)
    second = (await client.acomplete(_reminder(request, first, dimension))).text
    return _combine(dimension, first, second)


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


def _score_fields(dimension: Dimension, answers: Sequence[_Answer]) -> dict[str, Any]:
    """Score fields of one judgment record (status, score, turn_scores, explanation, raw, attempts)."""
    if not dimension.turn_level:
        (answer,) = answers
        ok = answer.parsed.ok
        return {
            "status": "ok" if ok else "missing",
            "score": answer.parsed.score,
            "turn_scores": None,
            "explanation": answer.parsed.explanation if ok else f"no valid score: {answer.parsed.problem}",
            "raw": answer.raw,
            "attempts": answer.attempts,
        }
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


def _error_fields(explanation: str) -> dict[str, Any]:
    return {"status": "error", "score": None, "turn_scores": None, "explanation": explanation, "raw": "",
            "attempts": 0}


def _record(dialogue_id: str, dimension: Dimension, model_key: str, prompt_version: str, backend: str,
            fields: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": judgment_id(dialogue_id, dimension.name, model_key, prompt_version),
        "dialogue_id": dialogue_id,
        "dimension": dimension.name,
        "judge_model": model_key,
        "prompt_version": prompt_version,
        "backend": backend,
        **fields,
    }


async def _judge_one(
    client: LLMClient, dimension: Dimension, context: Mapping[str, Any], judge_model: str
) -> dict[str, Any]:
    requests = dimension_requests(dimension, context, judge_model)
    answers = await asyncio.gather(*(_ask(client, r, dimension) for r in requests))
    return _score_fields(dimension, answers)


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
            outcome = _error_fields(f"{type(outcome).__name__}: {outcome}")
        records.append(
            _record(dialogue["id"], dimension, model_key, prompt_version, client.backend_name, outcome)
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
    pending_in_batches: int = 0
    shard: str | None = None
    left_by_budget: int = 0
    """Judgments not stored because `max_cost_usd` was reached; the next run makes them."""

    @property
    def status(self) -> str:
        return "budget reached" if self.left_by_budget else "complete"

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
    batch: bool = False,
    shard: str | Shard | None = None,
    max_cost_usd: float | None = None,
) -> JudgingReport:
    """Judge every finished dialogue in `store` not yet judged by `judge_model` on `dimensions`.

    `context_for(dialogue_record)` gives that dialogue's judge context (see `judge_context` and
    `benchmark_contexts`). Records are appended in batches of `flush_every`, so a killed run loses
    at most one batch and the next run picks up the rest. A `FatalError` (bad key, bad request)
    stops the run after saving what was finished; other llm failures become error records.
    `batch=True` sends the calls through the Message Batches API instead (`run_judging_batch`).
    `shard="i/n"` judges only the dialogues of that shard (see `shards`); `max_cost_usd` refuses new
    calls once this much is spent: judgments cut short are not stored, `report.status` says
    "budget reached", and a rerun with a higher limit does only what is left.
    """
    select = sharded(select, shard)
    if batch and max_cost_usd is not None:
        raise ValueError(
            "max_cost_usd cannot stop a Message Batch part-way (the whole batch is paid once submitted); "
            "check estimate_judging(..., batch=True) first, or judge online with a budget"
        )
    if batch:
        return run_judging_batch(store, client, context_for, judge_model=judge_model, dimensions=dimensions,
                                 prompt_version=prompt_version, select=select)
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
            if client.budget_reached:
                report.left_by_budget += len(todo)
                return
            records = await judge_dialogue(client, dialogue, context, todo, judge_model, prompt_version)
            if client.budget_reached:  # calls refused by the limit came back as error records: leave them
                kept = [r for r in records if r["status"] != "error"]
                report.left_by_budget += len(records) - len(kept)
                records = kept
            with lock:
                buffer.extend(records)
            flush(at_least=flush_every)

        return run

    jobs = [job(d, todo, ctx) for (d, todo), ctx in zip(work, contexts, strict=True)]
    report.shard = str(shard) if shard else None
    try:
        with client.stage("judging"), client.spending_limit(max_cost_usd):
            client.run_all(jobs, desc=f"judging ({model_key})")
    finally:
        flush()
        report.seconds = time.perf_counter() - started
    return report


# -- batch judging -----------------------------------------------------------------------------------


def run_judging_batch(
    store: RunStore,
    client: LLMClient,
    context_for: ContextFor,
    *,
    judge_model: str = DEFAULT_JUDGE_MODEL,
    dimensions: Iterable[str] | None = None,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
    select: Callable[[Mapping[str, Any]], bool] | None = None,
    poll_interval_s: float = 60.0,
    max_rounds: int = 3,
    max_wait_s: float | None = None,
) -> JudgingReport:
    """`run_judging` through the Anthropic Message Batches API, at batch prices (docs/scale.md).

    The requests are those online judging sends. Batch ids and their custom_id -> request map are
    kept in the run store (`batches`, `batch_results`, see `llm.batch`), so after a kill or a closed
    notebook a rerun polls what was submitted instead of submitting it again. An unreadable answer
    gets its format reminder in a next batch; entries that errored or expired are resubmitted up to
    `max_rounds` times, then stored as error records with the reason. With `max_wait_s` the call
    returns after that long; the `pending_in_batches` judgments are finished by a later call.
    """
    started = time.perf_counter()
    dims = dimensions_from(dimensions)
    model_key = judge_model_key(judge_model)
    runner = BatchRunner(client, store, poll_interval_s=poll_interval_s, max_rounds=max_rounds,
                         max_wait_s=max_wait_s)
    dialogues = store.records(DIALOGUES)
    judgeable = [
        d for d in dialogues if d.get("status") in JUDGEABLE_STATUSES and (select is None or select(d))
    ]
    done = store.ids(JUDGMENTS, include_errors=False)
    work = pending_work(judgeable, done, dims, judge_model, prompt_version)
    report = JudgingReport(
        judge_model=model_key, prompt_version=prompt_version, dimensions=[d.name for d in dims],
        dialogues_in_store=len(dialogues), dialogues_judgeable=len(judgeable),
        dialogues_skipped_error=sum(1 for d in dialogues if d.get("status") not in JUDGEABLE_STATUSES),
        judgments_done_before=len(judgeable) * len(dims) - sum(len(todo) for _, todo in work),
        judgments_written=0,
    )
    for dialogue, _ in work:
        check_dialogue(dialogue, store)
    planned = []  # (dialogue id, dimension, judgment id, its calls); keys "<judgment id>:<call>:<attempt>"
    for dialogue, todo in work:
        context = context_for(dialogue)
        for dim in todo:
            jid = judgment_id(dialogue["id"], dim.name, model_key, prompt_version)
            planned.append((dialogue["id"], dim, jid, dimension_requests(dim, context, judge_model)))
    firsts = {f"{jid}:{k}:1": (dim, r) for _, dim, jid, reqs in planned for k, r in enumerate(reqs)}
    with client.stage("judging"):
        got = runner.run({key: r for key, (_, r) in firsts.items()})
        reminders = {
            key[:-1] + "2": _reminder(firsts[key][1], outcome.response.text, firsts[key][0])
            for key, outcome in got.items()
            if outcome.response is not None and not firsts[key][0].parse(outcome.response.text).ok
        }
        if reminders:
            got |= runner.run(reminders)
    records = []
    for dialogue_id, dim, jid, reqs in planned:
        calls = [(got.get(f"{jid}:{k}:1"), got.get(f"{jid}:{k}:2")) for k in range(len(reqs))]
        fields = _batch_fields(dim, calls)
        if fields is None:
            report.pending_in_batches += 1
        else:
            records.append(_record(dialogue_id, dim, model_key, prompt_version, client.backend_name, fields))
    store.extend(JUDGMENTS, records)
    report.judgments_written = len(records)
    for rec in records:
        report.status_counts[rec["status"]] = report.status_counts.get(rec["status"], 0) + 1
    report.seconds = time.perf_counter() - started
    return report


def _batch_fields(
    dimension: Dimension, calls: Sequence[tuple[Outcome | None, Outcome | None]]
) -> dict[str, Any] | None:
    """Record fields from each call's (first, reminder) batch outcomes; None while one is still awaited."""
    answers, errors = [], []
    for k, (first, second) in enumerate(calls, start=1):
        where = f"turn {k}: " if dimension.turn_level else ""
        if first is None:
            return None
        if first.response is None:
            errors.append(where + first.error)
            continue
        if dimension.parse(first.response.text).ok:
            answers.append(_combine(dimension, first.response.text, None))
        elif second is None:
            return None
        elif second.response is None:
            errors.append(f"{where}format reminder: {second.error}")
        else:
            answers.append(_combine(dimension, first.response.text, second.response.text))
    if errors:
        return _error_fields("batch entry failed: " + "; ".join(errors))
    return _score_fields(dimension, answers)


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


def sharded(
    select: Callable[[Mapping[str, Any]], bool] | None, shard: str | Shard | None
) -> Callable[[Mapping[str, Any]], bool] | None:
    """`select` narrowed to the dialogues of one shard ("i/n"); all judgments of a dialogue go together."""
    part = Shard.parse(shard)
    if part is None:
        return select
    return lambda dialogue: part.owns(dialogue["id"]) and (select is None or select(dialogue))


def estimate_judging(
    store: RunStore,
    context_for: ContextFor,
    *,
    judge_model: str = DEFAULT_JUDGE_MODEL,
    dimensions: Iterable[str] | None = None,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
    select: Callable[[Mapping[str, Any]], bool] | None = None,
    shard: str | Shard | None = None,
    backend: str = "",
    batch: bool = False,
    answer_tokens: int = ANSWER_TOKENS,
    sample: int = 300,
) -> CostEstimate:
    """Calls, tokens and cost of the judgments `run_judging` with these arguments would still make.

    The prompts are built for up to `sample` of the dialogues to judge and scaled up per dimension;
    answers are assumed to be `answer_tokens` long and format reminders are not counted.
    """
    select = sharded(select, shard)
    dims = dimensions_from(dimensions)
    judgeable = [d for d in store.records(DIALOGUES)
                 if d.get("status") in JUDGEABLE_STATUSES and (select is None or select(d))]
    work = pending_work(judgeable, store.ids(JUDGMENTS, include_errors=False), dims, judge_model,
                        prompt_version)
    tally = Tally(backend, batch=batch)
    contexts: dict[str, Mapping[str, Any]] = {}
    for dim in dims:
        wanted = [dialogue for dialogue, todo in work if dim in todo]
        chosen = wanted[:: max(1, len(wanted) // sample)]
        for dialogue in chosen:
            if dialogue["id"] not in contexts:
                contexts[dialogue["id"]] = context_for(dialogue)
            context = contexts[dialogue["id"]]
            tally.add_requests("judging", dimension_requests(dim, context, judge_model), answer_tokens,
                               weight=len(wanted) / len(chosen))
    judgments = sum(len(todo) for _, todo in work)
    return tally.estimate([
        f"{judgments} judgments of {len(work)} dialogues to make; prompts built for {len(contexts)} of them",
        f"answers assumed {answer_tokens} tokens; the format reminder after an unreadable answer not counted",
        "turn-level personalization: one call per assistant turn",
    ])


def judged_users(store: RunStore, select: Callable[[Mapping[str, Any]], bool] | None = None) -> list[int]:
    """User indices of the judgeable dialogues in the store: the profiles judging needs loaded."""
    return sorted(
        {
            int(d["user_id"])
            for d in store.records(DIALOGUES)
            if d.get("status") in JUDGEABLE_STATUSES and (select is None or select(d))
        }
    )
