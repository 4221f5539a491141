"""`LLMClient`: the one object every stage calls a language model through.

The client puts together what no backend should repeat, each part in its own module: model names
(`registry`), the response cache (`cache`), the backend call with its bound on calls in flight, time
limits and retries (`transport`, `limiter`, `retry`), the usage and cost books (`ledger`) and spending
limits (`spending`). `Clients` holds one client per backend, so each role (user agent, assistant, judge)
runs on its own: roles whose specs share a backend (and endpoint variable) share a client, its
concurrency bound and its books; roles on different backends never wait on each other. There is one async
path, `acomplete`; `complete` and `run_all` are thin blocking wrappers that run it on the client's own
loop thread (`loop_thread`).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

import pandas as pd

from personalens_utils.llm import registry
from personalens_utils.llm.backends import make_backend
from personalens_utils.llm.budget import BudgetReachedError
from personalens_utils.llm.cache import ResponseCache, WriteBehind
from personalens_utils.llm.ledger import USAGE_COLUMNS, Ledger, RoleCalls
from personalens_utils.llm.loop_thread import LoopThread
from personalens_utils.llm.options import ClientOptions
from personalens_utils.llm.pool import run_pool
from personalens_utils.llm.progress import progress_bar
from personalens_utils.llm.registry import KNOWN_BACKENDS
from personalens_utils.llm.retry import RetryLog, RetryNotice, RetryPolicy
from personalens_utils.llm.specs import ModelSpec, SpecError
from personalens_utils.llm.spending import Spending, shared_spending_limit
from personalens_utils.llm.transport import Transport
from personalens_utils.llm.types import (
    ROLES,
    ChatModel,
    FatalError,
    LLMError,
    PreflightError,
    Request,
    Response,
)

__all__ = ["USAGE_COLUMNS", "ClientOptions", "LLMClient", "shared_spending_limit"]

Item = Request | Awaitable[Any] | Callable[[], Awaitable[Any]]


class LLMClient:
    """Calls a backend with caching, bounded concurrency, time limits, retries and accounting.

    `backend` is a name ("offline", "anthropic", "openai", "bedrock") or any `ChatModel`; `options`
    (`ClientOptions`) says how it is called. Keyword arguments are shorthand: one that names an option
    sets it (`max_concurrency=16`, `request_timeout_s=30`), any other goes to the backend's constructor
    (`base_url=...`). Keys and secrets are never taken as arguments; backends read them from the
    environment.
    """

    def __init__(self, backend: str | ChatModel = "offline", options: ClientOptions | None = None,
                 **settings: Any):
        self.options, backend_kwargs = ClientOptions.split(options, settings)
        self.backend = _make_backend(backend, self.options, backend_kwargs)
        self.backend_name: str = self.backend.name
        self.endpoint: str = getattr(self.backend, "served_at", "")
        """Where the model is served when that decides which model answers (`endpoints`), else ""."""
        self.transport = Transport(self.backend, self.options)
        self.ledger = Ledger(self.backend_name)
        self.spending = Spending(self.ledger, self.options.max_cost_usd)
        caching = self.options.use_cache
        self.use_cache = self.backend_name != "offline" if caching is None else caching
        self._writes = WriteBehind.acquire(ResponseCache(self.options.cache_dir).directory)
        self._closer = weakref.finalize(self, self._writes.release)  # queued answers are written at exit
        self._namespace = self._cache_namespace()
        self._stage: ContextVar[str] = ContextVar(f"llm_stage_{id(self)}", default=self.options.stage)
        self._retry_log = RetryLog()
        self._loop = LoopThread("llm-client-loop")

    def _cache_namespace(self) -> str:
        """The backend part of cache keys: with its endpoint when that is identity (two servers under one
        model name never share answers); the offline backend's answers also depend on its seed."""
        if self.endpoint:
            return f"{self.backend_name}@{self.endpoint}"
        own_seed = getattr(self.backend, "seed", None) if self.backend_name == "offline" else None
        return self.backend_name if own_seed is None else f"{self.backend_name}:seed={own_seed}"

    def __repr__(self) -> str:
        return (
            f"LLMClient(backend={self.backend_name!r}, max_concurrency={self.max_concurrency}, "
            f"use_cache={self.use_cache}, stage={self._stage.get()!r})"
        )

    # -- settings as attributes -------------------------------------------------------------------

    @property
    def max_concurrency(self) -> int:
        return self.options.max_concurrency

    @property
    def max_retries(self) -> int:
        return self.options.max_retries

    @property
    def progress(self) -> bool:
        return self.options.progress

    @property
    def cache(self) -> ResponseCache:
        return self._writes.cache

    @property
    def retry_policy(self) -> RetryPolicy:
        """The `retry.RetryPolicy` every call, preflight check and batch API call of this client follows."""
        return self.transport.policy

    # -- stages -----------------------------------------------------------------------------------

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
        with self.spending.limit(max_cost_usd):
            yield self

    @property
    def budget_reached(self) -> bool:
        """True once the spending limit in force (this client's, or one it shares with other clients)
        has been reached: new calls are refused."""
        return self.spending.reached

    @property
    def refused_calls(self) -> int:
        return self.spending.refused

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
            hit = self._hit(key, request, model, stage)
            if hit is not None:
                return hit

        def admit() -> None:
            if self.spending.reached:
                raise self.spending.refusal(f"{request.kind!s} call to {self.backend_name}/{model}")

        def on_retry(notice: RetryNotice) -> None:
            self.ledger.book_retry(stage, request, model)
            self._retry_log(notice)

        try:
            response, retries = await self.transport.send(request, model, admit=admit, on_retry=on_retry)
        except BudgetReachedError:
            raise  # not a failed call: it was never made (counted in refused_calls)
        except FatalError as err:
            self.ledger.book_error(stage, request, model)
            err.role = err.role or ROLES[request.kind]
            raise
        except LLMError:
            self.ledger.book_error(stage, request, model)
            raise
        cost = self._list_price(model, response)
        response = replace(response, retries=retries, cost_usd=cost or 0.0, cached=False)
        if key is not None:
            self._writes.put(key, response)
        self.ledger.book(stage, request, model, response, cost)
        return response

    def _hit(self, key: str, request: Request, model: str, stage: str) -> Response | None:
        hit = self._writes.get(key)
        if hit is None:
            return None
        response = replace(hit, cost_usd=0.0, retries=0)
        self.ledger.book(stage, request, model, response, self._list_price(model, hit))
        return response

    def cache_key(self, request: Request) -> str:
        """The key `acomplete` caches `request`'s answer under; a batch keys its entry by it too, so the two
        transports share their answers."""
        return request.cache_key(self._namespace, self.resolve_model(request.model))

    def cached(self, request: Request) -> Response | None:
        """The cached answer to `request`, booked as a cache hit, as `acomplete` would give it (None when
        caching is off or nothing is cached): a batch asks only what no cache answers."""
        if not self.use_cache:
            return None
        return self._hit(self.cache_key(request), request, self.resolve_model(request.model),
                         self._stage.get())

    def remember(self, request: Request, response: Response) -> None:
        """Cache an answer that came another way (a batch), under the key `acomplete` would use."""
        if self.use_cache:
            self._writes.put(self.cache_key(request), response)

    def _list_price(self, model: str, response: Response) -> float | None:
        """What an answer costs at list price (batch price when it came through a batch API); None for
        unpriced models and for offline answers."""
        if self.backend_name == "offline":
            return None
        return registry.cost_usd(model, response.usage, batch=response.batch)

    def complete(
        self, request: Request, *, stage: str | None = None, use_cache: bool | None = None
    ) -> Response:
        """Blocking `acomplete`, usable from scripts and from notebooks with a running loop."""
        stage = self._stage.get() if stage is None else stage
        return self.run_sync(self.acomplete(request, stage=stage, use_cache=use_cache))

    def preflight(self, roles: Mapping[str, str]) -> list[str]:
        """Check, before any work, that each role's model answers on this backend; a line per model checked.

        `roles` maps a role ("user agent", "assistant", "judge") to its model name; roles sharing a
        model share one check. The backend's `preflight` makes one minimal call (not cached, not
        booked) under the client's time limit; a backend without one (offline, test doubles) has
        nothing to check. A failure raises `PreflightError` naming the roles, the backend, the setting
        to fix and that nothing was stored.
        """
        return self.run_sync(self.apreflight(roles))

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
            try:
                await self.transport.check(check, model, self._retry_log)
            except LLMError as err:
                raise self._preflight_failed(who, err) from err
            lines.append(f"{who}: {self.backend_name} backend, model {model!r} answered")
        return lines

    def _preflight_failed(self, who: str, err: LLMError) -> PreflightError:
        return PreflightError(
            f"preflight check failed for the {who} on the {self.backend_name} backend: {err} "
            "Nothing was run or stored; fix this and run again.",
            status=getattr(err, "status", None),
            role=who,
        )

    # -- many calls -------------------------------------------------------------------------------

    async def arun_all(
        self,
        items: Iterable[Item],
        *,
        desc: str = "",
        stage: str | None = None,
        return_exceptions: bool = False,
        pool_size: int | None = None,
        show_bar: bool = True,
    ) -> list[Any]:
        """Run requests, awaitables or zero-argument async callables in a pool; results keep input order.

        Requests are answered with `acomplete`. The backend bound (`max_concurrency`) applies to
        every call inside, so `pool_size` (default 4 x max_concurrency) only limits how many items
        are in progress. An item that fails raises (the others are cancelled) unless
        `return_exceptions`, which puts the exception in that item's place. `show_bar=False` hides the
        pool's progress bar where the caller shows a line of its own (a batch simulation's rounds).
        """
        items = list(items)
        token = self._stage.set(stage) if stage is not None else None
        current = self._stage.get()
        bar = progress_bar(total=len(items), desc=desc or current or "llm", unit="item",
                           disable=not (self.progress and show_bar))
        self.ledger.show_in(bar)

        def done() -> None:
            bar.update(1)
            self.ledger.refresh(bar, force=False)

        try:
            return await run_pool(items, lambda item: self._start(item, current),
                                  size=pool_size or 4 * self.max_concurrency,
                                  return_exceptions=return_exceptions, done=done)
        finally:
            self.ledger.refresh(bar, force=True)
            bar.close()
            self.ledger.hide_from(bar)
            if token is not None:
                self._stage.reset(token)

    def run_all(
        self,
        items: Iterable[Item],
        *,
        desc: str = "",
        stage: str | None = None,
        return_exceptions: bool = False,
        pool_size: int | None = None,
        show_bar: bool = True,
    ) -> list[Any]:
        """Blocking `arun_all` (see there)."""
        stage = self._stage.get() if stage is None else stage
        return self.run_sync(
            self.arun_all(
                items, desc=desc, stage=stage, return_exceptions=return_exceptions, pool_size=pool_size,
                show_bar=show_bar,
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

    # -- sync bridge and closing ------------------------------------------------------------------

    def run_sync(self, coro: Awaitable[Any]) -> Any:
        """Run `coro` on the client's own event loop thread and wait for it (works under a running loop)."""
        return self._loop.run(coro, misuse="complete()/run_all() called from a coroutine the client runs; "
                                           "await acomplete()")

    def close(self) -> None:
        """Close backend connections, the cache and the client's loop thread."""
        self._loop.stop(getattr(self.backend, "aclose", None))
        self._closer()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- books ------------------------------------------------------------------------------------

    def totals(self) -> dict[str, float]:
        """Everything booked so far, all stages together."""
        return self.ledger.totals()

    def calls_by_kind(self) -> dict[str, RoleCalls]:
        """The calls of each kind booked so far, with the seconds each took (`ledger.RoleCalls`)."""
        return self.ledger.calls_by_kind()

    def usage_frame(self, stage: str | None = None) -> pd.DataFrame:
        """One row per (stage, kind, task, backend, model): calls, cache hits, retries, tokens, cost
        (`ledger.Ledger.usage_frame`)."""
        return self.ledger.usage_frame(stage)

    def reset_usage(self) -> None:
        self.ledger.reset()


def _make_backend(
    backend: str | ChatModel, options: ClientOptions, backend_kwargs: dict[str, Any]
) -> ChatModel:
    """The backend by name (the offline one seeded, network ones given a transport timeout that never
    fires before the client's own), or the `ChatModel` given."""
    if not isinstance(backend, str):
        if backend_kwargs:
            raise TypeError(f"backend options {sorted(backend_kwargs)} only apply when backend is a name")
        return backend
    if backend == "offline":
        backend_kwargs.setdefault("seed", options.seed)
    else:
        backend_kwargs.setdefault("timeout", options.call_deadline_s)
    return make_backend(backend, **backend_kwargs)


DEFAULT_CONCURRENCY = 8


class Clients:
    """Clients made on first use, one per `ModelSpec.client_key`.

    `max_concurrency` is one number for every backend or a mapping from backend name (or client
    key such as "openai@VLLM_URL") to its bound; a backend the mapping leaves out gets 8. Other
    keyword arguments (`stage`, `seed`, `use_cache`, ...) go to every `LLMClient`.
    """

    def __init__(self, default_backend: str = "offline", *,
                 max_concurrency: int | Mapping[str, int] = DEFAULT_CONCURRENCY, **client_options: Any):
        if isinstance(max_concurrency, Mapping):
            unknown = sorted(k for k in max_concurrency if k.partition("@")[0] not in KNOWN_BACKENDS)
            if unknown:
                raise SpecError(f"max_concurrency: unknown backend(s) {unknown}; use {KNOWN_BACKENDS}")
        self.default_backend = default_backend
        self.max_concurrency = max_concurrency
        self.client_options = client_options
        self._clients: dict[str, LLMClient] = {}

    def spec(self, text: str, *, default_model: str = "", what: str = "model") -> ModelSpec:
        """`ModelSpec.parse` with this session's default backend."""
        return ModelSpec.parse(text, self.default_backend, default_model=default_model, what=what)

    def _bound(self, spec: ModelSpec) -> int:
        if not isinstance(self.max_concurrency, Mapping):
            return self.max_concurrency
        return self.max_concurrency.get(spec.client_key,
                                        self.max_concurrency.get(spec.backend, DEFAULT_CONCURRENCY))

    def client(self, spec: ModelSpec) -> LLMClient:
        """The client that serves `spec`, made on first use."""
        key = spec.client_key
        if key not in self._clients:
            self._clients[key] = LLMClient(spec.backend, max_concurrency=self._bound(spec),
                                           **self.client_options, **spec.backend_options())
        return self._clients[key]

    def __iter__(self) -> Any:
        return iter(self._clients.items())

    def usage_frame(self, stage: str | None = None) -> pd.DataFrame:
        """Every client's `usage_frame` together, with the role each call played and the client it went to."""
        frames = []
        for key, client in self._clients.items():
            frame = client.usage_frame(stage)
            frame.insert(0, "role", [ROLES.get(kind, kind) for kind in frame["kind"]])
            frame.insert(1, "client", key)
            frames.append(frame)
        if not frames:
            return pd.DataFrame(columns=["role", "client", *USAGE_COLUMNS])
        return pd.concat(frames, ignore_index=True)

    def close(self) -> None:
        """Close every client made."""
        for client in self._clients.values():
            client.close()
        self._clients.clear()
