"""Claude through the Anthropic Messages API (anthropic SDK 2.x, built on httpx2).

Two facts of SDK 2.x shape this module. `messages.create` has no `temperature` argument, and the
API version it sends by default (2026-10-21) rejects sampling parameters on every model. The paper
fixes temperatures (user 0.5, assistant and judge 0), so for models that still honour one the
backend sends it through `extra_body` together with the `anthropic-version: 2023-06-01` header that
accepts it. Models that reject a temperature (see `registry`) get none, and the log says so once.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import anthropic
import httpx2

from .. import registry
from ..types import FatalError, Request, Response, RetryableError, Usage
from ._http import PerLoop, classify_status

log = logging.getLogger(__name__)

TEMPERATURE_API_VERSION = "2023-06-01"
"""The Messages API version under which `temperature` is still accepted."""


class _ClaudeBackend:
    """Shared by the Anthropic API and Bedrock: both speak Messages through the anthropic SDK."""

    name = "anthropic"
    key_hint = "Set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the environment to a valid key."

    def __init__(self, *, timeout: float = 120.0, http_client: httpx2.AsyncClient | None = None):
        self.timeout = timeout
        self._http_client = http_client
        self._clients: PerLoop[Any] = PerLoop(self._new_client)
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(timeout={self.timeout})"

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

    async def acomplete(self, request: Request, model: str) -> Response:
        client = self._client()
        self._check_credentials(client)
        extra_body, extra_headers = self._temperature_fields(request, model)
        kwargs: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens,
            "messages": [m.as_dict() for m in request.messages],
        }
        if request.system:
            kwargs["system"] = request.system
        if request.stop:
            kwargs["stop_sequences"] = list(request.stop)
        started = time.perf_counter()
        try:
            message = await client.messages.create(
                **kwargs, extra_body=extra_body or None, extra_headers=extra_headers or None
            )
        except anthropic.APIStatusError as err:
            markers = f"{err.type or ''} {err.error_code or ''}"
            raise classify_status(
                err.status_code,
                err.api_message or str(err),
                err.response.headers,
                backend=self.name,
                model=model,
                key_hint=self.key_hint,
                markers=markers,
            ) from err
        except anthropic.APIConnectionError as err:
            raise RetryableError(f"{self.name} backend, model {model!r}: connection failed: {err}") from err
        text = "".join(block.text for block in message.content if block.type == "text")
        usage = message.usage
        return Response(
            text=text,
            usage=Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_input_tokens or 0,
                cache_write_tokens=usage.cache_creation_input_tokens or 0,
            ),
            backend=self.name,
            model=model,
            latency_s=time.perf_counter() - started,
        )

    async def aclose(self) -> None:
        client = self._clients.pop()
        if client is not None and self._http_client is None:
            await client.close()


class AnthropicBackend(_ClaudeBackend):
    """The Anthropic API. Reads ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) and ANTHROPIC_BASE_URL."""

    name = "anthropic"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        timeout: float = 120.0,
        http_client: httpx2.AsyncClient | None = None,
    ):
        super().__init__(timeout=timeout, http_client=http_client)
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None

    def __repr__(self) -> str:
        return f"AnthropicBackend(base_url={self.base_url!r}, timeout={self.timeout})"

    def _new_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            http_client=self._http_client,
        )
