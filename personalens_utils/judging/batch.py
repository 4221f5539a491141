"""Judging through the Anthropic Message Batches API, at batch prices (docs/scale.md).

The requests and records are those of online judging (`judging.runner`); what differs is that the
calls go out in batches whose ids are kept in the run store, so a rerun polls instead of resubmitting.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from personalens_utils.llm.batch import BatchRunner, Outcome
from personalens_utils.llm.client import LLMClient
from personalens_utils.prompts import judge as prompts
from personalens_utils.store import RunStore

from .answers import combine, error_fields, judgment_record, score_fields
from .dimensions import DEFAULT_JUDGE_MODEL, Dimension, dimensions_from, judge_model_key, judgment_id
from .plan import DIALOGUES, JUDGMENTS, Select, check_dialogue, judgeable, pending_work
from .report import JudgingReport
from .requests import ContextFor, dimension_requests, reminder_request


def run_judging_batch(
    store: RunStore,
    client: LLMClient,
    context_for: ContextFor,
    *,
    judge_model: str = DEFAULT_JUDGE_MODEL,
    dimensions: Iterable[str] | None = None,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
    select: Select | None = None,
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
    to_judge = judgeable(dialogues, select)
    done = store.ids(JUDGMENTS, include_errors=False)
    work = pending_work(to_judge, done, dims, judge_model, prompt_version)
    report = JudgingReport.planned(model_key, prompt_version, dims, dialogues, to_judge, work)
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
            key[:-1] + "2": reminder_request(firsts[key][1], outcome.response.text, firsts[key][0])
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
            records.append(
                judgment_record(dialogue_id, dim, model_key, prompt_version, client.backend_name, fields)
            )
    store.extend(JUDGMENTS, records)
    report.count_written(records)
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
            answers.append(combine(dimension, first.response.text, None))
        elif second is None:
            return None
        elif second.response is None:
            errors.append(f"{where}format reminder: {second.error}")
        else:
            answers.append(combine(dimension, first.response.text, second.response.text))
    if errors:
        return error_fields("batch entry failed: " + "; ".join(errors))
    return score_fields(dimension, answers)
