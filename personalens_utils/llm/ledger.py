"""The client's books: calls, cache hits, errors, retries, tokens and cost per (stage, kind, task, backend,
model), their running totals, the calls of each kind with the seconds each took (`RoleCalls`), and the
progress bars that show them live."""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass, fields, replace
from typing import Any

import pandas as pd

from personalens_utils.llm.types import Request, Response

GROUP = ("stage", "kind", "task", "backend", "model")


@dataclass(slots=True)
class Tally:
    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    cost_uncached_usd: float = 0.0
    unpriced_calls: int = 0


USAGE_COLUMNS = (*GROUP, *(f.name for f in fields(Tally)))
"""The columns of `Ledger.usage_frame` (and `LLMClient.usage_frame`)."""


@dataclass(frozen=True)
class RoleCalls:
    """The answered calls of one kind (one role's: the user agent's turns, the assistant's, the judge's),
    cache hits included, their tokens, and how many seconds each call a backend answered there and then
    took (`Ledger.book`). The books only grow, so what a stage run made is `after.since(before)`."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: tuple[float, ...] = ()

    def since(self, earlier: RoleCalls) -> RoleCalls:
        """The calls booked after `earlier`, a snapshot of the same books."""
        return RoleCalls(self.calls - earlier.calls, self.input_tokens - earlier.input_tokens,
                         self.output_tokens - earlier.output_tokens, self.seconds[len(earlier.seconds):])

    def __add__(self, other: RoleCalls) -> RoleCalls:
        return RoleCalls(self.calls + other.calls, self.input_tokens + other.input_tokens,
                         self.output_tokens + other.output_tokens, self.seconds + other.seconds)


class Ledger:
    """Usage and cost of one client's calls, safe to book from any thread."""

    def __init__(self, backend_name: str):
        self.backend_name = backend_name
        self._lock = threading.Lock()
        self._books: dict[tuple[str, ...], Tally] = {}
        self._totals = Tally()
        self._seconds: dict[str, array] = {}
        """Per kind, each timed call's latency in booking order (8 bytes a call): the one thing about a
        call the tallies do not hold."""
        self._bars: list[Any] = []

    def _tally(self, stage: str, request: Request, model: str) -> Tally:
        key = (stage, str(request.kind), request.task, self.backend_name, model)
        tally = self._books.get(key)
        if tally is None:
            tally = self._books[key] = Tally()
        return tally

    def book(self, stage: str, request: Request, model: str, response: Response, cost: float | None) -> None:
        """An answered call: `response.cost_usd` is what it cost (0 for a cache hit), `cost` its list
        price (None: the model has no price). Its latency is kept when a backend answered it here and
        now: not a cache hit or a batch answer (whose latency is another call's, or none), nor the
        offline backend's (no time worth reporting)."""
        usage = response.usage
        timed = not (response.cached or response.batch or self.backend_name == "offline")
        with self._lock:
            if timed:
                self._seconds.setdefault(str(request.kind), array("d")).append(response.latency_s)
            for tally in (self._tally(stage, request, model), self._totals):
                tally.calls += 1
                tally.cache_hits += response.cached
                tally.input_tokens += usage.input_tokens
                tally.output_tokens += usage.output_tokens
                tally.cache_read_tokens += usage.cache_read_tokens
                tally.cache_write_tokens += usage.cache_write_tokens
                tally.cost_usd += response.cost_usd
                tally.cost_uncached_usd += cost or 0.0
                tally.unpriced_calls += cost is None

    def book_error(self, stage: str, request: Request, model: str) -> None:
        with self._lock:
            self._tally(stage, request, model).errors += 1
            self._totals.errors += 1

    def book_retry(self, stage: str, request: Request, model: str) -> None:
        """Retries are booked (and shown in progress bars) as they happen, failed calls' ones too."""
        with self._lock:
            self._tally(stage, request, model).retries += 1
            self._totals.retries += 1
            bars = list(self._bars)
        for bar in bars:
            self.refresh(bar, force=True)

    @property
    def spent(self) -> float:
        """Dollars spent so far (cache hits cost nothing)."""
        with self._lock:
            return self._totals.cost_usd

    # -- progress bars ----------------------------------------------------------------------------

    def show_in(self, bar: Any) -> None:
        """Keep `bar`'s postfix up to date with the totals until `hide_from`."""
        with self._lock:
            self._bars.append(bar)

    def hide_from(self, bar: Any) -> None:
        with self._lock:
            self._bars.remove(bar)

    def refresh(self, bar: Any, *, force: bool) -> None:
        t = self._totals
        bar.set_postfix_str(
            f"calls={t.calls} cached={t.cache_hits} retries={t.retries} cost=${t.cost_usd:.4f}", refresh=force
        )

    # -- reading the books ------------------------------------------------------------------------

    def calls_by_kind(self) -> dict[str, RoleCalls]:
        """A snapshot of the calls of each kind booked so far (`RoleCalls`), all stages together: the
        tallies of that kind summed, with its timed calls' seconds."""
        with self._lock:
            kinds: dict[str, RoleCalls] = {}
            for (_stage, kind, *_rest), tally in self._books.items():
                if tally.calls:
                    kinds[kind] = kinds.get(kind, RoleCalls()) + RoleCalls(
                        tally.calls, tally.input_tokens, tally.output_tokens)
            return {kind: replace(calls, seconds=tuple(self._seconds.get(kind, ())))
                    for kind, calls in kinds.items()}

    def totals(self) -> dict[str, float]:
        """Everything booked so far, all stages together."""
        with self._lock:
            return {f.name: getattr(self._totals, f.name) for f in fields(Tally)}

    def usage_frame(self, stage: str | None = None) -> pd.DataFrame:
        """One row per (stage, kind, task, backend, model): calls, cache hits, retries, tokens, cost.

        `cost_usd` is what was spent (cache hits cost nothing); `cost_uncached_usd` is what the same
        answers cost at list price without the cache. `unpriced_calls` counts calls on models the
        price table does not know (self-hosted, offline): their cost is not in either column.
        """
        with self._lock:
            rows = [
                {**dict(zip(GROUP, key, strict=True)), **{f.name: getattr(t, f.name) for f in fields(Tally)}}
                for key, t in self._books.items()
            ]
        frame = pd.DataFrame(rows, columns=list(USAGE_COLUMNS))
        if stage is not None:
            frame = frame[frame["stage"] == stage]
        return frame.sort_values(list(GROUP), ignore_index=True)

    def reset(self) -> None:
        with self._lock:
            self._books.clear()
            self._seconds.clear()
            self._totals = Tally()
