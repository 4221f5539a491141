"""Any OpenAI-compatible chat-completions endpoint: vLLM, Ollama, llama.cpp server, OpenAI itself.

The openai SDK (3.x, built on httpx2 like the anthropic SDK) reads OPENAI_API_KEY and
OPENAI_BASE_URL. Local servers usually need no key; when the base URL is not OpenAI's and no key
is set, a fixed placeholder is sent because the SDK refuses to run without one.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import httpx2
import openai

from ..endpoints import OPENAI_URL, openai_endpoint, public_url
from ..types import FatalError, Request, Response, RetryableError, Usage
from ._http import PING, PerLoop, classify_status, unreachable, unreadable

LOCAL_PLACEHOLDER_KEY = "no-key-needed"


class OpenAIBackend:
    name = "openai"
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
    ):
        """`token_param`: "max_tokens" (vLLM, Ollama, llama.cpp) or "max_completion_tokens" (newer OpenAI).
        `base_url_var`: the environment variable holding the endpoint (a spec `openai@VAR:model` names it)."""
        if token_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                f"token_param must be 'max_tokens' or 'max_completion_tokens', got {token_param!r}"
            )
        self.base_url_var = base_url_var
        self.base_url = base_url or os.environ.get(base_url_var) or OPENAI_URL
        self.served_at = openai_endpoint(self.base_url)
        """Where the model is served, as cache keys and record ids name it (`endpoints`); "" for OpenAI."""
        self.timeout = timeout
        self.token_param = token_param
        self._http_client = http_client
        self._clients: PerLoop[openai.AsyncOpenAI] = PerLoop(self._new_client)

    def __repr__(self) -> str:
        return f"OpenAIBackend(base_url={public_url(self.base_url)!r}, timeout={self.timeout})"

    def endpoint(self) -> str:
        return f"{public_url(self.base_url)} (set by {self.base_url_var})"

    def _new_client(self) -> openai.AsyncOpenAI:
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            if not self.served_at:  # OpenAI's own API
                raise FatalError(f"openai backend has no key for {OPENAI_URL}. {self.key_hint}")
            key = LOCAL_PLACEHOLDER_KEY
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            http_client=self._http_client,
        )

    async def acomplete(self, request: Request, model: str) -> Response:
        client = self._clients.get()
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [m.as_dict() for m in request.messages]
        kwargs: dict[str, Any] = {"model": model, "messages": messages, self.token_param: request.max_tokens}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.stop:
            kwargs["stop"] = list(request.stop)
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
        text = completion.choices[0].message.content or ""
        usage = completion.usage
        cached = 0
        if usage is not None and usage.prompt_tokens_details is not None:
            cached = usage.prompt_tokens_details.cached_tokens or 0
        return Response(
            text=text,
            usage=Usage(
                input_tokens=(usage.prompt_tokens - cached) if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
                cache_read_tokens=cached,
            ),
            backend=self.name,
            model=model,
            latency_s=time.perf_counter() - started,
        )

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

    async def aclose(self) -> None:
        client = self._clients.pop()
        if client is not None and self._http_client is None:
            await client.close()
