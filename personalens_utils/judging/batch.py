"""Judging through the Anthropic Message Batches API, at batch prices (docs/scale.md).

The plan, requests and records are those of online judging (`judging.plan`, `judging.runner`);
what differs is that the calls go out in batches whose ids are kept in the run store
(`StoredBatches`), so a rerun polls instead of resubmitting.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from personalens_utils import engine
from personalens_utils.engine import StageReport
from personalens_utils.llm.batch import BatchRunner, Outcome
from personalens_utils.llm.client import LLMClient
from personalens_utils.records import Batch, BatchEntry, Judgment
from personalens_utils.store import RunStore

from .answers import combine, error_fields, judgment_record, score_fields
from .config import JudgingConfig
from .dimensions import Dimension
from .plan import plan_judging
from .requests import ContextFor, dimension_requests, reminder_request

STAGE = "judging"


@dataclass(frozen=True)
class StoredBatches:
    """The `llm.batch.BatchStore` of a run store: its `Batch` and `BatchEntry` tables, each line
    checked against its record type on the way in and out."""

    store: RunStore

    def batches(self) -> list[dict[str, Any]]:
        return [b.to_json() for b in self.store.read(Batch)]

    def results(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.store.read(BatchEntry)]

    def result_ids(self) -> set[str]:
        return self.store.ids(BatchEntry)

    def add_batch(self, record: dict[str, Any]) -> None:
        self.store.append(Batch.from_json(record, "a batch the API accepted"))

    def add_results(self, records: list[dict[str, Any]]) -> None:
        self.store.extend([BatchEntry.from_json(r, "an entry of an ended batch") for r in records])


def run_judging_batch(
    store: RunStore, client: LLMClient, context_for: ContextFor, config: JudgingConfig | None = None
) -> StageReport:
    """`run_judging` through the Anthropic Message Batches API, at batch prices (docs/scale.md).

    The requests are those online judging sends. Batch ids and their custom_id -> request map are
    kept in the run store (`records.Batch`, `records.BatchEntry`), so after a kill or a closed
    notebook a rerun polls what was submitted instead of submitting it again. An unreadable answer
    gets its format reminder in a next batch; entries that errored or expired are resubmitted up to
    `max_rounds` times, then stored as error records with the reason. With `max_wait_s` the call
    returns after that long; the report's `pending` judgments are finished by a later call.
    """
    config = config or JudgingConfig()
    started = time.perf_counter()
    runner = BatchRunner(client, StoredBatches(store), poll_interval_s=config.poll_interval_s,
                         max_rounds=config.max_rounds, max_wait_s=config.max_wait_s)
    planned = plan_judging(store, config, client.backend_name)
    prompts = config.prompts
    report = StageReport(STAGE, details=planned.details())
    report.start(planned.plan)
    model_key = planned.model_key
    calls = []  # (dialogue id, dimension, judgment id, its calls); keys "<judgment id>:<call>:<attempt>"
    for item in planned.plan.items:
        context = context_for(item.payload)
        for dim in planned.todo(item.payload.id, item.ids):
            jid = planned.ids[item.payload.id, dim.name]
            requests = dimension_requests(dim, context, config.judge_model, prompts)
            calls.append((item.payload.id, dim, jid, requests))
    firsts = {f"{jid}:{k}:1": (dim, r) for _, dim, jid, reqs in calls for k, r in enumerate(reqs)}
    before = client.totals()
    with client.stage(STAGE):
        got = runner.run({key: r for key, (_, r) in firsts.items()})
        reminders = {
            key[:-1] + "2": reminder_request(firsts[key][1], outcome.response.text, firsts[key][0])
            for key, outcome in got.items()
            if outcome.response is not None and not firsts[key][0].parse(outcome.response.text).ok
            and prompts.judge_set(firsts[key][0]).reminds
        }
        if reminders:
            got |= runner.run(reminders)
    records: list[Judgment] = []
    for dialogue_id, dim, jid, reqs in calls:
        outcomes = [(got.get(f"{jid}:{k}:1"), got.get(f"{jid}:{k}:2")) for k in range(len(reqs))]
        fields = _batch_fields(dim, outcomes, reminded=prompts.judge_set(dim).reminds)
        if fields is None:
            report.pending += 1
        else:
            name, version = prompts.judge_identity(dim, config.prompt_version)
            records.append(judgment_record(dialogue_id, dim, model_key, version, client.backend_name, fields,
                                           name))
    engine.store_finished(store, report, records)
    report.spent(before, client.totals())
    report.elapsed_s = time.perf_counter() - started
    return report


def _batch_fields(
    dimension: Dimension, calls: Sequence[tuple[Outcome | None, Outcome | None]], *, reminded: bool = True
) -> dict[str, Any] | None:
    """Record fields from each call's (first, reminder) batch outcomes; None while one is still awaited
    (official calls get no reminder: `reminded=False`)."""
    answers, errors = [], []
    for k, (first, second) in enumerate(calls, start=1):
        where = f"turn {k}: " if dimension.turn_level else ""
        if first is None:
            return None
        if first.response is None:
            errors.append(where + first.error)
            continue
        if dimension.parse(first.response.text).ok or not reminded:
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
