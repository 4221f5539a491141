"""`ClientOptions`: every setting of an `LLMClient` in one typed, checked value.

A client is made from a backend and these options; keyword arguments to `LLMClient` are shorthand
for them (`LLMClient("anthropic", max_concurrency=16)`), and any keyword that is not an option goes
to the backend's constructor (`base_url`, `http_client`, ...). A bad value is refused when the
client is made, with the option's name, not at the first call.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

TIMEOUT_TOKENS = 1024
"""A call that may write up to this many tokens waits `request_timeout_s` for an answer; one allowed more
(generation steps, the official judge's 4,000) waits proportionally longer (`attempt_timeout_s`)."""


@dataclass(frozen=True)
class ClientOptions:
    """How an `LLMClient` calls its backend (docs/llm.md, "Concurrency, retries and time limits").

    `use_cache=None`: on for network backends, off for the offline backend. `request_timeout_s` bounds
    one attempt of a call that may write up to `TIMEOUT_TOKENS` tokens (a chat turn or a judge
    verdict); `call_deadline_s` bounds a call from its first attempt to its answer, retries and
    their waits included. `max_cost_usd` caps what the client may spend over its life.
    """

    max_concurrency: int = 8
    use_cache: bool | None = None
    cache_dir: str | os.PathLike[str] | None = None
    max_retries: int = 6
    retry_base_s: float = 1.0
    retry_cap_s: float = 60.0
    request_timeout_s: float = 60.0
    call_deadline_s: float = 300.0
    stage: str = ""
    progress: bool = True
    seed: int = 0
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        if not _is_int(self.max_concurrency) or self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {self.max_concurrency!r}")
        if not _is_int(self.max_retries) or self.max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {self.max_retries!r}")
        for name in ("request_timeout_s", "call_deadline_s"):
            value = getattr(self, name)
            if not _is_number(value) or not 0 < value < math.inf:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        for name in ("retry_base_s", "retry_cap_s"):
            value = getattr(self, name)
            if not _is_number(value) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be 0 or more seconds, got {value!r}")
        check_limit(self.max_cost_usd)

    @classmethod
    def split(
        cls, options: ClientOptions | None, settings: Mapping[str, Any]
    ) -> tuple[ClientOptions, dict[str, Any]]:
        """(`options` with the keyword settings that name an option applied, the rest for the backend)."""
        names = {f.name for f in fields(cls)}
        own = {k: v for k, v in settings.items() if k in names}
        return replace(options or cls(), **own), {k: v for k, v in settings.items() if k not in names}

    def attempt_timeout_s(self, max_tokens: int) -> float:
        """How long one attempt of a call allowed `max_tokens` output tokens may wait for its answer."""
        return self.request_timeout_s * max(1.0, max_tokens / TIMEOUT_TOKENS)


def check_limit(max_cost_usd: float | None) -> float | None:
    """`max_cost_usd` if it is a spending limit (0 or more, or None for none); else ValueError."""
    if max_cost_usd is not None and not (_is_number(max_cost_usd) and max_cost_usd >= 0):
        raise ValueError(f"max_cost_usd must be 0 or more (or None for no limit), got {max_cost_usd!r}")
    return max_cost_usd


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
