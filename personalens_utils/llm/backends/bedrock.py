"""Every model the paper ran on Amazon Bedrock (Claude, Llama 3.x, Mistral/Mixtral) through the
Converse API, with boto3.

Converse takes one request shape for every model family, so a Llama assistant and a Claude judge go
through the same code. Settings are the standard AWS ones: the region from `region`, AWS_REGION,
AWS_DEFAULT_REGION or the profile's config; the endpoint from `base_url`,
AWS_ENDPOINT_URL_BEDROCK_RUNTIME or AWS_ENDPOINT_URL (else Bedrock's public endpoint for the region);
credentials from the AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, AWS_PROFILE,
SSO, instance roles) or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK.

boto3 is synchronous: calls run on the backend's own thread pool so the event loop never blocks, and
botocore's retries are off so the client's retry policy is the only one and every retry is counted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import botocore.config
import botocore.exceptions

from personalens_utils.llm import registry
from personalens_utils.llm.backends._http import PING, classify_status, unreachable
from personalens_utils.llm.types import FatalError, LLMError, Request, Response, RetryableError, Usage

log = logging.getLogger(__name__)

SERVICE = "bedrock-runtime"
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL")
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")

RETRYABLE_CODES = frozenset({
    "ThrottlingException", "ServiceUnavailableException", "InternalServerException",
    "ModelTimeoutException", "ModelNotReadyException", "ModelErrorException", "TooManyRequestsException",
})
"""Bedrock error codes a later attempt may not meet (throttling, capacity, a model's transient failure)."""

CREDENTIAL_CODES = frozenset({
    "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException",
    "IncompleteSignature", "MissingAuthenticationTokenException",
})

_CONNECTION_ERRORS = (
    botocore.exceptions.EndpointConnectionError,
    botocore.exceptions.ConnectionClosedError,
    botocore.exceptions.ConnectTimeoutError,
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ProxyConnectionError,
)


class BedrockBackend:
    """Bedrock Runtime through boto3's Converse; `max_workers` bounds calls in flight (and the pool)."""

    name = "bedrock"
    key_hint = (
        "Configure AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or a "
        "Bedrock API key in AWS_BEARER_TOKEN_BEDROCK) and a region (AWS_REGION) with access to the model."
    )

    def __init__(
        self,
        *,
        region: str | None = None,
        base_url: str | None = None,
        profile: str | None = None,
        timeout: float = 120.0,
        max_workers: int = 64,
    ):
        variable = next((var for var in ENDPOINT_VARIABLES if os.environ.get(var)), None)
        self.base_url = base_url or (os.environ[variable] if variable else None)
        self._endpoint_source = "base_url" if base_url else variable
        self.profile = profile or os.environ.get("AWS_PROFILE") or None
        self._region = region or next((os.environ[v] for v in REGION_VARIABLES if os.environ.get(v)), None)
        self.timeout = timeout
        self.max_workers = max_workers
        self._client: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"BedrockBackend(region={self._region!r}, base_url={self.base_url!r}, timeout={self.timeout})"

    @property
    def region(self) -> str | None:
        return self._region

    def endpoint(self) -> str:
        """Where calls go and which setting chose that, for the message when nothing answers there."""
        if self.base_url:
            return f"{self.base_url} (set by {self._endpoint_source})"
        return f"Bedrock runtime in region {self._region!r} (set by AWS_REGION)"

    # -- the boto3 client -------------------------------------------------------------------------

    def _runtime(self) -> Any:
        """The boto3 client, made once (boto3 clients are thread-safe; sessions are not)."""
        with self._lock:
            if self._client is None:
                client = self._new_client()
                self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="bedrock")
                self._client = client
            return self._client

    def _new_client(self) -> Any:
        try:
            session = boto3.Session(profile_name=self.profile, region_name=self._region)
        except botocore.exceptions.ProfileNotFound as err:
            raise FatalError(f"bedrock backend: {err} (AWS_PROFILE={self.profile!r}). {self.key_hint}") \
                from err
        self._region = session.region_name
        if not self._region:
            raise FatalError(f"bedrock backend has no region: set AWS_REGION (e.g. us-east-1). "
                             f"{self.key_hint}")
        if session.get_credentials() is None and not os.environ.get("AWS_BEARER_TOKEN_BEDROCK"):
            raise FatalError(f"bedrock backend found no AWS credentials. {self.key_hint}")
        config = botocore.config.Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=min(self.timeout, 10.0),
            read_timeout=self.timeout,
            max_pool_connections=self.max_workers,
        )
        return session.client(SERVICE, endpoint_url=self.base_url, config=config)

    async def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        # the first call resolves credentials (files, SSO, instance metadata) off the event loop too
        client = self._client or await loop.run_in_executor(None, self._runtime)
        return await loop.run_in_executor(self._pool, lambda: getattr(client, operation)(**params))

    # -- requests ---------------------------------------------------------------------------------

    def converse_params(self, request: Request, model: str) -> dict[str, Any]:
        """The Converse arguments for one request: content blocks, system, inferenceConfig.

        Consecutive messages of one role (which Converse refuses) become one message of several blocks.
        """
        messages: list[dict[str, Any]] = []
        for message in request.messages:
            block = {"text": message.content}
            if messages and messages[-1]["role"] == message.role:
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": message.role, "content": [block]})
        config: dict[str, Any] = {"maxTokens": request.max_tokens}
        if request.temperature is not None:
            if registry.honours_temperature(model):
                config["temperature"] = request.temperature
            elif model not in self._warned:
                self._warned.add(model)
                log.warning("%s rejects a sampling temperature; sending its requests without one", model)
        if request.stop:
            config["stopSequences"] = list(request.stop)
        params: dict[str, Any] = {"modelId": model, "messages": messages, "inferenceConfig": config}
        if request.system:
            params["system"] = [{"text": request.system}]
        return params

    async def acomplete(self, request: Request, model: str) -> Response:
        params = self.converse_params(request, model)
        started = time.perf_counter()
        try:
            answer = await self._call("converse", **params)
        except botocore.exceptions.ClientError as err:
            raise self._error(err, model) from err
        except _CONNECTION_ERRORS as err:
            raise RetryableError(f"bedrock backend, model {model!r}: connection failed: {err}") from err
        except botocore.exceptions.NoCredentialsError as err:
            raise FatalError(f"bedrock backend: {err}. {self.key_hint}") from err
        return self._response(answer, model, time.perf_counter() - started)

    async def preflight(self, model: str) -> None:
        """One call answered with at most one token: credentials accepted, endpoint reachable, model
        id served on demand. Raises the error the client acts on, without retrying."""
        messages = [{"role": m["role"], "content": [{"text": m["content"]}]} for m in PING]
        try:
            await self._call("converse", modelId=model, messages=messages, inferenceConfig={"maxTokens": 1})
        except botocore.exceptions.ClientError as err:
            raise self._error(err, model) from err
        except _CONNECTION_ERRORS as err:
            raise unreachable(self.name, self.endpoint(), err) from err
        except botocore.exceptions.NoCredentialsError as err:
            raise FatalError(f"bedrock backend: {err}. {self.key_hint}") from err

    def _response(self, answer: dict[str, Any], model: str, latency_s: float) -> Response:
        blocks = answer.get("output", {}).get("message", {}).get("content", [])
        usage = answer.get("usage", {})
        return Response(
            text="".join(block.get("text", "") for block in blocks),
            usage=Usage(
                input_tokens=usage.get("inputTokens", 0),
                output_tokens=usage.get("outputTokens", 0),
                cache_read_tokens=usage.get("cacheReadInputTokens", 0),
                cache_write_tokens=usage.get("cacheWriteInputTokens", 0),
            ),
            backend=self.name,
            model=model,
            latency_s=latency_s,
            cut_off=answer.get("stopReason") == "max_tokens",
        )

    def _error(self, err: botocore.exceptions.ClientError, model: str) -> LLMError:
        """A Bedrock error as the error the client acts on, with what to do in the message."""
        error = err.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = f"{code}: {error.get('Message', err)}"
        status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        where = f"bedrock backend, model {model!r}"
        if code in RETRYABLE_CODES:
            return RetryableError(f"{where}: HTTP {status}: {message}", status=status or 503)
        if code in CREDENTIAL_CODES:
            return FatalError(f"{where}: credentials refused (HTTP {status}): {message}. {self.key_hint}",
                              status=status)
        lowered = message.lower()
        if "inference profile" in lowered or "on-demand throughput" in lowered:
            return FatalError(
                f"{where}: {message}. This model is served on demand only through a cross-Region inference "
                f"profile: use its 'us.' (or 'eu.', 'apac.') id, e.g. 'us.{model}'.", status=status)
        if "end of its life" in lowered or "end of life" in lowered or "legacy" in lowered:
            return FatalError(
                f"{where}: {message}. The model is retired on Bedrock; choose its successor "
                "(see personalens_utils.llm.registry and Table 11).", status=status)
        return classify_status(status, message, {}, backend=self.name, model=model, key_hint=self.key_hint,
                               markers=code)

    async def aclose(self) -> None:
        with self._lock:
            client, pool = self._client, self._pool
            self._client = self._pool = None
        if pool is not None:
            pool.shutdown(wait=False)
        if client is not None:
            client.close()
