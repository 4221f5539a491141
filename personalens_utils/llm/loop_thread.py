"""The sync bridge: blocking calls run their coroutine on an event loop of the client's own thread, so
they work from scripts and from notebooks whose loop is already running."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

_AT_STOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Callable[[], Awaitable[None]]]] = (
    weakref.WeakKeyDictionary())
_AT_STOP_LOCK = threading.Lock()


def at_stop(loop: asyncio.AbstractEventLoop, close: Callable[[], Awaitable[None]]) -> None:
    """Have `close()` awaited on `loop` when a `LoopThread` stops it. A backend called from another
    client's loop (a simulation calls its assistant from its user agent's loop) makes an HTTP session
    there; closed with that loop, it is not left for the garbage collector to warn about."""
    with _AT_STOP_LOCK:
        _AT_STOP.setdefault(loop, []).append(close)


class LoopThread:
    """An event loop on a daemon thread, started on first use."""

    def __init__(self, name: str):
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coro: Awaitable[Any], *, misuse: str) -> Any:
        """Run `coro` on the thread's loop and wait for it; from that loop itself, RuntimeError(`misuse`)
        (waiting there would wait forever)."""
        loop = self._started()
        if threading.current_thread() is self._thread:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise RuntimeError(misuse)
        future: Future[Any] = asyncio.run_coroutine_threadsafe(_as_coroutine(coro), loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def stop(self, last: Callable[[], Awaitable[None]] | None = None) -> None:
        """Run `last()` on the loop (e.g. closing connections made there), then what `at_stop` registered for
        it, then stop the loop and thread."""
        loop, thread = self._loop, self._thread
        if loop is not None and not loop.is_closed():
            with _AT_STOP_LOCK:
                closers = _AT_STOP.pop(loop, [])
            for close in ([last] if last is not None else []) + closers:
                asyncio.run_coroutine_threadsafe(_as_coroutine(close()), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join()
            loop.close()
        self._loop = self._thread = None


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
