"""The persistent response cache: one answer per `Request.cache_key`, shared by threads and processes.

Backed by diskcache (SQLite with write-ahead logging), which is safe to use from many threads and
processes at once. Eviction is off: a cached answer is a research record, not a disposable
speed-up, so the cache only shrinks when you delete its folder.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import diskcache

from .. import paths
from .types import Response, Usage


class ResponseCache:
    """Responses by cache key. Stores only what the backend answered, never credentials."""

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
            },
        )

    def __len__(self) -> int:
        return len(self._open())

    def close(self) -> None:
        with self._lock:
            if self._cache is not None:
                self._cache.close()
                self._cache = None
