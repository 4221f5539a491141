"""Many requests through a provider's batch API (Anthropic's Message Batches): half price, answers in a day.

The state lives in two run-store tables (`records.Batch`, `records.BatchEntry`, reached through a
`BatchStore`), so a closed notebook or a killed process polls the batches it already submitted
instead of submitting them again:

- one record per batch, written the moment the API accepted it: its id and `entries`, the map
  custom_id -> the caller's key for that request;
- one record per answered entry (id = custom_id): the text, usage and cost at batch prices when it
  succeeded (and `cut_off` when the answer stopped at the token limit); the reason when it errored,
  expired or was canceled.

A key whose entry failed is submitted again in a new batch, at most `max_rounds` submissions per key
in one run (a failure that a resubmission would meet again, such as an invalid request, is final at
once); after that the key's outcome is the failure with its reason. A key that failed in an earlier
run is submitted again. Answers are matched to requests by custom_id, never by order.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import orjson

from personalens_utils.llm import registry
from personalens_utils.llm.progress import progress_bar
from personalens_utils.llm.types import (
    FatalError,
    LLMError,
    Request,
    Response,
    RetriesExhaustedError,
    RetryableError,
    Usage,
)

if TYPE_CHECKING:
    from personalens_utils.llm.client import LLMClient

MAX_BATCH_REQUESTS = 100_000
"""The Message Batches API takes at most 100,000 requests..."""
MAX_BATCH_BYTES = 200 * 2**20
"""...and 256 MB per batch; the kit stays well below the size limit. A backend with other limits says
so in its `batch_limits` (requests, bytes)."""

log = logging.getLogger(__name__)
T = TypeVar("T")


class BatchUnsupported(FatalError):
    """The backend's server has no batch endpoint (an OpenAI-compatible server without `/v1/batches`):
    its requests are answered live instead."""


class BatchEntryError(LLMError):
    """A request whose batch entry ended without an answer (errored, expired, canceled); the message
    says so in the words of the error record that keeps it."""


@dataclass(frozen=True)
class BatchResult:
    """One entry of an ended batch as the backend reports it."""

    custom_id: str
    outcome: str
    """"succeeded", "errored", "expired" or "canceled"."""
    response: Response | None = None
    error: str = ""
    retryable: bool = True


@dataclass(frozen=True)
class Outcome:
    """What one request ended with: its response, or the reason it has none."""

    response: Response | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.response is not None


class BatchStore(Protocol):
    """Where the batch state is kept: the batches submitted and the entries answered, as JSON objects in
    the run store's layout (docs/architecture.md). `store.StoredBatches` keeps them in a
    `RunStore`; a protocol rather than the store itself, so the llm layer depends on no stage module.
    """

    def batches(self) -> list[dict[str, Any]]: ...

    def results(self) -> list[dict[str, Any]]: ...

    def result_ids(self) -> set[str]: ...

    def add_batch(self, record: dict[str, Any]) -> None: ...

    def add_results(self, records: list[dict[str, Any]]) -> None: ...


def make_custom_id(key: str, submission: int) -> str:
    """The custom_id of a key's n-th submission: the digest `store.stable_id(key, n)` gives.

    It must not change: stores written earlier hold these ids, and a rerun matches answers by them.
    """
    return hashlib.sha256(orjson.dumps([key, str(submission)])).hexdigest()[:20]


@runtime_checkable
class BatchModel(Protocol):
    """A backend that also takes batches (the anthropic backend)."""

    name: str

    async def create_batch(self, entries: Sequence[tuple[str, Request, str]]) -> str: ...

    async def batch_status(self, batch_id: str) -> str: ...

    async def batch_results(self, batch_id: str) -> list[BatchResult]: ...


@dataclass(frozen=True)
class _Entry:
    custom_id: str
    key: str
    batch_id: str


def _outcome(record: Mapping[str, Any]) -> Outcome:
    if record["outcome"] != "succeeded":
        return Outcome(error=f"{record['outcome']}: {record['error']}")
    response = Response(
        text=record["text"],
        usage=Usage.from_dict(record["usage"]),
        backend=record["backend"],
        model=record["model"],
        latency_s=0.0,
        cost_usd=record["cost_usd"] or 0.0,
        batch=True,
        cut_off=record.get("cut_off", False),
    )
    return Outcome(response)


def _size(request: Request) -> int:
    return 1000 + len(request.system) + sum(len(m.content) for m in request.messages)


class BatchRunner:
    """Answers keyed requests through the client's backend's batch API, with the state in `store`.

    `poll_interval_s` is the wait between status checks; `max_wait_s` (None: until every batch has
    ended) returns early, leaving what is still in flight to a later call.
    """

    def __init__(
        self,
        client: LLMClient,
        store: BatchStore,
        *,
        poll_interval_s: float = 60.0,
        max_rounds: int = 3,
        max_wait_s: float | None = None,
        max_batch_requests: int = MAX_BATCH_REQUESTS,
        progress: bool = True,
    ):
        if not isinstance(client.backend, BatchModel):
            raise FatalError(
                f"the {client.backend_name!r} backend has no batch API; batch judging needs "
                "backend='anthropic' (the Message Batches API)"
            )
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1, got {max_rounds}")
        self.client = client
        self.backend: BatchModel = client.backend
        self.store = store
        self.poll_interval_s = poll_interval_s
        self.max_rounds = max_rounds
        self.max_wait_s = max_wait_s
        limits = getattr(self.backend, "batch_limits", (MAX_BATCH_REQUESTS, MAX_BATCH_BYTES))
        most, self.max_batch_bytes = limits
        self.max_batch_requests = max(1, min(max_batch_requests, most))
        self.progress = progress
        self.in_flight: dict[str, float] = {}
        """Batch id -> when this runner first saw it in flight (time.monotonic), for progress lines."""

    def run(self, requests: Mapping[str, Request]) -> dict[str, Outcome]:
        """Blocking `arun`, usable from scripts and notebooks."""
        return self.client.run_sync(self.arun(requests))

    async def arun(self, requests: Mapping[str, Request]) -> dict[str, Outcome]:
        """The outcome of every key that is final; keys still in flight (after `max_wait_s`) are absent."""
        stage = self.client.current_stage
        submissions, results, batch_keys = self._load(set(requests))
        outcomes: dict[str, Outcome] = {}
        rounds: dict[str, int] = defaultdict(int)
        waiting: dict[str, list[_Entry]] = defaultdict(list)
        to_submit: list[str] = []
        for key in requests:
            last = submissions[key][-1] if submissions[key] else None
            result = results.get(last.custom_id) if last else None
            if last is None or (result is not None and result["outcome"] != "succeeded"):
                to_submit.append(key)
            elif result is None:
                waiting[last.batch_id].append(last)
                self.in_flight.setdefault(last.batch_id, time.monotonic())
                rounds[key] = 1
            else:
                outcomes[key] = _outcome(result)
        deadline = None if self.max_wait_s is None else time.monotonic() + self.max_wait_s
        bar = progress_bar(
            total=len(requests), initial=len(outcomes), desc=f"{stage or 'llm'} (batches)", unit="request",
            disable=not (self.client.progress and self.progress),
        )
        try:
            while True:
                if to_submit:
                    batch_keys |= await self._submit(to_submit, requests, submissions, waiting, rounds)
                    to_submit = []
                bar.set_postfix_str(f"batches in flight={len(waiting)}")
                for batch_id in list(waiting):
                    if await self._call(self.backend.batch_status, batch_id) != "ended":
                        continue
                    entries = waiting.pop(batch_id)
                    self.in_flight.pop(batch_id, None)
                    of_batch = batch_keys.get(batch_id, {})
                    fresh = await self._collect(batch_id, of_batch, entries, requests, stage)
                    for entry in entries:
                        record = fresh[entry.custom_id]
                        if record["outcome"] == "succeeded":
                            outcomes[entry.key] = _outcome(record)
                        elif record["retryable"] and rounds[entry.key] < self.max_rounds:
                            to_submit.append(entry.key)
                            continue
                        else:
                            times = f"submitted {rounds[entry.key]} time(s) in this run"
                            outcomes[entry.key] = Outcome(error=f"{_outcome(record).error} ({times})")
                        bar.update(1)
                if to_submit:
                    continue
                if not waiting or (deadline is not None and time.monotonic() >= deadline):
                    break
                await asyncio.sleep(self.poll_interval_s)
        finally:
            bar.close()
        if waiting:
            log.info("%d batch(es) still in flight (%s); run again to collect them", len(waiting),
                     ", ".join(waiting))
        return outcomes

    def _load(
        self, keys: set[str]
    ) -> tuple[defaultdict[str, list[_Entry]], dict[str, dict[str, Any]], dict[str, dict[str, str]]]:
        """Submissions per key (oldest first), stored results by custom_id, and every batch's entries."""
        submissions: defaultdict[str, list[_Entry]] = defaultdict(list)
        batch_keys: dict[str, dict[str, str]] = {}
        for batch in self.store.batches():
            batch_keys[batch["id"]] = batch["entries"]
            for custom_id, key in batch["entries"].items():
                if key in keys:
                    submissions[key].append(_Entry(custom_id, key, batch["id"]))
        results = {r["id"]: r for r in self.store.results()}
        return submissions, results, batch_keys

    async def _submit(
        self,
        keys: list[str],
        requests: Mapping[str, Request],
        submissions: defaultdict[str, list[_Entry]],
        waiting: defaultdict[str, list[_Entry]],
        rounds: dict[str, int],
    ) -> dict[str, dict[str, str]]:
        """Send the keys' requests in as few batches as the API's limits allow; store each batch at once.

        Returns the new batches' entries (batch id -> custom_id -> key).
        """
        created: dict[str, dict[str, str]] = {}
        chunk: list[tuple[str, Request, str, str]] = []
        size = 0
        for index, key in enumerate(keys):
            request = requests[key]
            model = self.client.resolve_model(request.model)
            if not model:
                raise FatalError(f"the request {key!r} names no model; set Request.model")
            chunk.append((make_custom_id(key, len(submissions[key])), request, model, key))
            size += _size(request)
            last = index == len(keys) - 1
            if last or len(chunk) >= self.max_batch_requests or size + _size(requests[keys[index + 1]]) > (
                self.max_batch_bytes
            ):
                batch_id = await self._call(self.backend.create_batch, [(c, r, m) for c, r, m, _ in chunk])
                created[batch_id] = {custom_id: k for custom_id, _, _, k in chunk}
                self.store.add_batch({
                    "id": batch_id,
                    "backend": self.backend.name,
                    "submitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "entries": created[batch_id],
                })
                log.info("submitted message batch %s with %d requests", batch_id, len(chunk))
                self.in_flight[batch_id] = time.monotonic()
                for custom_id, _, _, k in chunk:
                    entry = _Entry(custom_id, k, batch_id)
                    submissions[k].append(entry)
                    waiting[batch_id].append(entry)
                    rounds[k] += 1
                chunk, size = [], 0
        return created

    async def _collect(
        self,
        batch_id: str,
        entries_of_batch: Mapping[str, str],
        waited: list[_Entry],
        requests: Mapping[str, Request],
        stage: str,
    ) -> dict[str, dict[str, Any]]:
        """Fetch an ended batch's results, store one record per entry not stored yet, book the new answers.

        Returns the result record of every entry of the batch, by custom_id.
        """
        by_id = {r.custom_id: r for r in await self._call(self.backend.batch_results, batch_id)}
        unknown = sorted(set(by_id) - set(entries_of_batch))
        if unknown:
            log.warning("message batch %s returned %d unknown custom_id(s), ignored: %s", batch_id,
                        len(unknown), ", ".join(unknown[:5]))
        stored = self.store.result_ids()
        records = []
        for custom_id, key in entries_of_batch.items():
            if custom_id in stored:
                continue
            result = by_id.get(custom_id) or BatchResult(
                custom_id, "errored", error="the entry is missing from the batch's results file"
            )
            records.append(self._record(batch_id, key, result))
        self.store.add_results(records)
        fresh = {r["id"]: r for r in records}
        for entry in waited:
            record = fresh.get(entry.custom_id)
            if record is not None and record["outcome"] == "succeeded":
                response = _outcome(record).response
                assert response is not None
                request = requests[entry.key]
                self.client.ledger.book(stage, request, self.client.resolve_model(request.model), response,
                                  record["cost_usd"])
        if len(fresh) < len(entries_of_batch):  # some were stored meanwhile by another process
            fresh |= {r["id"]: r for r in self.store.results() if r["batch_id"] == batch_id}
        return fresh

    def _record(self, batch_id: str, key: str, result: BatchResult) -> dict[str, Any]:
        record: dict[str, Any] = {
            "id": result.custom_id, "key": key, "batch_id": batch_id, "outcome": result.outcome,
            "backend": self.backend.name, "error": result.error or None, "retryable": result.retryable,
        }
        response = result.response
        if result.outcome == "succeeded" and response is not None:
            usage = response.usage
            record.update(
                text=response.text, model=response.model,
                usage=usage.to_dict(),
                cost_usd=registry.cost_usd(response.model, usage, batch=True),
            )
            if response.cut_off:
                record["cut_off"] = True
        elif result.outcome == "succeeded":
            record.update(outcome="errored", error="the entry succeeded without a message")
        return record

    async def _call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """A batch API call, retried like any call of the client (429, 529, 5xx, dropped connections)."""
        attempt = 0
        while True:
            try:
                return await fn(*args)
            except RetryableError as err:
                if attempt >= self.client.max_retries:
                    raise RetriesExhaustedError(
                        f"gave up on the batch API after {attempt + 1} attempts: {err}. What was submitted "
                        "is stored in the run's batches table: run again to resume polling.",
                        attempts=attempt + 1,
                        last_error=err,
                    ) from err
                await asyncio.sleep(self.client.retry_policy.backoff(attempt, err.retry_after))
                attempt += 1
