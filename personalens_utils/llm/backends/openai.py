"""Any OpenAI-compatible chat-completions endpoint: vLLM, Ollama, llama.cpp server, OpenAI itself.

The Batch API (an input file uploaded through `/v1/files`, then `/v1/batches`) serves `llm.batch` with
the same request bodies; a server without it (most local ones) answers 404, which `llm.batch` reads as
`BatchUnsupported` and the caller answers those requests live.

The openai SDK (3.x, built on httpx2 like the anthropic SDK; calls go over its aiohttp transport unless
`http_transport="httpx"`) reads OPENAI_API_KEY and OPENAI_BASE_URL. Local servers usually need no key;
when the base URL is not OpenAI's and no key is set, a fixed placeholder is sent because the SDK refuses
to run without one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai

from personalens_utils.llm.backends._http import (
    HTTP_TRANSPORTS,
    PING,
    PerLoop,
    classify_status,
    unreachable,
    unreadable,
)
from personalens_utils.llm.batch import BatchResult, BatchUnsupported
from personalens_utils.llm.endpoints import OPENAI_URL, openai_endpoint, public_url
from personalens_utils.llm.types import FatalError, Request, Response, RetryableError, Usage

LOCAL_PLACEHOLDER_KEY = "no-key-needed"
CHAT_PATH = "/v1/chat/completions"
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
"""Batch statuses after which nothing more is answered."""
_UNPROCESSED = {"batch_expired": "expired", "batch_cancelled": "canceled"}
"""Error codes of entries a batch ended without processing, as `llm.batch` names the outcome."""
LENGTH = "length"
"""The finish_reason of a reply cut at the request's token limit."""


def _usage(usage: dict[str, Any] | None) -> Usage:
    """Token usage of a chat completion (cached prompt tokens counted apart, as live answers count them)."""
    if not usage:
        return Usage()
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return Usage(input_tokens=usage.get("prompt_tokens", 0) - cached,
                 output_tokens=usage.get("completion_tokens", 0), cache_read_tokens=cached)


class OpenAIBackend:
    name = "openai"
    batch_limits = (50_000, 200 * 10**6)
    """The Batch API takes at most 50,000 requests and a 200 MB input file per batch."""
    key_hint = (
        "Set OPENAI_API_KEY in the environment, or point OPENAI_BASE_URL at a local server "
        "(vLLM, Ollama, llama.cpp) that needs no key."
    )

    def __init__(
        self,
        *,
        base_url: str | None = None,
        base_url_var: str = "OPENAI_BASE_URL",
        timeout: float = 120.0,
        http_client: httpx2.AsyncClient | None = None,
        token_param: str = "max_tokens",
        http_transport: str = "aiohttp",
    ):
        """`token_param`: "max_tokens" (vLLM, Ollama, llama.cpp) or "max_completion_tokens" (newer OpenAI).
        `base_url_var`: the environment variable holding the endpoint (a spec `openai@VAR:model` names it).
        `http_transport`: "aiohttp" (default: the SDK's `DefaultAioHttpClient`) or "httpx" (the SDK's own
        httpx2); ignored when an `http_client` is given, and for a base URL holding user:password, which
        aiohttp refuses beside the SDK's key header and httpx2 sends as basic auth. aiohttp answered more
        calls per second for about half the CPU per call (benchmarks/openai_transport.py; docs/llm.md)."""
        if token_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                f"token_param must be 'max_tokens' or 'max_completion_tokens', got {token_param!r}"
            )
        if http_transport not in HTTP_TRANSPORTS:
            raise ValueError(f"http_transport must be one of {HTTP_TRANSPORTS}, got {http_transport!r}")
        self.http_transport = http_transport
        self.base_url_var = base_url_var
        self.base_url = base_url or os.environ.get(base_url_var) or OPENAI_URL
        self.served_at = openai_endpoint(self.base_url)
        """Where the model is served, as cache keys and record ids name it (`endpoints`); "" for OpenAI."""
        self.timeout = timeout
        self.token_param = token_param
        self._http_client = http_client
        self._clients: PerLoop[openai.AsyncOpenAI] = PerLoop(self._new_client, self._close_owned)

    def __repr__(self) -> str:
        return (f"OpenAIBackend(base_url={public_url(self.base_url)!r}, timeout={self.timeout}, "
                f"http_transport={self.http_transport!r})")

    def endpoint(self) -> str:
        return f"{public_url(self.base_url)} (set by {self.base_url_var})"

    def _new_client(self) -> openai.AsyncOpenAI:
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            if not self.served_at:  # OpenAI's own API
                raise FatalError(f"openai backend has no key for {OPENAI_URL}. {self.key_hint}")
            key = LOCAL_PLACEHOLDER_KEY
        http_client = self._http_client
        if http_client is None and self.http_transport == "aiohttp" and not urlsplit(self.base_url).username:
            http_client = openai.DefaultAioHttpClient(timeout=self.timeout)
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            http_client=http_client,
        )

    def body(self, request: Request, model: str) -> dict[str, Any]:
        """The chat-completions body of one request: what a live call and a batch entry both send."""
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [m.as_dict() for m in request.messages]
        kwargs: dict[str, Any] = {"model": model, "messages": messages, self.token_param: request.max_tokens}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.stop:
            kwargs["stop"] = list(request.stop)
        return kwargs

    async def acomplete(self, request: Request, model: str) -> Response:
        client = self._clients.get()
        kwargs = self.body(request, model)
        started = time.perf_counter()
        try:
            completion = await client.chat.completions.create(**kwargs)
        except openai.APIStatusError as err:
            raise self._status_error(err, model) from err
        except openai.APIConnectionError as err:
            raise RetryableError(
                f"openai backend, model {model!r} at {public_url(self.base_url)}: connection failed: {err}"
            ) from err
        except (json.JSONDecodeError, openai.APIResponseValidationError) as err:
            raise unreadable(self.name, model, self.endpoint(), err) from err
        if not completion.choices:
            raise RetryableError(f"openai backend, model {model!r}: the reply had no choices")
        choice = completion.choices[0]
        if not choice.message.content:
            raise RetryableError(self._empty(model, choice.finish_reason))
        usage = completion.usage
        cached = 0
        if usage is not None and usage.prompt_tokens_details is not None:
            cached = usage.prompt_tokens_details.cached_tokens or 0
        return Response(
            text=choice.message.content,
            usage=Usage(
                input_tokens=(usage.prompt_tokens - cached) if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
                cache_read_tokens=cached,
            ),
            backend=self.name,
            model=model,
            latency_s=time.perf_counter() - started,
            cut_off=choice.finish_reason == LENGTH,
        )

    def _empty(self, model: str, finish_reason: str | None) -> str:
        """Why an empty reply is refused: an empty user message or assistant reply would be kept in the
        dialogue as if it had been said (and an empty judge answer asked again as unreadable), so it is
        retried like a dropped connection; if every attempt is empty, the call's record is an error
        record with this message."""
        return (f"openai backend, model {model!r} at {self.endpoint()}: the reply was empty "
                f"(finish_reason {finish_reason!r})")

    def _status_error(self, err: openai.APIStatusError, model: str) -> FatalError | RetryableError:
        body = err.body if isinstance(err.body, dict) else {}
        return classify_status(
            err.status_code,
            str(body.get("message") or err.message),
            err.response.headers,
            backend=self.name,
            model=model,
            key_hint=self.key_hint,
            markers=f"{body.get('type') or ''} {body.get('code') or ''}",
        )

    async def preflight(self, model: str) -> None:
        """One call answered with at most one token: key (if the endpoint needs one) accepted, endpoint
        reachable, model id served. Raises the error the client acts on, without retrying."""
        client = self._clients.get()
        try:
            await client.chat.completions.create(model=model, messages=list(PING), **{self.token_param: 1})
        except openai.APIStatusError as err:
            raise self._status_error(err, model) from err
        except openai.APIConnectionError as err:
            raise unreachable(self.name, self.endpoint(), err) from err
        except (json.JSONDecodeError, openai.APIResponseValidationError) as err:
            raise unreadable(self.name, model, self.endpoint(), err) from err

    # -- Batch API --------------------------------------------------------------------------------

    def _batch_error(self, err: Exception, doing: str) -> Exception:
        if isinstance(err, openai.NotFoundError):
            return BatchUnsupported(f"openai backend at {self.endpoint()}: {doing}: the server has no batch "
                                    "API (404); its requests are answered live", status=404)
        if isinstance(err, openai.APIStatusError):
            return self._status_error(err, "")
        return RetryableError(f"openai backend at {self.base_url}: {doing}: connection failed: {err}")

    async def create_batch(self, entries: Sequence[tuple[str, Request, str]]) -> str:
        """Upload (custom_id, request, resolved model) entries as a JSONL input file and start one batch of
        chat completions on it; the batch's id."""
        client = self._clients.get()
        lines = [json.dumps({"custom_id": custom_id, "method": "POST", "url": CHAT_PATH,
                             "body": self.body(request, model)}) for custom_id, request, model in entries]
        data = ("\n".join(lines) + "\n").encode()
        try:
            uploaded = await client.files.create(file=("batch.jsonl", data), purpose="batch")
            batch = await client.batches.create(input_file_id=uploaded.id, endpoint=CHAT_PATH,
                                                completion_window="24h")
        except (openai.APIStatusError, openai.APIConnectionError) as err:
            raise self._batch_error(err, "creating a batch") from err
        return batch.id

    async def _retrieve(self, batch_id: str) -> Any:
        try:
            return await self._clients.get().batches.retrieve(batch_id)
        except (openai.APIStatusError, openai.APIConnectionError) as err:
            raise self._batch_error(err, f"polling batch {batch_id}") from err

    async def batch_status(self, batch_id: str) -> str:
        """"ended" once the batch completed, failed, expired or was cancelled; else its status."""
        status = (await self._retrieve(batch_id)).status
        return "ended" if status in ENDED else status

    async def batch_results(self, batch_id: str) -> list[BatchResult]:
        """Every entry the ended batch's output and error files hold, matched by custom_id."""
        batch = await self._retrieve(batch_id)
        out = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            try:
                content = await self._clients.get().files.content(file_id)
            except (openai.APIStatusError, openai.APIConnectionError) as err:
                raise self._batch_error(err, f"reading file {file_id} of batch {batch_id}") from err
            out += [self._batch_result(json.loads(line))
                    for line in content.text.splitlines() if line.strip()]
        return out

    def _batch_result(self, line: dict[str, Any]) -> BatchResult:
        custom_id, error = line["custom_id"], line.get("error")
        if error:
            code = str(error.get("code") or "")
            return BatchResult(custom_id, _UNPROCESSED.get(code, "errored"),
                               error=f"{code}: {error.get('message') or ''}")
        response = line.get("response") or {}
        status, body = int(response.get("status_code") or 0), response.get("body") or {}
        if status != 200:
            message = (body.get("error") or {}).get("message") or f"status {status}"
            return BatchResult(custom_id, "errored", error=f"status {status}: {message}",
                               retryable=status == 429 or status >= 500)
        choices = body.get("choices") or []
        if not choices:
            return BatchResult(custom_id, "errored", error="the reply had no choices")
        model, finish_reason = body.get("model", ""), choices[0].get("finish_reason")
        text = (choices[0].get("message") or {}).get("content")
        if not text:
            return BatchResult(custom_id, "errored", error=self._empty(model, finish_reason))
        return BatchResult(custom_id, "succeeded", Response(text=text, usage=_usage(body.get("usage")),
                                                            backend=self.name, model=model, latency_s=0.0,
                                                            cut_off=finish_reason == LENGTH))

    async def _close_owned(self, client: openai.AsyncOpenAI) -> None:
        """Close an SDK client with its HTTP pool, unless that pool is the caller's (`http_client`)."""
        if self._http_client is None:
            await client.close()

    async def aclose(self) -> None:
        client = self._clients.pop()
        if client is not None:
            await self._close_owned(client)
