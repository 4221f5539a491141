"""`LLMClient`: the one object every stage calls a language model through.

The client owns what no backend should repeat: resolving model names, the response cache, the
bound on calls in flight, retries with backoff, and the usage and cost books. Backends only turn a
request into a response or raise `RetryableError` / `FatalError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import random
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from . import registry
from .backends import make_backend
from .budget import BudgetReachedError
from .cache import ResponseCache
from .progress import progress_bar
from .types import (
    ROLES,
    ChatModel,
    FatalError,
    LLMError,
    PreflightError,
    Request,
    Response,
    RetriesExhaustedError,
    RetryableError,
    Usage,
)

Item = Request | Awaitable[Any] | Callable[[], Awaitable[Any]]

log = logging.getLogger(__name__)

_GROUP = ("stage", "kind", "task", "backend", "model")


@dataclass(slots=True)
class _Tally:
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


USAGE_COLUMNS = (*_GROUP, *(f.name for f in fields(_Tally)))
"""The columns of `LLMClient.usage_frame`."""


class LLMClient:
    """Calls a backend with caching, bounded concurrency, retries and accounting.

    `backend` is a name ("offline", "anthropic", "openai", "bedrock") or any `ChatModel`. Extra
    keyword arguments go to the backend's constructor. `use_cache=None` means: on for network
    backends, off for the offline backend (it is deterministic and answers faster than a disk
    lookup). Keys and secrets are never taken as arguments; backends read them from the environment.
    `max_cost_usd` caps what the client may spend over its life (see `spending_limit`).
    """

    def __init__(
        self,
        backend: str | ChatModel = "offline",
        *,
        max_concurrency: int = 8,
        use_cache: bool | None = None,
        cache_dir: str | None = None,
        max_retries: int = 6,
        retry_base_s: float = 1.0,
        retry_cap_s: float = 60.0,
        stage: str = "",
        progress: bool = True,
        seed: int = 0,
        max_cost_usd: float | None = None,
        **backend_kwargs: Any,
    ):
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        if isinstance(backend, str):
            if backend == "offline":
                backend_kwargs.setdefault("seed", seed)
            self.backend: ChatModel = make_backend(backend, **backend_kwargs)
        elif backend_kwargs:
            raise TypeError(f"backend options {sorted(backend_kwargs)} only apply when backend is a name")
        else:
            self.backend = backend
        self.backend_name = self.backend.name
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.retry_base_s = retry_base_s
        self.retry_cap_s = retry_cap_s
        self.progress = progress
        self.use_cache = self.backend_name != "offline" if use_cache is None else use_cache
        self._writes = _WriteBehind.acquire(ResponseCache(cache_dir).directory)
        self.cache = self._writes.cache
        self._closer = weakref.finalize(self, self._writes.release)  # queued answers are written at exit
        self._namespace = self._cache_namespace(seed)
        self._stage: ContextVar[str] = ContextVar(f"llm_stage_{id(self)}", default=stage)
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._books: dict[tuple[str, ...], _Tally] = {}
        self._totals = _Tally()
        self._bars: list[Any] = []
        self._jitter = random.Random()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._ceiling = _check_limit(max_cost_usd)
        self._shared: SharedBudget | None = None
        self.refused_calls = 0

    def _cache_namespace(self, seed: int) -> str:
        """The backend part of cache keys; the offline backend's answers also depend on its seed."""
        own_seed = getattr(self.backend, "seed", None) if self.backend_name == "offline" else None
        return self.backend_name if own_seed is None else f"{self.backend_name}:seed={own_seed}"

    def __repr__(self) -> str:
        return (
            f"LLMClient(backend={self.backend_name!r}, max_concurrency={self.max_concurrency}, "
            f"use_cache={self.use_cache}, stage={self._stage.get()!r})"
        )

    # -- stages ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[LLMClient]:
        """Book every call made inside the block (including tasks it starts) under stage `name`."""
        token = self._stage.set(name)
        try:
            yield self
        finally:
            self._stage.reset(token)

    @property
    def current_stage(self) -> str:
        return self._stage.get()

    # -- spending limit ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def spending_limit(self, max_cost_usd: float | None) -> Iterator[LLMClient]:
        """Refuse new calls in the block once `max_cost_usd` more has been spent (None: no limit).

        The limit is checked when a call is about to start, so calls already in flight finish and
        are paid for: the overshoot is at most `max_concurrency` calls. A refused call raises
        `BudgetReachedError`; cache hits cost nothing and are still answered. The limit holds for
        every call of this client while the block runs; the tighter of two nested limits wins.
        """
        limit = _check_limit(max_cost_usd)
        previous = self._ceiling
        if limit is not None:
            with self._lock:
                ceiling = self._totals.cost_usd + limit
            self._ceiling = ceiling if previous is None else min(previous, ceiling)
        try:
            yield self
        finally:
            self._ceiling = previous

    @property
    def budget_reached(self) -> bool:
        """True once the spending limit in force (this client's, or one it shares with other clients)
        has been reached: new calls are refused."""
        ceiling, shared = self._ceiling, self._shared
        if shared is not None and shared.reached:
            return True
        return ceiling is not None and self._totals.cost_usd >= ceiling

    def _refuse(self, request: Request, model: str) -> BudgetReachedError:
        with self._lock:
            self.refused_calls += 1
            spent = self._totals.cost_usd
        shared = self._shared
        if shared is not None and shared.reached:
            spent_text = f"${shared.spent:.4f} spent by {shared.names}, limit ${shared.limit:.4f}"
        else:
            spent_text = f"${spent:.4f} spent, limit ${self._ceiling:.4f}"
        return BudgetReachedError(
            f"spending limit reached: {spent_text}; refused a new "
            f"{request.kind!s} call to {self.backend_name}/{model}. Finished work is kept; run again "
            "with a higher max_cost_usd to continue."
        )

    # -- single calls -----------------------------------------------------------------------------

    def resolve_model(self, model: str) -> str:
        return registry.resolve(model, self.backend_name)

    async def acomplete(
        self, request: Request, *, stage: str | None = None, use_cache: bool | None = None
    ) -> Response:
        """Answer one request: from the cache if allowed and present, else from the backend."""
        stage = self._stage.get() if stage is None else stage
        model = self.resolve_model(request.model)
        if not model and self.backend_name != "offline":
            raise FatalError(
                f"a {request.kind!s} request{f' ({request.task})' if request.task else ''} names no model; "
                f"set Request.model for the {self.backend_name!r} backend"
            )
        caching = self.use_cache if use_cache is None else use_cache
        key = request.cache_key(self._namespace, model) if caching else None
        if key is not None:
            hit = self._writes.get(key)
            if hit is not None:
                response = replace(hit, cost_usd=0.0, retries=0)
                self._book(stage, request, model, response, self._list_price(model, hit.usage))
                return response
        try:
            response, retries = await self._call_with_retries(request, model, stage)
        except BudgetReachedError:
            raise  # not a failed call: it was never made (counted in refused_calls)
        except FatalError as err:
            self._book_error(stage, request, model)
            err.role = err.role or ROLES[request.kind]
            raise
        except LLMError:
            self._book_error(stage, request, model)
            raise
        cost = self._list_price(model, response.usage)
        response = replace(response, retries=retries, cost_usd=cost or 0.0, cached=False)
        if key is not None:
            self._writes.put(key, response)
        self._book(stage, request, model, response, cost)
        return response

    def _list_price(self, model: str, usage: Usage) -> float | None:
        """What an answer costs at list price; None for unpriced models and for offline answers."""
        return None if self.backend_name == "offline" else registry.cost_usd(model, usage)

    def complete(
        self, request: Request, *, stage: str | None = None, use_cache: bool | None = None
    ) -> Response:
        """Blocking `acomplete`, usable from scripts and from notebooks with a running loop."""
        stage = self._stage.get() if stage is None else stage
        return self._run_sync(self.acomplete(request, stage=stage, use_cache=use_cache))

    def preflight(self, roles: Mapping[str, str]) -> list[str]:
        """Check, before any work, that each role's model answers on this backend; a line per model checked.

        `roles` maps a role ("user agent", "assistant", "judge") to its model name; roles sharing a
        model share one check. The backend's `preflight` makes one minimal call (not cached, not
        booked); a backend without one (offline, test doubles) has nothing to check. A failure raises
        `PreflightError` naming the roles, the backend, the setting to fix and that nothing was stored.
        """
        return self._run_sync(self.apreflight(roles))

    async def apreflight(self, roles: Mapping[str, str]) -> list[str]:
        """`preflight` from a coroutine."""
        by_model: dict[str, list[str]] = {}
        for role, name in roles.items():
            by_model.setdefault(self.resolve_model(name), []).append(role)
        check = getattr(self.backend, "preflight", None)
        lines = []
        for model, names in by_model.items():
            who = " and ".join(names)
            if check is None:
                lines.append(f"{who}: {self.backend_name} backend, nothing to check")
                continue
            await self._preflight_one(check, model, who)
            lines.append(f"{who}: {self.backend_name} backend, model {model!r} answered")
        return lines

    async def _preflight_one(self, check: Callable[[str], Awaitable[None]], model: str, who: str) -> None:
        """Throttling and server errors are retried like any call; no connection or a fatal answer stops."""
        attempt = 0
        while True:
            try:
                return await check(model)
            except RetryableError as err:
                if err.status is None or attempt >= self.max_retries:
                    raise self._preflight_failed(who, err) from err
                delay = self._backoff(attempt, err.retry_after)
            except FatalError as err:
                raise self._preflight_failed(who, err) from err
            attempt += 1
            await asyncio.sleep(delay)

    def _preflight_failed(self, who: str, err: RetryableError | FatalError) -> PreflightError:
        return PreflightError(
            f"preflight check failed for the {who} on the {self.backend_name} backend: {err} "
            "Nothing was run or stored; fix this and run again.",
            status=err.status,
            role=who,
        )

    async def _call_with_retries(self, request: Request, model: str, stage: str) -> tuple[Response, int]:
        semaphore = self._semaphore()
        attempt = 0
        while True:
            async with semaphore:
                if attempt == 0 and self.budget_reached:
                    raise self._refuse(request, model)
                try:
                    return await self.backend.acomplete(request, model), attempt
                except RetryableError as err:
                    last = err
            if attempt >= self.max_retries:
                raise RetriesExhaustedError(
                    f"gave up on a {request.kind!s} call to {self.backend_name}/{model} after "
                    f"{attempt + 1} attempts (max_retries={self.max_retries}); last error: {last}. "
                    "Lower max_concurrency, raise max_retries, or try again later.",
                    attempts=attempt + 1,
                    last_error=last,
                ) from last
            delay = self._backoff(attempt, last.retry_after)
            attempt += 1
            self._note_retry(stage, request, model)
            await asyncio.sleep(delay)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with full jitter; a server's retry-after wins, up to the cap."""
        if retry_after is not None:
            return min(
                self.retry_cap_s, max(0.0, retry_after) + self._jitter.uniform(0, self.retry_base_s / 4)
            )
        return self._jitter.uniform(0, min(self.retry_cap_s, self.retry_base_s * 2**attempt))

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:
            semaphore = self._semaphores.get(loop)
            if semaphore is None:
                semaphore = self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
        return semaphore

    # -- many calls -------------------------------------------------------------------------------

    async def arun_all(
        self,
        items: Iterable[Item],
        *,
        desc: str = "",
        stage: str | None = None,
        return_exceptions: bool = False,
        pool_size: int | None = None,
    ) -> list[Any]:
        """Run requests, awaitables or zero-argument async callables in a pool; results keep input order.

        Requests are answered with `acomplete`. The backend bound (`max_concurrency`) applies to
        every call inside, so `pool_size` (default 4 x max_concurrency) only limits how many items
        are in progress. An item that fails raises (the others are cancelled) unless
        `return_exceptions`, which puts the exception in that item's place.
        """
        items = list(items)
        token = self._stage.set(stage) if stage is not None else None
        try:
            return await self._pool(items, desc, self._stage.get(), return_exceptions, pool_size)
        finally:
            if token is not None:
                self._stage.reset(token)

    async def _pool(
        self, items: list[Item], desc: str, stage: str, return_exceptions: bool, pool_size: int | None
    ) -> list[Any]:
        results: list[Any] = [None] * len(items)
        pending = iter(range(len(items)))
        started: set[int] = set()
        bar = progress_bar(
            total=len(items), desc=desc or stage or "llm", unit="item", disable=not self.progress
        )
        with self._lock:
            self._bars.append(bar)

        async def worker() -> None:
            for index in pending:
                started.add(index)
                try:
                    results[index] = await self._start(items[index], stage)
                except Exception as exc:
                    if not return_exceptions:
                        raise
                    results[index] = exc
                bar.update(1)
                self._refresh(bar, force=False)

        workers = [
            asyncio.create_task(worker())
            for _ in range(min(len(items), pool_size or 4 * self.max_concurrency))
        ]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            for index, item in enumerate(items):
                if index not in started and asyncio.iscoroutine(item):
                    item.close()
            raise
        finally:
            self._refresh(bar, force=True)
            bar.close()
            with self._lock:
                self._bars.remove(bar)
        return results

    def run_all(
        self,
        items: Iterable[Item],
        *,
        desc: str = "",
        stage: str | None = None,
        return_exceptions: bool = False,
        pool_size: int | None = None,
    ) -> list[Any]:
        """Blocking `arun_all` (see there)."""
        stage = self._stage.get() if stage is None else stage
        return self._run_sync(
            self.arun_all(
                items, desc=desc, stage=stage, return_exceptions=return_exceptions, pool_size=pool_size
            )
        )

    def _start(self, item: Item, stage: str) -> Awaitable[Any]:
        if isinstance(item, Request):
            return self.acomplete(item, stage=stage)
        if callable(item):
            return item()
        if isinstance(item, Awaitable):
            return item
        raise TypeError(f"run_all takes Requests, awaitables or async callables, got {type(item).__name__}")

    # -- sync bridge ------------------------------------------------------------------------------

    def _run_sync(self, coro: Awaitable[Any]) -> Any:
        """Run `coro` on the client's own event loop thread, so it works under a running loop too."""
        loop = self._background_loop()
        if threading.current_thread() is self._loop_thread:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise RuntimeError(
                "complete()/run_all() called from a coroutine the client runs; await acomplete()"
            )
        future: Future[Any] = asyncio.run_coroutine_threadsafe(_as_coroutine(coro), loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="llm-client-loop", daemon=True)
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    def close(self) -> None:
        """Close backend connections, the cache and the client's loop thread."""
        closer = getattr(self.backend, "aclose", None)
        loop, thread = self._loop, self._loop_thread
        if loop is not None and not loop.is_closed():
            if closer is not None:
                asyncio.run_coroutine_threadsafe(closer(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join()
            loop.close()
        self._loop = self._loop_thread = None
        self._closer()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- books ------------------------------------------------------------------------------------

    def _tally(self, stage: str, request: Request, model: str) -> _Tally:
        key = (stage, str(request.kind), request.task, self.backend_name, model)
        tally = self._books.get(key)
        if tally is None:
            tally = self._books[key] = _Tally()
        return tally

    def _book(self, stage: str, request: Request, model: str, response: Response, cost: float | None) -> None:
        usage = response.usage
        with self._lock:
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

    def _book_error(self, stage: str, request: Request, model: str) -> None:
        with self._lock:
            self._tally(stage, request, model).errors += 1
            self._totals.errors += 1

    def _note_retry(self, stage: str, request: Request, model: str) -> None:
        """Retries are booked (and shown in progress bars) as they happen, failed calls' ones too."""
        with self._lock:
            self._tally(stage, request, model).retries += 1
            self._totals.retries += 1
            bars = list(self._bars)
        for bar in bars:
            self._refresh(bar, force=True)

    def _refresh(self, bar: Any, *, force: bool) -> None:
        t = self._totals
        bar.set_postfix_str(
            f"calls={t.calls} cached={t.cache_hits} retries={t.retries} cost=${t.cost_usd:.4f}", refresh=force
        )

    def totals(self) -> dict[str, float]:
        """Everything booked so far, all stages together."""
        with self._lock:
            return {f.name: getattr(self._totals, f.name) for f in fields(_Tally)}

    def usage_frame(self, stage: str | None = None) -> pd.DataFrame:
        """One row per (stage, kind, task, backend, model): calls, cache hits, retries, tokens, cost.

        `cost_usd` is what was spent (cache hits cost nothing); `cost_uncached_usd` is what the same
        answers cost at list price without the cache. `unpriced_calls` counts calls on models the
        price table does not know (self-hosted, offline): their cost is not in either column.
        """
        with self._lock:
            rows = [
                {
                    **dict(zip(_GROUP, key, strict=True)),
                    **{f.name: getattr(t, f.name) for f in fields(_Tally)},
                }
                for key, t in self._books.items()
            ]
        frame = pd.DataFrame(rows, columns=list(USAGE_COLUMNS))
        if stage is not None:
            frame = frame[frame["stage"] == stage]
        return frame.sort_values(list(_GROUP), ignore_index=True)

    def reset_usage(self) -> None:
        with self._lock:
            self._books.clear()
            self._totals = _Tally()


class _WriteBehind:
    """Response-cache writes on a background thread, so the event loop never waits for an SQLite commit.

    A commit costs about 0.2 ms of the loop's time per answer, a quarter of everything the kit does
    per call at high concurrency; a queue append costs microseconds. Answers waiting to be written
    are served from memory, to every client of the process using the same cache folder (they share
    one writer). A process killed with answers still queued loses only those (a few ms worth): the
    run store, not the cache, is what resuming relies on.
    """

    _shared: ClassVar[dict[Path, _WriteBehind]] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def acquire(cls, directory: Path) -> _WriteBehind:
        """The writer of a cache folder, shared by the clients of this process; `release` when done."""
        key = directory.resolve()
        with cls._shared_lock:
            writer = cls._shared.get(key)
            if writer is None:
                writer = cls._shared[key] = cls(ResponseCache(key))
            writer._users += 1
            return writer

    def release(self) -> None:
        """Write what is queued; the last client of the folder also closes the cache."""
        self.flush()
        with self._shared_lock:
            self._users -= 1
            if self._users == 0:
                self._shared.pop(self.cache.directory, None)
                self.cache.close()

    def __init__(self, cache: ResponseCache):
        self.cache = cache
        self._users = 0
        self._pending: dict[str, Response] = {}
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[str, Response] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._warned = False

    def get(self, key: str) -> Response | None:
        waiting = self._pending.get(key)
        return replace(waiting, cached=True) if waiting is not None else self.cache.get(key)

    def put(self, key: str, response: Response) -> None:
        with self._lock:
            if self._thread is None or self._pid != os.getpid():  # first write, or a forked child
                self._queue, self._pid = queue.SimpleQueue(), os.getpid()
                self._thread = threading.Thread(target=self._run, args=(self._queue,),
                                                name="llm-cache-writer", daemon=True)
                self._thread.start()
            self._pending[key] = response
            self._queue.put((key, response))

    def _run(self, items: queue.SimpleQueue[tuple[str, Response] | None]) -> None:
        while (item := items.get()) is not None:
            key, response = item
            try:
                self.cache.put(key, response)
            except Exception as exc:  # the caller has its answer: an unwritable cache only costs speed
                if not self._warned:
                    self._warned = True
                    log.warning("response cache at %s cannot be written: %s", self.cache.directory, exc)
            with self._lock:
                if self._pending.get(key) is response:
                    del self._pending[key]

    def flush(self) -> None:
        """Write everything queued and stop the writer (it starts again on the next write)."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None and self._pid == os.getpid():
                self._queue.put(None)
        if thread is not None and self._pid == os.getpid():
            thread.join()


class SharedBudget:
    """One spending limit over several clients: the roles of one stage on their own backends together
    may spend `limit` from the moment it was made."""

    def __init__(self, clients: Sequence[LLMClient], limit: float):
        self.clients = list({id(c): c for c in clients}.values())
        self.limit = limit
        self._start = [c.totals()["cost_usd"] for c in self.clients]

    @property
    def spent(self) -> float:
        return sum(c.totals()["cost_usd"] - start for c, start in zip(self.clients, self._start, strict=True))

    @property
    def reached(self) -> bool:
        return self.spent >= self.limit

    @property
    def names(self) -> str:
        return " + ".join(c.backend_name for c in self.clients)


@contextlib.contextmanager
def shared_spending_limit(
    clients: Sequence[LLMClient], max_cost_usd: float | None
) -> Iterator[SharedBudget | None]:
    """Refuse new calls of every client in `clients` once they have together spent `max_cost_usd` more
    (None: no limit); like `LLMClient.spending_limit`, calls in flight finish."""
    limit = _check_limit(max_cost_usd)
    if limit is None:
        yield None
        return
    budget = SharedBudget(clients, limit)
    previous = [(c, c._shared) for c in budget.clients]
    for client in budget.clients:
        client._shared = budget
    try:
        yield budget
    finally:
        for client, before in previous:
            client._shared = before


def _check_limit(max_cost_usd: float | None) -> float | None:
    if max_cost_usd is not None and not max_cost_usd >= 0:
        raise ValueError(f"max_cost_usd must be 0 or more (or None for no limit), got {max_cost_usd}")
    return max_cost_usd


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
