"""One `LLMClient` per backend, so each role (user agent, assistant, judge) can run on its own.

Roles whose specs share a backend (and endpoint variable) share a client, its concurrency bound and
its books; roles on different backends never wait on, or are counted with, each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from personalens_utils.llm.client import USAGE_COLUMNS, LLMClient
from personalens_utils.llm.registry import KNOWN_BACKENDS
from personalens_utils.llm.specs import ModelSpec, SpecError
from personalens_utils.llm.types import ROLES

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
