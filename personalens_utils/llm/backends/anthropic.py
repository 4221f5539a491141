"""Claude through the Anthropic Messages API (anthropic SDK 2.x, built on httpx2; calls go over the
SDK's aiohttp transport unless `http_transport="httpx"`).

Two facts of SDK 2.x shape this module. `messages.create` has no `temperature` argument, and the
API version it sends by default (2026-10-21) rejects sampling parameters on every model. The paper
fixes temperatures (user 0.5, assistant and judge 0), so for models that still honour one the
backend sends it through `extra_body` together with the `anthropic-version: 2023-06-01` header that
accepts it. Models that reject a temperature (see `registry`) get none, and the log says so once.

Prompt caching: a request whose stable prefix is long enough to be cached carries a `cache_control`
breakpoint at the end of that prefix (docs/scale.md). The same request bodies go into Message Batches.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import anthropic
import httpx2

from personalens_utils.llm import registry
from personalens_utils.llm.backends._http import (
    HTTP_TRANSPORTS,
    PING,
    PerLoop,
    classify_status,
    unreachable,
    unreadable,
)
from personalens_utils.llm.batch import BatchResult
from personalens_utils.llm.prompt_cache import CHARS_PER_TOKEN_LOW, min_cacheable_tokens, stable_prefix
from personalens_utils.llm.types import FatalError, LLMError, Request, Response, RetryableError, Usage

log = logging.getLogger(__name__)

ANTHROPIC_URL = "https://api.anthropic.com"
"""Where the SDK sends calls when ANTHROPIC_BASE_URL is not set."""

TEMPERATURE_API_VERSION = "2023-06-01"
"""The Messages API version under which `temperature` is still accepted."""

_EPHEMERAL = {"type": "ephemeral"}
_FINAL_ERRORS = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error",
     "request_too_large", "billing_error"}
)
"""Batch entry error types that a resubmission would meet again."""
_UNPROCESSED = {
    "expired": "the batch expired (24 hours) before this entry was processed",
    "canceled": "the batch was canceled before this entry was processed",
}


def cache_marked(
    request: Request, model: str
) -> tuple[str | list[dict[str, Any]], list[dict[str, Any]]]:
    """The system and messages of a Messages body, with a cache breakpoint after the stable prefix.

    The breakpoint goes on the system block, or on a first text block cut from the first message
    when the prompt builder said how long its stable part is. A prefix too short for the model's
    cache, or a cut that would leave an empty block, is sent unmarked.
    """
    system, prefix = stable_prefix(request)
    messages: list[dict[str, Any]] = [m.as_dict() for m in request.messages]
    if (len(system) + len(prefix)) / CHARS_PER_TOKEN_LOW < min_cacheable_tokens(model):
        return system, messages
    if not prefix:
        marked = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}] if system else system
        return marked, messages
    rest = request.messages[0].content[len(prefix):]
    if not prefix.strip() or not rest.strip():
        return system, messages
    messages[0] = {
        "role": request.messages[0].role,
        "content": [
            {"type": "text", "text": prefix, "cache_control": _EPHEMERAL},
            {"type": "text", "text": rest},
        ],
    }
    return system, messages


class _ClaudeBackend:
    """Shared by the Anthropic API and Bedrock: both speak Messages through the anthropic SDK."""

    name = "anthropic"
    key_hint = "Set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the environment to a valid key."
    prompt_caching = False

    def __init__(self, *, timeout: float = 120.0, http_client: httpx2.AsyncClient | None = None):
        self.timeout = timeout
        self._http_client = http_client
        self._clients: PerLoop[Any] = PerLoop(self._new_client, self._close_owned)
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(timeout={self.timeout})"

    def endpoint(self) -> str:
        """Where calls go and which setting chose that, for the message when nothing answers there."""
        raise NotImplementedError

    def _new_client(self) -> Any:
        raise NotImplementedError

    def _client(self) -> Any:
        try:
            return self._clients.get()
        except (ValueError, anthropic.AnthropicError) as err:
            raise FatalError(f"{self.name} backend could not be set up: {err}. {self.key_hint}") from err

    def _temperature_fields(self, request: Request, model: str) -> tuple[dict[str, Any], dict[str, str]]:
        """extra_body and extra_headers that carry the request's temperature, if the model takes one."""
        if request.temperature is None:
            return {}, {}
        if not registry.honours_temperature(model):
            if model not in self._warned:
                self._warned.add(model)
                log.warning("%s rejects a sampling temperature; sending its requests without one", model)
            return {}, {}
        return {"temperature": request.temperature}, {"anthropic-version": TEMPERATURE_API_VERSION}

    def _check_credentials(self, client: Any) -> None:
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            raise FatalError(f"{self.name} backend has no credentials. {self.key_hint}")

    def message_params(
        self, request: Request, model: str
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
        """(Messages API arguments, extra body fields, extra headers) for one request."""
        extra_body, extra_headers = self._temperature_fields(request, model)
        system, messages = cache_marked(request, model) if self.prompt_caching else (
            request.system, [m.as_dict() for m in request.messages]
        )
        params: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, "messages": messages}
        if system:
            params["system"] = system
        if request.stop:
            params["stop_sequences"] = list(request.stop)
        return params, extra_body, extra_headers

    def _error(self, err: Exception, model: str, doing: str = "") -> LLMError:
        """An SDK failure as the error the client acts on (retry, or stop with what to do)."""
        if isinstance(err, anthropic.APIStatusError):
            return classify_status(
                err.status_code,
                f"{doing}{err.api_message or err}",
                err.response.headers,
                backend=self.name,
                model=model,
                key_hint=self.key_hint,
                markers=f"{err.type or ''} {err.error_code or ''}",
            )
        return RetryableError(f"{self.name} backend, model {model!r}: {doing}connection failed: {err}")

    def _response(self, message: Any, model: str, latency_s: float) -> Response:
        usage = message.usage
        return Response(
            text="".join(block.text for block in message.content if block.type == "text"),
            usage=Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_input_tokens or 0,
                cache_write_tokens=usage.cache_creation_input_tokens or 0,
            ),
            backend=self.name,
            model=model,
            latency_s=latency_s,
            cut_off=message.stop_reason == "max_tokens",
        )

    async def acomplete(self, request: Request, model: str) -> Response:
        client = self._client()
        self._check_credentials(client)
        params, extra_body, extra_headers = self.message_params(request, model)
        started = time.perf_counter()
        try:
            message = await client.messages.create(
                **params, extra_body=extra_body or None, extra_headers=extra_headers or None
            )
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as err:
            raise self._error(err, model) from err
        except (json.JSONDecodeError, anthropic.APIResponseValidationError) as err:
            raise unreadable(self.name, model, self.endpoint(), err) from err
        return self._response(message, model, time.perf_counter() - started)

    async def preflight(self, model: str) -> None:
        """One call answered with at most one token: credentials present and accepted, endpoint
        reachable, model id known. Raises the error the client acts on, without retrying."""
        client = self._client()
        self._check_credentials(client)
        try:
            await client.messages.create(model=model, max_tokens=1, messages=list(PING))
        except anthropic.APIStatusError as err:
            raise self._error(err, model) from err
        except anthropic.APIConnectionError as err:
            raise unreachable(self.name, self.endpoint(), err) from err
        except (json.JSONDecodeError, anthropic.APIResponseValidationError) as err:
            raise unreadable(self.name, model, self.endpoint(), err) from err

    async def _close_owned(self, client: Any) -> None:
        """Close an SDK client with its HTTP pool, unless that pool is the caller's (`http_client`)."""
        if self._http_client is None:
            await client.close()

    async def aclose(self) -> None:
        client = self._clients.pop()
        if client is not None:
            await self._close_owned(client)


class AnthropicBackend(_ClaudeBackend):
    """The Anthropic API. Reads ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) and ANTHROPIC_BASE_URL.

    `prompt_caching` (default on) marks each request's stable prefix cacheable; the Message Batches
    methods (`create_batch`, `batch_status`, `batch_results`) serve `llm.batch`.
    """

    name = "anthropic"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        timeout: float = 120.0,
        http_client: httpx2.AsyncClient | None = None,
        prompt_caching: bool = True,
        http_transport: str = "aiohttp",
    ):
        """`http_transport`: "aiohttp" (default: the SDK's `DefaultAioHttpClient`, from the
        `anthropic[aiohttp]` extra) or "httpx" (the SDK's own default, httpx2); ignored when an
        `http_client` is given. aiohttp costs less CPU per call, which is what bounds throughput with
        many calls in flight (docs/llm.md, "Measured")."""
        if http_transport not in HTTP_TRANSPORTS:
            raise ValueError(f"http_transport must be one of {HTTP_TRANSPORTS}, got {http_transport!r}")
        super().__init__(timeout=timeout, http_client=http_client)
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self.prompt_caching = prompt_caching
        self.http_transport = http_transport

    def __repr__(self) -> str:
        return (f"AnthropicBackend(base_url={self.base_url!r}, timeout={self.timeout}, "
                f"http_transport={self.http_transport!r})")

    def endpoint(self) -> str:
        return f"{self.base_url or ANTHROPIC_URL} (set by ANTHROPIC_BASE_URL)"

    def _new_client(self) -> anthropic.AsyncAnthropic:
        http_client = self._http_client
        if http_client is None and self.http_transport == "aiohttp":
            http_client = anthropic.DefaultAioHttpClient(timeout=self.timeout)
        return anthropic.AsyncAnthropic(
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            http_client=http_client,
        )

    # -- Message Batches ----------------------------------------------------------------------------

    async def create_batch(self, entries: Sequence[tuple[str, Request, str]]) -> str:
        """Submit (custom_id, request, resolved model) entries as one Message Batch; its id.

        Each entry's params are exactly what `acomplete` would send; the headers (the API version
        that takes a temperature) apply to the whole batch.
        """
        client = self._client()
        self._check_credentials(client)
        requests, headers = [], {}
        for custom_id, request, model in entries:
            params, extra_body, extra_headers = self.message_params(request, model)
            requests.append({"custom_id": custom_id, "params": {**params, **extra_body}})
            headers.update(extra_headers)
        model = entries[0][2] if entries else ""
        try:
            batch = await client.messages.batches.create(requests=requests, extra_headers=headers or None)
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as err:
            raise self._error(err, model, "creating a message batch: ") from err
        return batch.id

    async def batch_status(self, batch_id: str) -> str:
        """The batch's processing status: "in_progress", "canceling" or "ended"."""
        client = self._client()
        try:
            batch = await client.messages.batches.retrieve(batch_id)
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as err:
            raise self._error(err, "", f"polling message batch {batch_id}: ") from err
        if batch.archived_at is not None:
            raise FatalError(f"message batch {batch_id} was archived; its results are no longer available")
        return batch.processing_status

    async def batch_results(self, batch_id: str) -> list[BatchResult]:
        """Every entry of an ended batch, matched by custom_id (the results file has no fixed order)."""
        client = self._client()
        out = []
        try:
            async for line in await client.messages.batches.results(batch_id):
                out.append(self._batch_result(line))
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as err:
            raise self._error(err, "", f"reading the results of message batch {batch_id}: ") from err
        return out

    def _batch_result(self, line: Any) -> BatchResult:
        result = line.result
        if result.type == "succeeded":
            message = result.message
            answer = replace(self._response(message, message.model, 0.0), batch=True)
            return BatchResult(line.custom_id, "succeeded", answer)
        if result.type == "errored":
            error = result.error.error
            return BatchResult(
                line.custom_id, "errored", error=f"{error.type}: {error.message}",
                retryable=error.type not in _FINAL_ERRORS,
            )
        return BatchResult(line.custom_id, result.type, error=_UNPROCESSED.get(result.type, result.type))
