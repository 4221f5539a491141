"""Judging through the Anthropic Message Batches API, at batch prices (docs/scale.md).

A stage on the engine like online judging, with its plan, requests, records and ask-again policy
(`judging.plan`, `judging.asking`); only who answers the calls differs. `_BatchAnswers` stands in
for the client: a pass of the stage's work over every dialogue learns which calls it makes, those
go out together (`llm.batch.BatchRunner`, whose batch ids are kept in the run store so a rerun polls
instead of resubmitting), and the next pass reads the answers, which is where unreadable ones ask
their format reminder, as `engine.ask_parsed` does online. When a pass asks nothing new, or batches
are still in flight after `max_wait_s`, the engine runs the work once more and stores the
judgments; those still awaited are the report's `pending`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from personalens_utils.judging.answers import judgment_record
from personalens_utils.judging.asking import judge_dimension
from personalens_utils.judging.config import JudgingConfig
from personalens_utils.judging.dimensions import Dimension
from personalens_utils.judging.plan import JudgingPlan, plan_judging
from personalens_utils.judging.requests import ContextFor
from personalens_utils.llm import LLMError, Request, Response
from personalens_utils.llm.batch import BatchEntryError, BatchRunner, Outcome
from personalens_utils.llm.client import LLMClient
from personalens_utils.runstore import engine
from personalens_utils.runstore.engine import Asker, Item, StageReport
from personalens_utils.runstore.records import DialogueSummary, Judgment, Record
from personalens_utils.runstore.store import RunStore, StoredBatches

STAGE = "judging"


class _Unasked(LLMError):
    """A call no batch has answered yet, met while learning the calls: it ends that call's asking."""


class _Awaited(Exception):
    """A call whose batch is still in flight, met in the last pass: its judgment is left for later."""


@dataclass
class _BatchAnswers:
    """The batches' outcomes by key "<judgment id>:<call>:<attempt>" (the keys earlier versions
    stored), and the requests of the last pass that have none."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    unasked: dict[str, Request] = field(default_factory=dict)
    learning: bool = True


@dataclass
class _BatchCall:
    """The k-th call of one judgment, answered from the batches: its first question, then its reminder."""

    answers: _BatchAnswers
    key: str
    where: str
    attempt: int = 0

    async def acomplete(self, request: Request, *, use_cache: bool | None = None) -> Response:
        self.attempt += 1
        key = f"{self.key}:{self.attempt}"
        outcome = self.answers.outcomes.get(key)
        if outcome is None:
            if not self.answers.learning:
                raise _Awaited(key)
            self.answers.unasked[key] = request
            raise _Unasked(key)
        if outcome.response is None:
            reminder = "format reminder: " if self.attempt > 1 else ""
            raise BatchEntryError(f"batch entry failed: {self.where}{reminder}{outcome.error}")
        return outcome.response


def _judge_batched(
    planned: JudgingPlan, context_for: ContextFor, config: JudgingConfig, answers: _BatchAnswers,
) -> engine.Stage[DialogueSummary]:
    """The stage: each dialogue's judgments from the batches' answers; those still awaited are pending.
    Each pass reads the dialogue and makes its context again, so no pass holds every context."""

    async def work(_: LLMClient, item: Item[DialogueSummary]) -> list[Record]:
        context = context_for(planned.dialogue(item.payload))
        finished: list[Record] = []
        awaited = 0
        for dim, k in planned.todo(item.payload.id, item.ids):
            jid = planned.judgment_id(item.payload.id, dim.name, k)
            try:
                fields = await judge_dimension(_caller(answers, jid, dim), dim, context, config.judge_model,
                                               config.prompts, k)
            except _Awaited:
                awaited += 1
                continue
            variant = config.prompts.judge_variant(dim, config.prompt_version, k)
            finished.append(judgment_record(item.payload.id, dim, planned.judge, variant, fields))
        if awaited:
            raise engine.Pending(finished, awaited)
        return finished

    return engine.Stage(STAGE, Judgment, work)


def _caller(answers: _BatchAnswers, judgment_id: str, dimension: Dimension) -> Callable[[int], Asker]:
    """Who answers the k-th call of a judgment: a `_BatchCall` keyed by the judgment id and k."""

    def call(k: int) -> Asker:
        return _BatchCall(answers, f"{judgment_id}:{k}", f"turn {k + 1}: " if dimension.turn_level else "")

    return call


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
    planned = plan_judging(store, config, config.judge_on(client))
    answers = _BatchAnswers()
    stage = _judge_batched(planned, context_for, config, answers)
    items = planned.plan.items
    before, kinds = client.totals(), client.calls_by_kind()
    report = StageReport(STAGE, details=planned.details())
    with store.writing(STAGE):
        with client.stage(STAGE):
            while True:
                answers.unasked = {}
                client.run_all([lambda item=item: stage.work(client, item) for item in items],
                               desc="judging (batch requests)", pool_size=max(1, len(items)))
                if not answers.unasked:
                    break
                got = runner.run(answers.unasked)
                answers.outcomes |= got
                if len(got) < len(answers.unasked):  # still in flight after max_wait_s
                    break
        asked, asked_kinds = client.totals(), client.calls_by_kind()
        answers.learning = False
        engine.run_stage(stage, store, client, planned.plan, report=report,
                         options=engine.StageOptions(desc=f"judging ({planned.model_key})"))
    report.spent(before, asked)
    report.spent_by_kind(kinds, asked_kinds)
    report.elapsed_s = time.perf_counter() - started
    planned.note_on_card(store, report)
    return report
