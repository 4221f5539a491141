"""The bound on calls in flight: one semaphore per event loop (an asyncio semaphore belongs to one loop)."""

from __future__ import annotations

import asyncio
import threading
import weakref


class Limiter:
    """At most `max_concurrency` calls in flight per event loop; `slot()` is one of them."""

    def __init__(self, max_concurrency: int):
        self.max_concurrency = max_concurrency
        self._lock = threading.Lock()
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def slot(self) -> asyncio.Semaphore:
        """The running loop's semaphore, to use as `async with limiter.slot():`."""
        loop = asyncio.get_running_loop()
        with self._lock:
            semaphore = self._semaphores.get(loop)
            if semaphore is None:
                semaphore = self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
        return semaphore
