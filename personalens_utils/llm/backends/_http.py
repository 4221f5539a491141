"""What the SDK backends share: sorting HTTP failures into retryable and fatal, and per-loop clients.

The SDKs' own retries are switched off (max_retries=0) so the client's policy is the only one in
force and every retry is counted.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Generic, TypeVar

from personalens_utils.llm.loop_thread import at_stop
from personalens_utils.llm.types import FatalError, RetryableError

RETRYABLE_STATUS = frozenset({408, 409, 424, 429, 500, 502, 503, 504, 529})
"""Timeouts, conflicts, throttling, server errors and Anthropic's 529 "overloaded"; any other 5xx too."""

HTTP_TRANSPORTS = ("aiohttp", "httpx")
"""How an SDK backend speaks HTTP: the SDK's aiohttp transport (both backends' default, measured to cost
less CPU per call) or the SDK's own httpx2 one."""

BILLING_MARKERS = ("spend_limit", "billing", "insufficient_quota", "credit balance", "payment")

T = TypeVar("T")


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asks us to wait: retry-after-ms, retry-after in seconds, or an HTTP date."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def classify_status(
    status: int,
    message: str,
    headers: Mapping[str, str],
    *,
    backend: str,
    model: str,
    key_hint: str,
    markers: str = "",
) -> RetryableError | FatalError:
    """Turn an HTTP error status into the error the client acts on, with what to do in the message.

    `markers` is any error type or code the body carried (e.g. "billing_error",
    "enforced_spend_limit_reached"): a 429 that means "out of money" must not be retried, and a 400
    "context_length_exceeded" (a local server's overflowing context) is fatal with what to change.
    """
    where = f"{backend} backend, model {model!r}"
    text = f"{markers} {message}".lower()
    if any(marker in text for marker in BILLING_MARKERS):
        return FatalError(
            f"{where}: the account hit a billing or spend limit (HTTP {status}): {message}. "
            "Raise the limit or add credit in the provider's console, then resume the run.",
            status=status,
        )
    if status == 401:
        return FatalError(f"{where}: authentication failed (HTTP 401): {message}. {key_hint}", status=status)
    if status == 403:
        return FatalError(
            f"{where}: permission denied (HTTP 403): {message}. "
            f"Check that your credentials may call this model. {key_hint}",
            status=status,
        )
    if status == 404:
        return FatalError(
            f"{where}: not found (HTTP 404): {message}. Check the model id and the base URL.", status=status
        )
    if status in RETRYABLE_STATUS or status >= 500:
        return RetryableError(
            f"{where}: HTTP {status}: {message}", status=status, retry_after=parse_retry_after(headers)
        )
    hint = ""
    if "temperature" in text:
        hint = (
            " This model rejects a sampling temperature: mark it temperature=False in "
            "personalens_utils.llm.registry or send requests with temperature=None."
        )
    elif "context_length_exceeded" in text:
        hint = (
            " The prompt and the requested answer do not fit the model's context window; the same call "
            "would be refused again, so it is not retried. Serve the model with a longer context, or "
            "lower max_tokens or the turn cap."
        )
    return FatalError(f"{where}: request rejected (HTTP {status}): {message}.{hint}", status=status)


PING = ({"role": "user", "content": "Say OK."},)
"""The one message of a preflight call (answered with at most one token)."""


def unreachable(backend: str, endpoint: str, err: Exception) -> FatalError:
    """A preflight that found no server: name where it looked and what sets that address."""
    return FatalError(
        f"{backend} backend cannot reach {endpoint}: {err}. Check the address and that the server is "
        "running and reachable from this machine."
    )


def unreadable(backend: str, model: str, endpoint: str, err: Exception) -> RetryableError:
    """A 200 whose body is not the API's JSON (a proxy's page, a wrong address): retried like a dropped
    connection, and a preflight stops at once on it, naming where the answer came from."""
    return RetryableError(
        f"{backend} backend, model {model!r}: the answer from {endpoint} is not the API's JSON ({err}). "
        "Check that this address serves the API."
    )


class PerLoop(Generic[T]):
    """One SDK client per event loop: an async HTTP pool must not be shared between loops. Given `close`,
    a client made on a client's loop thread is closed when that thread stops (`loop_thread.at_stop`),
    unless its backend's `aclose` took it first (`pop`)."""

    def __init__(self, factory: Callable[[], T], close: Callable[[T], Awaitable[None]] | None = None):
        self._factory = factory
        self._close = close
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                client = self._clients[loop] = self._factory()
                if self._close is not None:
                    at_stop(loop, functools.partial(self._close_held, client))
        return client

    async def _close_held(self, client: T) -> None:
        with self._lock:
            held = [loop for loop, mine in self._clients.items() if mine is client]
            for loop in held:
                del self._clients[loop]
        if held and self._close is not None:
            await self._close(client)

    def pop(self) -> T | None:
        """Forget (and hand back for closing) the current loop's client."""
        with self._lock:
            return self._clients.pop(asyncio.get_running_loop(), None)
