"""The one retry loop: each attempt under its time limit, backoff between attempts, a deadline per call.

Calls, preflight checks and Message Batches API calls all go through `RetryPolicy.run`, so a hanging
server, throttling or a dropped connection is handled (and reported) the same way wherever it
happens. Each retry is announced to the caller as a `RetryNotice` (what is retried, why, attempt n of
m), which the client books and shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from personalens_utils.llm.options import ClientOptions
from personalens_utils.llm.types import RetriesExhaustedError, RetryableError

T = TypeVar("T")

log = logging.getLogger(__name__)

RETRY_LINE_EVERY_S = 10.0
"""Retry lines are written at most this often per client; the next line counts those left out."""


class Call:
    """What is being attempted and how long one attempt may take; the words for messages are only
    put together when a message is written (most calls never need them)."""

    __slots__ = ("action", "backend", "model", "timeout_s")

    def __init__(self, action: str, backend: str, model: str, timeout_s: float):
        self.action = action
        """e.g. "a judge call to" or "a preflight check of"."""
        self.backend, self.model, self.timeout_s = backend, model, timeout_s

    @property
    def what(self) -> str:
        """e.g. "a judge call to anthropic/claude-sonnet-4-5"."""
        return f"{self.action} {self.backend}/{self.model}"

    @property
    def where(self) -> str:
        """The backend and model, as the backends' own errors name them: "anthropic backend, model '...'"."""
        return f"{self.backend} backend, model {self.model!r}"


@dataclass(frozen=True)
class RetryNotice:
    """One retry about to happen: the line a user sees while a call is retried."""

    call: Call
    attempt: int
    """The attempt about to start (2 for the first retry)."""
    attempts: int
    """The most attempts the policy allows (max_retries + 1)."""
    delay_s: float
    error: RetryableError

    def __str__(self) -> str:
        return (f"retrying {self.call.what} in {self.delay_s:.1f} s (attempt {self.attempt} of "
                f"{self.attempts}): {self.error}")


class RetryPolicy:
    """Exponential backoff with full jitter, a time limit per attempt and a deadline per call."""

    def __init__(self, options: ClientOptions):
        self.options = options
        self._jitter = random.Random()

    @property
    def attempts(self) -> int:
        return self.options.max_retries + 1

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt `attempt + 2`; a server's retry-after wins, up to the cap."""
        base, cap = self.options.retry_base_s, self.options.retry_cap_s
        if retry_after is not None:
            return min(cap, max(0.0, retry_after) + self._jitter.uniform(0, base / 4))
        return self._jitter.uniform(0, min(cap, base * 2**attempt))

    async def run(
        self,
        attempt: Callable[[], Awaitable[T]],
        call: Call,
        *,
        slot: Callable[[], contextlib.AbstractAsyncContextManager[object]] | None = None,
        on_retry: Callable[[RetryNotice], None] | None = None,
        retry_unanswered: bool = True,
    ) -> tuple[T, int]:
        """(`attempt()`'s result, retries it took). Each attempt runs inside `slot()` (the bound on
        calls in flight; backoff waits outside it) and under `call.timeout_s`, cut to what is left of
        the deadline. `retry_unanswered=False` gives up at once when no HTTP status came back (no
        connection, no answer in time): what a preflight check wants."""
        options = self.options
        started: float | None = None
        tries = 0
        while True:
            async with slot() if slot is not None else contextlib.nullcontext():
                started = time.monotonic() if started is None else started
                left = options.call_deadline_s - (time.monotonic() - started)
                limit = max(0.0, min(call.timeout_s, left))
                try:
                    async with asyncio.timeout(limit):
                        return await attempt(), tries
                except TimeoutError:
                    error = RetryableError(self._timed_out(call, limit))
                except RetryableError as err:
                    error = err
            if not retry_unanswered and error.status is None:
                raise error
            if tries >= options.max_retries:
                raise RetriesExhaustedError(
                    f"gave up on {call.what} after {tries + 1} attempts (max_retries={options.max_retries}); "
                    f"last error: {error}. Lower max_concurrency, raise max_retries, or try again later.",
                    attempts=tries + 1, last_error=error,
                ) from error
            delay = self.backoff(tries, error.retry_after)
            elapsed = time.monotonic() - started
            if elapsed + delay >= options.call_deadline_s:
                raise RetriesExhaustedError(
                    f"gave up on {call.what} after {tries + 1} attempts in {elapsed:.1f} s, at the call's "
                    f"deadline (call_deadline_s={options.call_deadline_s:g}; one attempt waits at most "
                    f"{call.timeout_s:.3g} s, request_timeout_s={options.request_timeout_s:g}); last error: "
                    f"{error}. Check that the server answers; if it is only slow, raise request_timeout_s "
                    "and call_deadline_s.",
                    attempts=tries + 1, last_error=error,
                ) from error
            tries += 1
            if on_retry is not None:
                on_retry(RetryNotice(call, tries + 1, self.attempts, delay, error))
            await asyncio.sleep(delay)

    def _timed_out(self, call: Call, limit: float) -> str:
        options = self.options
        if limit < call.timeout_s:
            return (f"{call.where}: no answer within {limit:.3g} s, the rest of the call's deadline "
                    f"(call_deadline_s={options.call_deadline_s:g})")
        return (f"{call.where}: no answer within {limit:.3g} s (request_timeout_s="
                f"{options.request_timeout_s:g})")


class RetryLog:
    """Writes retry notices to the log (a line under the cell in a notebook): the first at once, then at
    most one every `RETRY_LINE_EVERY_S`, so 128 calls retried together do not flood the output."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = -math.inf
        self._left_out = 0

    def __call__(self, notice: RetryNotice) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last < RETRY_LINE_EVERY_S:
                self._left_out += 1
                return
            left_out, self._left_out, self._last = self._left_out, 0, now
        since = f" ({left_out} other retries since the last line)" if left_out else ""
        log.warning("%s%s", notice, since)
