"""The stage engine: every resumable stage (simulation, judging, consistency, generation) runs here.

A stage offers candidate work items, each naming the record ids it writes. `plan` checks them
against the run store: an item whose records are all stored is already done; an item with an
errored record is redone only when `retry_errors=True`; anything else is to do. The runners'
defaults keep each stage's behaviour from before the engine: simulation False (a dialogue is many
calls; notebook 03 exposes the switch), judging and consistency checks True (a call or two each),
generation always True (the benchmark needs every step). `run_stage` runs
the items through the client's pool (its concurrency bound, a progress bar) and appends each
item's records the moment it finishes, so a killed run loses only the items in flight and a rerun
picks up the rest. Every stage reports with one `StageReport`.

One error policy: a failure of the llm layer (retries exhausted, a refused or fatal call) becomes
an error record that a rerun retries when asked; an authentication failure (`ABORTING_STATUSES`)
fails every call alike, so it stops the run; any other exception is a bug and propagates with
its traceback, and nothing is stored for the item it broke. `ask_parsed` is the one "ask, parse,
ask again" helper the stages use to get a readable answer.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import pandas as pd

from personalens_utils.base.errors import KitError
from personalens_utils.llm import FatalError, LLMClient, LLMError, Request, Response, Usage
from personalens_utils.llm.batch import BatchEntryError
from personalens_utils.llm.client import shared_spending_limit
from personalens_utils.llm.ledger import RoleCalls
from personalens_utils.outputs.display import esc, frame_html, inline
from personalens_utils.runstore.records import Record
from personalens_utils.runstore.store import RunStore

P = TypeVar("P")
T = TypeVar("T")

ABORTING_STATUSES = (401, 403)
"""A fatal error with one of these statuses (bad or missing key) would fail every item alike, so it
stops the run instead of being stored once per item."""


class UnreadableAnswer(KitError, ValueError):
    """A model's answer that its parser cannot read; the message says what is wrong (sent back to it)."""


class Pending(Exception):
    """Raised by a stage's work when answers it needs are still awaited (a Message Batch in flight):
    the `finished` records are stored, the `awaited` ones are counted as pending in the report, and a
    later run collects them."""

    def __init__(self, finished: Sequence[Record], awaited: int):
        super().__init__(f"{awaited} record(s) still awaited")
        self.finished, self.awaited = tuple(finished), awaited


class Asker(Protocol):
    """What `ask_parsed` asks: an `LLMClient`, or a stand-in that answers from Message Batches."""

    async def acomplete(self, request: Request, *, use_cache: bool | None = None) -> Response: ...


def error_message(exc: BaseException) -> str:
    """The message of an error record for an llm failure; anything else is re-raised unchanged.

    Call it in an `except` block: a bug (not an `LLMError`) or an aborting `FatalError` propagates
    with its own traceback.
    """
    if not isinstance(exc, LLMError) or (isinstance(exc, FatalError) and exc.status in ABORTING_STATUSES):
        raise exc
    if isinstance(exc, BatchEntryError):
        return str(exc)  # already the record's explanation: what ended the entry, how often it was sent
    return f"{type(exc).__name__}: {exc}"


# -- ask, parse, ask again ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Asked(Generic[T]):
    """What `ask_parsed` got: the parsed value (None if no answer was readable), every answer's text,
    the problem found in each unreadable one, the responses (for usage), and an llm failure, if any."""

    value: T | None
    answers: tuple[str, ...]
    problems: tuple[str, ...]
    responses: tuple[Response, ...]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def usage(self) -> Usage:
        total = Usage()
        for response in self.responses:
            total = total + response.usage
        return total

    @property
    def cost_usd(self) -> float:
        return sum((r.cost_usd for r in self.responses), 0.0)


async def ask_parsed(
    client: Asker,
    request: Request,
    parse: Callable[[str], T],
    again: Callable[[Request, str, str, int], Request],
    *,
    attempts: int = 2,
    use_cache: bool | None = None,
) -> Asked[T]:
    """Ask; if `parse` raises `UnreadableAnswer`, ask `again(request, answer, problem, attempt)` up to
    `attempts` answers in all. An llm failure ends the asking and is returned as `error` (see
    `error_message`); any other exception from the call or the parser propagates.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    answers: list[str] = []
    problems: list[str] = []
    responses: list[Response] = []
    for attempt in range(1, attempts + 1):
        try:
            response = await client.acomplete(request, use_cache=use_cache)
        except Exception as exc:
            return Asked(None, tuple(answers), tuple(problems), tuple(responses), error_message(exc))
        responses.append(response)
        answers.append(response.text)
        try:
            value = parse(response.text)
        except UnreadableAnswer as exc:
            problems.append(str(exc))
            if attempt < attempts:
                request = again(request, response.text, str(exc), attempt + 1)
            continue
        return Asked(value, tuple(answers), tuple(problems), tuple(responses))
    return Asked(None, tuple(answers), tuple(problems), tuple(responses))


# -- planning -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item(Generic[P]):
    """One unit of work: the record ids it still has to write, what the stage needs, and whether it
    redoes an errored record."""

    ids: tuple[str, ...]
    payload: P
    retry: bool = False


@dataclass
class Plan(Generic[P]):
    """The items to run and how many candidates were already stored."""

    items: list[Item[P]]
    already_done: int
    errors_kept: int
    """Candidates left alone because their stored record errored and `retry_errors` was False."""

    @property
    def retried(self) -> int:
        return sum(item.retry for item in self.items)


def plan(
    store: RunStore,
    kind: type[Record],
    candidates: Iterable[tuple[Sequence[str], P]],
    *,
    retry_errors: bool,
    limit: int | None = None,
    stored: tuple[Collection[str], Collection[str]] | None = None,
) -> Plan[P]:
    """Which candidates (record ids, payload) still need running, in the order given.

    An item keeps only the ids not stored as finished; `limit` caps how many items run now.
    `stored` is the table's ids and its errored ids when the caller has read them already (the
    columnar copy's `Columnar.stored`); by default they are read from the store.
    """
    held, errored = stored if stored is not None else (store.ids(kind), store.errored(kind))
    items: list[Item[P]] = []
    done = kept = 0
    for ids, payload in candidates:
        missing = [i for i in ids if i not in held]
        failed = [i for i in ids if i in errored]
        if not missing and not (failed and retry_errors):
            if failed:
                kept += 1
            else:
                done += 1
            continue
        todo = tuple(i for i in ids if i not in held or (retry_errors and i in errored))
        items.append(Item(todo, payload, retry=bool(failed) and retry_errors))
    if limit is not None:
        items = items[:limit]
    return Plan(items, done, kept)


# -- the report -----------------------------------------------------------------------------------------


@dataclass
class StageReport:
    """What one run of a stage did."""

    stage: str
    planned: int = 0
    """Work items this run set out to do."""
    already_done: int = 0
    """Candidates whose records were already stored (finished, or errored and not retried)."""
    errors_kept: int = 0
    """Of those, the ones stored as errors and left alone because `retry_errors` was False."""
    retried: int = 0
    """Planned items that redo an errored record."""
    finished: int = 0
    """Records stored with a status other than "error"."""
    errors: int = 0
    """Error records stored (llm failures; a rerun with retry_errors=True redoes them)."""
    statuses: Counter[str] = field(default_factory=Counter)
    left_by_budget: int = 0
    """Records not stored because the spending limit was reached; a later run makes them."""
    pending: int = 0
    """Records still awaited from Message Batches in flight; a later run collects them."""
    calls: int = 0
    """Calls answered during the run (cache hits included), with their retries, tokens and cost."""
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    calls_by_kind: dict[str, RoleCalls] = field(default_factory=dict)
    """The calls above by kind (whose they were: `CallKind`), with the seconds each took (`RoleCalls`)."""
    first_errors: list[str] = field(default_factory=list)
    shard: str | None = None
    max_cost_usd: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    """What only this stage reports (e.g. judging: the judge model, dialogues skipped)."""

    @property
    def stored(self) -> int:
        """Records this run appended."""
        return self.finished + self.errors

    @property
    def budget_reached(self) -> bool:
        return self.left_by_budget > 0

    @property
    def status(self) -> str:
        """"complete", or "budget reached" when work was left for a run with a higher limit."""
        return "budget reached" if self.budget_reached else "complete"

    def why_nothing(self) -> str | None:
        """Why this run stored no finished record, and what to do; None when it stored some, or when
        there was nothing left to do because everything was already stored and finished."""
        if self.finished:
            return None
        if self.budget_reached:
            return (f"the spending limit max_cost_usd={self.max_cost_usd} was reached before any record "
                    "was finished; run again with a higher max_cost_usd")
        if self.errors:
            first = f" (first: {self.first_errors[0]})" if self.first_errors else ""
            return (f"every one of the {self.errors} records it made is an error{first}; fix the cause, then "
                    "run again with retry_errors=True")
        if self.pending:
            return f"{self.pending} records are awaited from Message Batches in flight; run again later"
        if not (self.planned or self.already_done):
            return ("nothing was selected: no work item matches the users, task types, settings, "
                    "dimensions or shard asked for; widen the selection")
        if self.already_done and self.errors_kept == self.already_done:
            return f"every one of the {self.errors_kept} items already stored is an error; {self._retry()}"
        return None

    def message(self) -> str:
        stored = f"{self.stored} records stored ({self.errors} errors)"
        why = None if self.budget_reached else self.why_nothing()
        if why:
            return f"{self.stage} stored nothing usable: {why}"
        if not self.budget_reached and self.errors_kept:
            return (f"{self.stage} finished, errors kept: {stored}, {self.already_done} items already "
                    f"stored, {self._kept()}")
        if not self.budget_reached:
            return f"{self.stage} complete: {stored}, {self.already_done} items already stored"
        return (
            f"{self.stage} budget reached: max_cost_usd={self.max_cost_usd} spent; {stored}, "
            f"{self.left_by_budget} left for a later run. Run again with a higher max_cost_usd to "
            "continue; stored records are not redone."
        )

    def frame(self) -> pd.DataFrame:
        """One row: the counts, the statuses stored, the calls and their cost, this stage's details."""
        row: dict[str, Any] = {
            "stage": self.stage, "status": self.status, "shard": self.shard or "all", "planned": self.planned,
            "already done": self.already_done, "retried": self.retried, "finished": self.finished,
            "errors": self.errors, **{f"status: {k}": v for k, v in sorted(self.statuses.items())},
            "left by budget": self.left_by_budget, "pending in batches": self.pending, "calls": self.calls,
            "retries": self.retries, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd, "elapsed_s": round(self.elapsed_s, 2), **self.details,
        }
        return pd.DataFrame([row])

    @property
    def idle(self) -> bool:
        """Nothing was planned, stored or left waiting: every item was already stored."""
        return not (self.planned or self.stored or self.pending or self.left_by_budget)

    def _repr_html_(self) -> str:
        """One line when the stage had nothing to do; otherwise its message above its one-row table."""
        if self.idle and self.why_nothing():
            return f'<div class="pl-stage pl-stage-idle">{esc(self.message())}</div>'
        if self.idle:
            shard = f" (shard {self.shard})" if self.shard else ""
            kept = f", {self._kept()}" if self.errors_kept else ""
            return (f'<div class="pl-stage pl-stage-idle">{esc(self.stage)}{esc(shard)}: nothing to do, '
                    f"{self.already_done} items already stored{esc(kept)}.</div>")
        return inline(f'<div class="pl-stage">{esc(self.message())}</div>') + frame_html(self.frame())

    def __repr__(self) -> str:
        return (f"StageReport({self.message()}; planned {self.planned}, retried {self.retried}, "
                f"${self.cost_usd:.4f}, {self.elapsed_s:.1f}s)")

    def _kept(self) -> str:
        return f"{self.errors_kept} of them as errors (not retried: {self._retry()})"

    @staticmethod
    def _retry() -> str:
        return "run again with retry_errors=True to retry them"

    def count(self, records: Iterable[Record]) -> None:
        """Book records just stored."""
        for record in records:
            self.statuses[record.status] += 1
            if record.is_error:
                self.errors += 1
                if len(self.first_errors) < 5:
                    self.first_errors.append(record.failure)
            else:
                self.finished += 1

    def start(self, planned: Plan[Any]) -> None:
        self.planned, self.retried = len(planned.items), planned.retried
        self.already_done = planned.already_done + planned.errors_kept
        self.errors_kept = planned.errors_kept

    def spent(self, before: dict[str, float], after: dict[str, float]) -> None:
        """Book the client's calls between two `LLMClient.totals()`."""
        self.calls += int(after["calls"] - before["calls"])
        self.retries += int(after["retries"] - before["retries"])
        self.input_tokens += int(after["input_tokens"] - before["input_tokens"])
        self.output_tokens += int(after["output_tokens"] - before["output_tokens"])
        self.cost_usd += after["cost_usd"] - before["cost_usd"]

    def spent_by_kind(self, before: Mapping[str, RoleCalls], after: Mapping[str, RoleCalls]) -> None:
        """Book the client's calls of each kind between two `LLMClient.calls_by_kind()`."""
        for kind, now in after.items():
            made = now.since(before.get(kind, RoleCalls()))
            if made.calls:
                self.calls_by_kind[kind] = self.calls_by_kind.get(kind, RoleCalls()) + made


# -- running --------------------------------------------------------------------------------------------


class _Writer:
    """Appends finished records, grouping whatever finished while the previous write was under way
    (one file sync per group instead of one per record).

    Writes run on one thread of the writer's own, shielded from cancellation: when an item fails and
    the pool cancels the others, a group already taken for writing is still written, and `flush`
    waits for it, so nothing lands in the store after the run has returned or raised."""

    def __init__(self, store: RunStore, report: StageReport):
        self.store, self.report = store, report
        self.pending: list[Record] = []
        self.lock: asyncio.Lock | None = None
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-writer")
        self.failed: list[BaseException] = []

    async def put(self, records: Sequence[Record]) -> None:
        self.pending.extend(records)
        self.lock = self.lock or asyncio.Lock()
        async with self.lock:
            if not self.pending:
                return  # an earlier holder of the lock wrote them
            group, self.pending = self.pending, []
            await asyncio.shield(asyncio.wrap_future(self.thread.submit(self._write, group)))

    def _write(self, group: list[Record]) -> None:
        try:
            self.store.extend(group)
        except BaseException as exc:
            self.failed.append(exc)  # said again by `flush` if the item waiting for it was cancelled
            raise
        self.report.count(group)

    def flush(self) -> None:
        """Wait for writes under way, then store what finished but was not written when the run
        stopped (a bug or a kill elsewhere)."""
        self.thread.shutdown(wait=True)
        group, self.pending = self.pending, []
        self._write(group)
        if self.failed:
            raise self.failed[0]


Work = Callable[[LLMClient, Item[P]], Awaitable[Sequence[Record]]]
Failed = Callable[[Item[P], str], Sequence[Record]]


@dataclass
class Stage(Generic[P]):
    """How to run one item (`work`) and which error records stand for it when an llm failure
    escapes `work` (`failed`; None for stages whose `work` stores its own llm failures)."""

    name: str
    kind: type[Record]
    work: Work[P]
    failed: Failed[P] | None = None


def _jobs(stage: Stage[P], client: LLMClient, items: Sequence[Item[P]], report: StageReport,
          writer: _Writer) -> list[Callable[[], Awaitable[None]]]:

    async def run_one(item: Item[P]) -> None:
        if client.budget_reached:
            report.left_by_budget += len(item.ids)
            return
        try:
            records = list(await stage.work(client, item))
        except Pending as waiting:
            report.pending += waiting.awaited
            records = list(waiting.finished)
        except Exception as exc:
            if isinstance(exc, FatalError) and exc.status in ABORTING_STATUSES:
                raise _stopped(stage.name, writer.store, exc) from exc
            message = error_message(exc)  # re-raises bugs
            if stage.failed is None:
                raise
            records = list(stage.failed(item, message))
        if client.budget_reached:  # calls refused by the limit came back as errors: leave them for later
            kept = [r for r in records if not r.is_error]
            report.left_by_budget += len(records) - len(kept)
            records = kept
        await writer.put(records)

    return [lambda item=item: run_one(item) for item in items]


def _stopped(stage: str, store: RunStore, exc: FatalError) -> FatalError:
    """An aborting failure as the run's last word: what failed, that finished work is kept, what next."""
    whose = f"the {exc.role}'s call failed: " if exc.role else ""
    return FatalError(
        f"{stage} stopped: {whose}{exc} Everything finished before this is kept in the run store "
        f"{store.root}; fix the credentials and run again to go on from there.",
        status=exc.status,
        role=exc.role,
    )


@dataclass(frozen=True)
class StageOptions:
    """How `run_stage` runs: the spending limit, counted over `client` and the `others` (clients of
    other roles) together; the pool size (None: the client's bound); the progress bar's label, and
    whether the pool shows that bar (a batch simulation shows its rounds' line instead)."""

    max_cost_usd: float | None = None
    pool_size: int | None = None
    desc: str = ""
    others: Sequence[LLMClient] = ()
    show_bar: bool = True


def run_stage(
    stage: Stage[P],
    store: RunStore,
    client: LLMClient,
    planned: Plan[P],
    *,
    report: StageReport | None = None,
    options: StageOptions = StageOptions(),
) -> StageReport:
    """Run the planned items through the client's pool into the store (blocking; works in notebooks)."""
    with _running(stage, store, client, planned, report, options) as (report, jobs):
        client.run_all(jobs, desc=options.desc or stage.name, stage=stage.name, pool_size=options.pool_size,
                       show_bar=options.show_bar)
    return report


def _limit(client: LLMClient, others: Sequence[LLMClient], max_cost_usd: float | None) -> Any:
    """The spending limit of a stage: the client's own, or one shared with the other roles' clients."""
    if others:
        return shared_spending_limit([client, *others], max_cost_usd)
    return client.spending_limit(max_cost_usd)


@contextmanager
def _running(
    stage: Stage[P], store: RunStore, client: LLMClient, planned: Plan[P], report: StageReport | None,
    options: StageOptions,
) -> Iterator[tuple[StageReport, list[Callable[[], Awaitable[None]]]]]:
    """What `run_stage` and `arun_stage` do around the pool that runs the jobs: the report started, the
    store's writer and the spending limit held, and, however the pool ends, the records flushed and the
    cost and time booked."""
    report = report or StageReport(stage.name)
    report.start(planned)
    report.max_cost_usd = options.max_cost_usd
    report.elapsed_s = -time.perf_counter()
    writer = _Writer(store, report)
    jobs, before = _jobs(stage, client, planned.items, report, writer), client.totals()
    kinds = client.calls_by_kind()
    try:
        with store.writing(stage.name), _limit(client, options.others, options.max_cost_usd):
            try:
                yield report, jobs
            finally:  # under the writer lock: its release may remove a folder that holds no record yet
                writer.flush()
    finally:
        report.spent(before, client.totals())
        report.spent_by_kind(kinds, client.calls_by_kind())
        report.elapsed_s += time.perf_counter()


async def arun_stage(
    stage: Stage[P],
    store: RunStore,
    client: LLMClient,
    planned: Plan[P],
    *,
    report: StageReport | None = None,
    options: StageOptions = StageOptions(),
) -> StageReport:
    """`run_stage` from a coroutine (on the caller's event loop)."""
    with _running(stage, store, client, planned, report, options) as (report, jobs):
        await client.arun_all(jobs, desc=options.desc or stage.name, stage=stage.name,
                              pool_size=options.pool_size, show_bar=options.show_bar)
    return report


def store_finished(store: RunStore, report: StageReport, records: Sequence[Record]) -> None:
    """Append records a stage made outside the pool (batch judging) and book them in its report."""
    store.extend(records)
    report.count(records)
