"""The SDK backends through mock transports: replies, retries, fast failures, and the response cache.

The anthropic (2.x) and openai (3.x) SDKs are built on httpx2, which respx (an httpx mock) does
not see; each backend is handed an `httpx2.AsyncClient` whose transport is a `MockTransport`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from personalens_utils.llm import (
    CallKind,
    FatalError,
    LLMClient,
    Message,
    Request,
    RetriesExhaustedError,
)
from personalens_utils.llm.backends import make_backend

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

SECRET = "sk-test-never-stored-0123456789"

ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Sure, booked."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 12,
        "output_tokens": 3,
        "cache_read_input_tokens": 4,
        "cache_creation_input_tokens": 2,
    },
}
OPENAI_OK = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Sure, booked."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
}


def anthropic_error(status: int, kind: str, message: str = "nope", code: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message}
    if code:
        error["details"] = {"error_code": code}
    return {"type": "error", "error": error}


def openai_error(status: int, message: str = "nope", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "error", "code": code}}


class Script:
    """A mock HTTP endpoint: answers from a list of (status, body, headers) or exceptions, then `ok`."""

    def __init__(self, ok: dict[str, Any], steps: list[Any] | None = None):
        self.ok = ok
        self.steps = list(steps or [])
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        step = self.steps.pop(0) if self.steps else (200, self.ok, {})
        if isinstance(step, Exception):
            raise step
        status, body, headers = step
        return httpx2.Response(status, json=body, headers=headers)

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))

    def body(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index].content)


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "no-profiles"))
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


@pytest.fixture
def clients(tmp_path: Path) -> Iterator:
    made: list[LLMClient] = []

    def make(backend: str, script: Script, **kw: Any) -> LLMClient:
        kw.setdefault("cache_dir", str(tmp_path / "cache"))
        kw.setdefault("use_cache", False)
        client = LLMClient(
            backend, http_client=script.client(), retry_base_s=0.001, progress=False, max_retries=4, **kw
        )
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def request(**kw: Any) -> Request:
    kw.setdefault("model", "Claude Sonnet 4.5")
    kw.setdefault("system", "You are a helpful assistant.")
    kw.setdefault("messages", (Message("user", "Book me a table for two."),))
    return Request(kind=kw.pop("kind", CallKind.ASSISTANT_TURN), **kw)


OK_BY_BACKEND = {"anthropic": ANTHROPIC_OK, "openai": OPENAI_OK, "bedrock": ANTHROPIC_OK}


def error_body(backend: str, status: int, kind: str, code: str | None = None) -> dict[str, Any]:
    return (
        openai_error(status, code=code) if backend == "openai" else anthropic_error(status, kind, code=code)
    )


# -- normal replies -----------------------------------------------------------------------------------


def test_anthropic_reply_and_request_shape(clients) -> None:
    script = Script(ANTHROPIC_OK)
    response = clients("anthropic", script).complete(request(temperature=0.0, stop=("END",)))
    assert response.text == "Sure, booked."
    assert response.usage.input_tokens == 12 and response.usage.output_tokens == 3
    assert response.usage.cache_read_tokens == 4 and response.usage.cache_write_tokens == 2
    assert response.model == "claude-sonnet-4-5-20250929" and response.cost_usd > 0
    sent = script.requests[0]
    assert sent.url.path == "/v1/messages"
    body = script.body()
    assert body["model"] == "claude-sonnet-4-5-20250929"
    assert body["system"] == "You are a helpful assistant."
    assert body["messages"] == [{"role": "user", "content": "Book me a table for two."}]
    assert body["temperature"] == 0.0 and body["stop_sequences"] == ["END"] and body["max_tokens"] == 1024
    # The SDK's default API version rejects sampling parameters; the temperature rides on 2023-06-01.
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["x-stainless-retry-count"] == "0"


def test_anthropic_leaves_temperature_out_for_models_that_reject_it(clients) -> None:
    script = Script(ANTHROPIC_OK)
    clients("anthropic", script).complete(request(model="claude-opus-4-8", temperature=0.5))
    assert "temperature" not in script.body()
    assert script.requests[0].headers["anthropic-version"] != "2023-06-01"


def test_openai_reply_and_request_shape(clients) -> None:
    script = Script(OPENAI_OK)
    response = clients("openai", script, base_url="http://vllm.local:8000/v1").complete(
        request(model="Llama 3.1 8B Instruct", temperature=0.5)
    )
    assert response.text == "Sure, booked." and response.usage.output_tokens == 3
    assert script.requests[0].url == httpx2.URL("http://vllm.local:8000/v1/chat/completions")
    body = script.body()
    assert body["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert body["temperature"] == 0.5 and body["max_tokens"] == 1024


def test_bedrock_reply_is_signed_and_addressed_to_the_model(clients) -> None:
    script = Script(ANTHROPIC_OK)
    response = clients("bedrock", script).complete(request(model="Claude 3.5 Haiku", temperature=0.0))
    assert response.text == "Sure, booked." and response.backend == "bedrock"
    sent = script.requests[0]
    assert sent.url.host == "bedrock-runtime.us-east-1.amazonaws.com"
    assert sent.url.path == "/model/anthropic.claude-3-5-haiku-20241022-v1:0/invoke"
    assert sent.headers["authorization"].startswith("AWS4-HMAC-SHA256")
    body = script.body()
    assert "model" not in body and body["temperature"] == 0.0
    assert body["anthropic_version"] == "bedrock-2023-05-31"


def test_bedrock_without_region_fails_fast(clients, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    script = Script(ANTHROPIC_OK)
    with pytest.raises(FatalError, match="AWS_REGION"):
        clients("bedrock", script).complete(request())
    assert script.requests == []


# -- retries ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["anthropic", "openai", "bedrock"])
def test_429_twice_then_success(clients, backend: str) -> None:
    limited = (429, error_body(backend, 429, "rate_limit_error"), {"retry-after": "0"})
    script = Script(OK_BY_BACKEND[backend], [limited, limited])
    client = clients(backend, script)
    response = client.complete(request(model="claude-3-5-haiku"))
    assert response.text == "Sure, booked." and response.retries == 2
    assert len(script.requests) == 3
    assert all(r.headers.get("x-stainless-retry-count", "0") == "0" for r in script.requests)
    assert client.usage_frame().loc[0, "retries"] == 2


@pytest.mark.parametrize("backend", ["anthropic", "bedrock"])
def test_529_then_success(clients, backend: str) -> None:
    script = Script(ANTHROPIC_OK, [(529, anthropic_error(529, "overloaded_error"), {})])
    response = clients(backend, script).complete(request(model="claude-3-5-haiku"))
    assert response.retries == 1 and len(script.requests) == 2


def test_openai_500_then_success(clients) -> None:
    script = Script(OPENAI_OK, [(500, openai_error(500), {})])
    assert clients("openai", script).complete(request()).retries == 1


@pytest.mark.parametrize("backend", ["anthropic", "openai", "bedrock"])
def test_connection_error_is_retried(clients, backend: str) -> None:
    script = Script(OK_BY_BACKEND[backend], [httpx2.ConnectError("connection refused")])
    response = clients(backend, script).complete(request(model="claude-3-5-haiku"))
    assert response.retries == 1 and len(script.requests) == 2


def test_persistent_connection_errors_exhaust_retries(clients) -> None:
    script = Script(ANTHROPIC_OK, [httpx2.ConnectError("connection refused")] * 10)
    with pytest.raises(RetriesExhaustedError, match="5 attempts"):
        clients("anthropic", script).complete(request())
    assert len(script.requests) == 5


# -- fast failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "hint"),
    [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY"), ("bedrock", "AWS_ACCESS_KEY_ID")],
)
def test_401_fails_fast_with_what_to_do(clients, backend: str, hint: str) -> None:
    script = Script(OK_BY_BACKEND[backend], [(401, error_body(backend, 401, "authentication_error"), {})])
    with pytest.raises(FatalError, match=hint) as info:
        clients(backend, script).complete(request(model="claude-3-5-haiku"))
    assert len(script.requests) == 1
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, anthropic_error(400, "invalid_request_error", "messages: field required")),
        (403, anthropic_error(403, "permission_error")),
        (402, anthropic_error(402, "billing_error", "credit balance too low")),
        (429, anthropic_error(429, "rate_limit_error", "spend limit", code="enforced_spend_limit_reached")),
    ],
)
def test_unfixable_errors_are_not_retried(clients, status: int, body: dict[str, Any]) -> None:
    script = Script(ANTHROPIC_OK, [(status, body, {})])
    with pytest.raises(FatalError):
        clients("anthropic", script).complete(request())
    assert len(script.requests) == 1


def test_openai_insufficient_quota_is_fatal(clients) -> None:
    script = Script(
        OPENAI_OK, [(429, openai_error(429, "You exceeded your quota", code="insufficient_quota"), {})]
    )
    with pytest.raises(FatalError, match="billing or spend limit"):
        clients("openai", script).complete(request())
    assert len(script.requests) == 1


def test_missing_keys_fail_fast(clients, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY")
    for backend, hint in (("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")):
        script = Script(OK_BY_BACKEND[backend])
        with pytest.raises(FatalError, match=hint):
            clients(backend, script).complete(request())
        assert script.requests == []


def test_local_openai_servers_need_no_key(clients, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    script = Script(OPENAI_OK)
    clients("openai", script, base_url="http://localhost:11434/v1").complete(request())
    assert len(script.requests) == 1


# -- the response cache -------------------------------------------------------------------------------

VARIANTS = {
    "model": {"model": "Claude 3.5 Haiku"},
    "temperature": {"temperature": 0.7},
    "max_tokens": {"max_tokens": 99},
    "system": {"system": "Be terse."},
    "messages": {"messages": (Message("user", "Book me a table for four."),)},
}


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
@pytest.mark.parametrize("changed", sorted(VARIANTS))
def test_cache_misses_on_each_parameter_that_matters(clients, backend: str, changed: str) -> None:
    script = Script(OK_BY_BACKEND[backend])
    client = clients(backend, script, use_cache=True)
    base = request(temperature=0.0)
    assert not client.complete(base).cached
    assert client.complete(base).cached
    assert len(script.requests) == 1
    kw = {"temperature": 0.0, **VARIANTS[changed]}
    assert not client.complete(request(**kw)).cached
    assert len(script.requests) == 2
    assert client.complete(request(**kw)).cached


def test_cache_separates_backends(clients) -> None:
    anthropic_script, openai_script = Script(ANTHROPIC_OK), Script(OPENAI_OK)
    clients("anthropic", anthropic_script, use_cache=True).complete(request())
    assert not clients("openai", openai_script, use_cache=True).complete(request()).cached
    assert len(openai_script.requests) == 1


def test_cache_ignores_context_and_the_api_key(
    clients, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = Script(ANTHROPIC_OK)
    clients("anthropic", script, use_cache=True).complete(request(context={"turn": 0}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-a-different-key")
    again = clients("anthropic", script, use_cache=True).complete(request(context={"turn": 5, "x": [1]}))
    assert again.cached and len(script.requests) == 1
    stored = b"".join(path.read_bytes() for path in (tmp_path / "cache").rglob("*") if path.is_file())
    assert SECRET.encode() not in stored and b"sk-a-different-key" not in stored


def test_backends_never_show_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("anthropic", "openai", "bedrock"):
        backend = make_backend(name)
        assert SECRET not in repr(backend)
        assert SECRET not in repr(LLMClient(backend, use_cache=False))
