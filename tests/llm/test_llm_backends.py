"""The SDK backends through mock transports: replies, retries, fast failures, and the response cache.

The anthropic (2.x) and openai (3.x) SDKs are built on httpx2, which respx (an httpx mock) does
not see; each backend is handed an `httpx2.AsyncClient` whose transport is a `MockTransport`.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from support.fake_bedrock import ASSISTANT_REPLY, FakeBedrock

from personalens_utils.llm import (
    CallKind,
    FatalError,
    LLMClient,
    Message,
    PreflightError,
    Request,
    Response,
    RetriesExhaustedError,
    registry,
)
from personalens_utils.llm.backends import make_backend
from personalens_utils.llm.backends.bedrock import BedrockBackend

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


OK_BY_BACKEND = {"anthropic": ANTHROPIC_OK, "openai": OPENAI_OK}


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


@pytest.mark.parametrize(("stop_reason", "cut_off"), [("max_tokens", True), ("end_turn", False)])
def test_anthropic_says_when_a_reply_stopped_at_the_token_limit(
    clients, stop_reason: str, cut_off: bool
) -> None:
    script = Script({**ANTHROPIC_OK, "stop_reason": stop_reason})
    assert clients("anthropic", script).complete(request()).cut_off is cut_off


@pytest.mark.parametrize(("stop_reason", "cut_off"), [("max_tokens", True), ("end_turn", False)])
def test_bedrock_says_when_a_reply_stopped_at_the_token_limit(stop_reason: str, cut_off: bool) -> None:
    answer = {"output": {"message": {"role": "assistant", "content": [{"text": "Europe is"}]}},
              "stopReason": stop_reason, "usage": {"inputTokens": 5, "outputTokens": 2}}
    assert BedrockBackend()._response(answer, LLAMA_PROFILE, 0.1).cut_off is cut_off


# -- retries ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_429_twice_then_success(clients, backend: str) -> None:
    limited = (429, error_body(backend, 429, "rate_limit_error"), {"retry-after": "0"})
    script = Script(OK_BY_BACKEND[backend], [limited, limited])
    client = clients(backend, script)
    response = client.complete(request(model="claude-3-5-haiku"))
    assert response.text == "Sure, booked." and response.retries == 2
    assert len(script.requests) == 3
    assert all(r.headers.get("x-stainless-retry-count", "0") == "0" for r in script.requests)
    assert client.usage_frame().loc[0, "retries"] == 2


def test_529_then_success(clients) -> None:
    script = Script(ANTHROPIC_OK, [(529, anthropic_error(529, "overloaded_error"), {})])
    response = clients("anthropic", script).complete(request(model="claude-3-5-haiku"))
    assert response.retries == 1 and len(script.requests) == 2


def test_openai_500_then_success(clients) -> None:
    script = Script(OPENAI_OK, [(500, openai_error(500), {})])
    assert clients("openai", script).complete(request()).retries == 1


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
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
    [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")],
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


# -- bedrock: boto3's Converse against the loopback fake -----------------------------------------------

LLAMA_PROFILE = "us.meta.llama3-1-8b-instruct-v1:0"


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBedrock]:
    """A fake Bedrock endpoint, reached through the standard endpoint variable."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with FakeBedrock() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        yield server


def bedrock_client(**kw: Any) -> LLMClient:
    kw.setdefault("max_retries", 4)
    return LLMClient("bedrock", use_cache=False, progress=False, retry_base_s=0.001, **kw)


def test_bedrock_converse_reaches_llama_and_claude_with_region_usage_and_cost(bedrock) -> None:
    with bedrock_client() as client:
        llama = client.complete(request(model="llama-3-1-8b-instruct-v1", temperature=0.0, stop=("END",)))
        claude = client.complete(request(model="Claude 3.5 Haiku", temperature=0.5, max_tokens=300))
    log = bedrock.requests()
    assert [(e["model_id"], e["operation"]) for e in log] == [
        (LLAMA_PROFILE, "Converse"), ("us.anthropic.claude-3-5-haiku-20241022-v1:0", "Converse")]
    assert log[0]["body"] == {
        "messages": [{"role": "user", "content": [{"text": "Book me a table for two."}]}],
        "system": [{"text": "You are a helpful assistant."}],
        "inferenceConfig": {"maxTokens": 1024, "temperature": 0.0, "stopSequences": ["END"]}}
    assert log[1]["body"]["inferenceConfig"] == {"maxTokens": 300, "temperature": 0.5}
    # AWS_REGION (which boto3 itself ignores) and the credentials chain reached the signature
    assert {(e["region"], e["access_key"]) for e in log} == {("us-east-1", "AKIDEXAMPLE")}
    assert llama.backend == claude.backend == "bedrock" and llama.model == LLAMA_PROFILE
    assert llama.text == claude.text == ASSISTANT_REPLY
    words = 11  # "You are a helpful assistant." and "Book me a table for two."
    assert (llama.usage.input_tokens, llama.usage.output_tokens) == (words, len(ASSISTANT_REPLY.split()))
    assert llama.cost_usd == 0.0  # no Bedrock price recorded for Llama
    assert claude.cost_usd == pytest.approx(registry.cost_usd("Claude 3.5 Haiku", claude.usage))
    assert claude.cost_usd > 0


def test_bedrock_merges_consecutive_turns_of_one_role(bedrock) -> None:
    turns = (Message("user", "First."), Message("user", "Second."), Message("assistant", "Yes."),
             Message("user", "Third."))
    with bedrock_client() as client:
        client.complete(request(model=LLAMA_PROFILE, messages=turns))
    assert bedrock.requests()[0]["body"]["messages"] == [
        {"role": "user", "content": [{"text": "First."}, {"text": "Second."}]},
        {"role": "assistant", "content": [{"text": "Yes."}]},
        {"role": "user", "content": [{"text": "Third."}]}]


def test_bedrock_without_region_fails_fast(bedrock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with bedrock_client() as client, pytest.raises(FatalError, match="AWS_REGION"):
        client.complete(request())
    assert bedrock.requests() == []


def test_bedrock_without_credentials_fails_fast(bedrock, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with bedrock_client() as client, pytest.raises(FatalError, match=r"no AWS credentials.*AWS_PROFILE"):
        client.complete(request())
    assert bedrock.requests() == []


def test_bedrock_reads_a_named_profile_and_the_generic_endpoint_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "config").write_text("[profile research]\nregion = eu-west-1\n")
    (tmp_path / "credentials").write_text(
        "[research]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = not-a-secret\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_PROFILE", "research")
    with FakeBedrock() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
        with bedrock_client() as client:
            client.complete(request(model="mistral-7b-instruct-v2"))
        log = server.requests()
    assert [(e["model_id"], e["access_key"], e["region"]) for e in log] == [
        ("mistral.mistral-7b-instruct-v0:2", "AKIDPROFILE", "eu-west-1")]


@pytest.mark.parametrize("status", [429, 503, 500, 408, 424])
def test_bedrock_throttling_and_server_errors_are_retried_by_the_client_alone(
    monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    with FakeBedrock(fault_rate=1.0, fault_statuses=(status,), max_faults_per_request=2) as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        with bedrock_client() as client:
            response = client.complete(request(model="claude-3-5-haiku-v1"))
            retries = client.usage_frame().loc[0, "retries"]
        statuses = [e["status"] for e in server.requests()]
    assert response.retries == 2 == retries and response.text == ASSISTANT_REPLY
    assert statuses == [status, status, 200]  # botocore's own retries are off: one request per attempt


def test_bedrock_gives_up_after_max_retries_with_the_last_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeBedrock(fault_rate=1.0, fault_statuses=(429,), max_faults_per_request=None) as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        with bedrock_client(max_retries=2) as client, pytest.raises(
                RetriesExhaustedError, match=r"3 attempts.*ThrottlingException"):
            client.complete(request(model=LLAMA_PROFILE))
        assert len(server.requests()) == 3


def test_bedrock_connection_failures_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", f"http://127.0.0.1:{closed_port()}")
    with bedrock_client(max_retries=1) as client, pytest.raises(
            RetriesExhaustedError, match=r"2 attempts.*connection failed"):
        client.complete(request(model=LLAMA_PROFILE))


@pytest.mark.parametrize(
    ("fake", "model", "match"),
    [
        ({"require_access_key": "AKIDOTHER"}, LLAMA_PROFILE,
         r"UnrecognizedClientException.*AWS_ACCESS_KEY_ID"),
        ({"denied_models": {LLAMA_PROFILE}}, LLAMA_PROFILE, r"permission denied.*AccessDeniedException"),
        ({"retired_models": {"mistral.mixtral-8x7b-instruct-v0:1"}}, "Mixtral 8x7B Instruct",
         "end of its life.*retired on Bedrock"),
        ({"profile_only_models": {"meta.llama3-1-8b-instruct-v1:0"}}, "meta.llama3-1-8b-instruct-v1:0",
         "inference profile.*'us.meta.llama3-1-8b-instruct-v1:0'"),
        ({"known_models": {LLAMA_PROFILE}}, "meta.llama3-2-1b-instruct-v1:0", "model identifier is invalid"),
    ],
    ids=["unrecognized key", "access denied", "end of life", "needs a profile", "unknown id"],
)
def test_bedrock_errors_retrying_cannot_fix_stop_at_once(
    monkeypatch: pytest.MonkeyPatch, fake: dict[str, Any], model: str, match: str
) -> None:
    with FakeBedrock(**fake) as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        with bedrock_client() as client, pytest.raises(FatalError, match=match) as caught:
            client.complete(request(model=model))
        assert len(server.requests()) == 1
    assert SECRET not in str(caught.value)


def test_bedrock_preflight_checks_each_model_once_and_names_what_failed(
    bedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    roles = {"assistant": "llama-3-1-8b-instruct-v1", "user agent": "Claude 3.5 Haiku",
             "judge": "claude-3-5-haiku-v1"}
    with bedrock_client() as client:
        assert client.preflight(roles) == [
            f"assistant: bedrock backend, model '{LLAMA_PROFILE}' answered",
            "user agent and judge: bedrock backend, model 'us.anthropic.claude-3-5-haiku-20241022-v1:0' "
            "answered"]
    assert [e["body"]["inferenceConfig"] for e in bedrock.requests()] == [{"maxTokens": 1}] * 2
    with FakeBedrock(require_access_key="AKIDOTHER") as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        refused = pytest.raises(PreflightError, match=r"assistant.*credentials refused")
        with bedrock_client() as client, refused:
            client.preflight(roles)
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", f"http://127.0.0.1:{closed_port()}")
    with bedrock_client() as client, pytest.raises(
            PreflightError, match=r"cannot reach http://127\.0\.0\.1:.*AWS_ENDPOINT_URL_BEDROCK_RUNTIME"):
        client.preflight(roles)


def test_bedrock_calls_overlap_and_leave_the_event_loop_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3 blocks; the backend runs it on threads, so calls overlap and the loop keeps ticking."""
    n = 8
    with FakeBedrock(latency_s=0.3) as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        backend = make_backend("bedrock")

        async def run() -> tuple[list[Response], int]:
            ticks = 0
            done = asyncio.Event()

            async def ticker() -> None:
                nonlocal ticks
                while not done.is_set():
                    ticks += 1
                    await asyncio.sleep(0.01)

            ticking = asyncio.create_task(ticker())
            calls = [backend.acomplete(request(messages=(Message("user", f"q{i}"),)), LLAMA_PROFILE)
                     for i in range(n)]
            answers = await asyncio.gather(*calls)
            done.set()
            await ticking
            await backend.aclose()
            return answers, ticks

        answers, ticks = asyncio.run(run())
        assert server.peak_in_flight == n
    assert len(answers) == n and ticks >= 5


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
