"""Running one generation step: reuse a stored result, or call the model, parse, retry, and store.

Every step result is a run-store record keyed by a stable id. Records are written in small
batches (every `flush_every` records or `flush_seconds`, and at the end of every phase): one
fsync per record would dominate an offline run. A killed run loses at most that last batch, and a
rerun skips what is done. An answer the parser
rejects is sent back with the reasons (up to `max_attempts` answers in all); if none is usable the
record is stored with status "error", the raw answer and the reasons, and nothing is invented.
A later run retries errored steps with the cache bypassed, so it gets fresh answers.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..llm import FatalError, LLMClient, LLMError
from ..prompts.generation import GENERATION_PROMPT_VERSION
from ..store import RunStore, stable_id
from .parsing import AnswerError
from .requests import StepCall, retry_request

TABLE_PREFIX = "generation_"
OK, ERROR = "ok", "error"


def table_name(step: str) -> str:
    return f"{TABLE_PREFIX}{step}"


@dataclass
class StepRunner:
    """Runs step calls through one client into one run store, counting what it reused and did."""

    client: LLMClient
    store: RunStore
    model: str
    max_attempts: int = 3
    flush_every: int = 200
    flush_seconds: float = 2.0
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)
    """The error records stored by this runner."""
    _known: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    _pending: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _flushed_at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")

    def record_id(self, step: str, *key: Any) -> str:
        """Stable id of one step result: what it is about, plus everything that changes the answer."""
        return stable_id(step, *key, self.client.backend_name, self.model, GENERATION_PROMPT_VERSION)

    def stored(self, step: str, record_id: str) -> dict[str, Any] | None:
        table = table_name(step)
        if table not in self._known:
            self._known[table] = {r["id"]: r for r in self.store.records(table)}
        return self._known[table].get(record_id)

    async def run(
        self, step: str, record_id: str, about: dict[str, Any], build: Callable[[], StepCall]
    ) -> Any | None:
        """The parsed value of the step, or None if it failed (the failure is stored).

        `build` makes the request; it is called only when the run store has no usable result.
        """
        prior = self.stored(step, record_id)
        if prior is not None and prior["status"] == OK:
            self.counts[step, "reused"] += 1
            return prior["value"]
        call = build()
        fresh = False if prior is not None else None
        request, raw, problems, attempts = call.request, "", [], 0
        usage = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        while attempts < self.max_attempts:
            attempts += 1
            try:
                response = await self.client.acomplete(request, use_cache=fresh)
            except FatalError:
                raise
            except LLMError as exc:
                problems.append(f"model call failed: {exc}")
                break
            usage["input_tokens"] += response.usage.input_tokens
            usage["output_tokens"] += response.usage.output_tokens
            usage["cost_usd"] += response.cost_usd
            raw = response.text
            try:
                value = call.parse(raw)
            except AnswerError as exc:
                problems.append(str(exc))
                request = retry_request(request, raw, str(exc), attempts + 1)
                continue
            self._store(call.step, {"id": record_id, "status": OK, **about, "value": value, "raw": None,
                                    "error": None, "attempts": attempts, **usage})
            self.counts[call.step, "generated"] += 1
            return value
        failure = {"id": record_id, "status": ERROR, **about, "value": None, "raw": raw,
                   "error": " | ".join(problems), "attempts": attempts, **usage}
        self.failures.append(self._store(call.step, failure))
        self.counts[call.step, "failed"] += 1
        return None

    def _store(self, step: str, record: dict[str, Any]) -> dict[str, Any]:
        record = {**record, "step": step, "backend": self.client.backend_name, "model": self.model,
                  "prompt_version": GENERATION_PROMPT_VERSION}
        self._pending.setdefault(table_name(step), []).append(record)
        self._known.setdefault(table_name(step), {})[record["id"]] = record
        waiting = sum(len(v) for v in self._pending.values())
        if waiting >= self.flush_every or time.monotonic() - self._flushed_at >= self.flush_seconds:
            self.flush()
        return record

    def flush(self) -> None:
        """Write the records not yet in the run store."""
        pending, self._pending = self._pending, {}
        for table, records in pending.items():
            self.store.extend(table, records)
        self._flushed_at = time.monotonic()
