"""The online judging run: judge every finished dialogue not yet judged, storing as it goes.

Each (dialogue, dimension, judge model, prompt version) gets exactly one judgment record in the
run store's `judgments` table, so a rerun skips what is done, an interrupted run resumes, and a
second judge model adds records beside the first. A call that fails in the llm layer is stored as
`error` and is judged again on the next run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from personalens_utils.llm import FatalError, LLMError, Request
from personalens_utils.llm.client import LLMClient
from personalens_utils.prompts import judge as prompts
from personalens_utils.shards import Shard
from personalens_utils.simulation.loop import ABORTING_STATUSES
from personalens_utils.store import RunStore

from .answers import Answer, combine, error_fields, judgment_record, score_fields
from .batch import run_judging_batch
from .dimensions import DEFAULT_JUDGE_MODEL, Dimension, dimensions_from, judge_model_key
from .plan import DIALOGUES, JUDGMENTS, Select, check_dialogue, judgeable, pending_work, sharded
from .report import JudgingReport
from .requests import ContextFor, dimension_requests, reminder_request


async def _ask(client: LLMClient, request: Request, dimension: Dimension) -> Answer:
    """Ask, and ask once more with a format reminder if the answer holds no valid score."""
    first = (await client.acomplete(request)).text
    if dimension.parse(first).ok:
        return combine(dimension, first, None)
    second = (await client.acomplete(reminder_request(request, first, dimension))).text
    return combine(dimension, first, second)


async def _judge_one(
    client: LLMClient, dimension: Dimension, context: Mapping[str, Any], judge_model: str
) -> dict[str, Any]:
    requests = dimension_requests(dimension, context, judge_model)
    answers = await asyncio.gather(*(_ask(client, r, dimension) for r in requests))
    return score_fields(dimension, answers)


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
    backend = client.backend_name
    records = []
    for dimension, outcome in zip(dimensions, outcomes, strict=True):
        aborting = isinstance(outcome, FatalError) and outcome.status in ABORTING_STATUSES
        if aborting or not isinstance(outcome, dict | LLMError):
            raise outcome  # a bad key fails every call alike (or it is a bug): stop, keep what is stored
        if isinstance(outcome, BaseException):
            outcome = error_fields(f"{type(outcome).__name__}: {outcome}")
        records.append(
            judgment_record(dialogue["id"], dimension, model_key, prompt_version, backend, outcome)
        )
    return records


def run_judging(
    store: RunStore,
    client: LLMClient,
    context_for: ContextFor,
    *,
    judge_model: str = DEFAULT_JUDGE_MODEL,
    dimensions: Iterable[str] | None = None,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
    select: Select | None = None,
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
    to_judge = judgeable(dialogues, select)
    done = store.ids(JUDGMENTS, include_errors=False)
    work = pending_work(to_judge, done, dims, judge_model, prompt_version)
    report = JudgingReport.planned(model_key, prompt_version, dims, dialogues, to_judge, work)
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
            report.count_written(batch)

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
