"""The persistent response cache: one answer per `Request.cache_key`, shared by threads and processes.

Backed by diskcache (SQLite with write-ahead logging), which is safe to use from many threads and
processes at once. Eviction is off: a cached answer is a research record, not a disposable
speed-up, so the cache only shrinks when you delete its folder.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import diskcache

from personalens_utils.base import paths
from personalens_utils.llm.types import Response, Usage

log = logging.getLogger(__name__)


class ResponseCache:
    """Responses by cache key. Stores only what the backend answered, never credentials.

    `cut_off` is stored only when set, so entries written before it existed read back as not cut off."""

    def __init__(self, directory: str | os.PathLike[str] | None = None):
        self.directory = Path(directory) if directory is not None else paths.cache_dir()
        self._lock = threading.Lock()
        self._cache: diskcache.Cache | None = None
        self._pid = -1

    def _open(self) -> diskcache.Cache:
        # A forked child must not reuse its parent's SQLite connection.
        if self._cache is None or self._pid != os.getpid():
            with self._lock:
                if self._cache is None or self._pid != os.getpid():
                    self.directory.mkdir(parents=True, exist_ok=True)
                    self._cache = diskcache.Cache(
                        str(self.directory), size_limit=2**50, eviction_policy="none", cull_limit=0
                    )
                    self._pid = os.getpid()
        return self._cache

    def get(self, key: str) -> Response | None:
        record: dict[str, Any] | None = self._open().get(key)
        if record is None:
            return None
        return Response(
            text=record["text"],
            usage=Usage.from_dict(record["usage"]),
            backend=record["backend"],
            model=record["model"],
            latency_s=record["latency_s"],
            cached=True,
            cut_off=record.get("cut_off", False),
        )

    def put(self, key: str, response: Response) -> None:
        self._open().set(
            key,
            {
                "text": response.text,
                "usage": response.usage.to_dict(),
                "backend": response.backend,
                "model": response.model,
                "latency_s": response.latency_s,
                **({"cut_off": True} if response.cut_off else {}),
            },
        )

    def __len__(self) -> int:
        return len(self._open())

    def close(self) -> None:
        with self._lock:
            if self._cache is not None:
                self._cache.close()
                self._cache = None


class WriteBehind:
    """Response-cache writes on a background thread, so the event loop never waits for an SQLite commit.

    A commit costs about 0.2 ms of the loop's time per answer, a quarter of everything the kit does
    per call at high concurrency; a queue append costs microseconds. Answers waiting to be written
    are served from memory, to every client of the process using the same cache folder (they share
    one writer). A process killed with answers still queued loses only those (a few ms worth): the
    run store, not the cache, is what resuming relies on.
    """

    _shared: ClassVar[dict[Path, WriteBehind]] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def acquire(cls, directory: Path) -> WriteBehind:
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
