"""The client against the local fake LLM server: concurrency timing, SDK round trips, injected faults."""

from __future__ import annotations

import asyncio
import gc
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from support.fake_bedrock import FakeBedrock, echo_reply
from support.fake_server import FakeLLMServer
from support.loopback_model import LoopbackModel

from personalens_utils.llm import CallKind, FatalError, LLMClient, Message, Request
from personalens_utils.llm.backends.openai import OpenAIBackend

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

LATENCY = 0.05
N_CALLS = 200


def requests(n: int, prefix: str = "q") -> list[Request]:
    return [
        Request(kind=CallKind.JUDGE, messages=(Message("user", f"{prefix}{i}"),), model="claude-3-5-haiku")
        for i in range(n)
    ]


def timed_run(server: FakeLLMServer, max_concurrency: int, n_calls: int = N_CALLS) -> float:
    with LLMClient(
        LoopbackModel(server.url), max_concurrency=max_concurrency, use_cache=False, progress=False
    ) as client:
        started = time.perf_counter()
        responses = client.run_all(requests(n_calls))
        elapsed = time.perf_counter() - started
    assert [r.text for r in responses] == [f"echo: q{i}" for i in range(n_calls)]
    return elapsed


def test_200_calls_at_concurrency_32_keep_32_in_flight() -> None:
    """The bound is reached, not only respected: the server sees 32 requests at once. How fast that is
    is measured by benchmarks/simulation_throughput.py (`--paths loopback`), not here."""
    with FakeLLMServer(latency_s=LATENCY, reply="echo", process=True) as server:
        timed_run(server, 32)
        assert server.peak_in_flight == 32


def test_40_calls_at_concurrency_1_take_at_least_40_latencies() -> None:
    """Forty are enough to show the calls wait for each other (200 took ten seconds of sleeping)."""
    with FakeLLMServer(latency_s=LATENCY, reply="echo") as server:
        elapsed = timed_run(server, 1, n_calls=40)
        assert server.peak_in_flight == 1
    assert elapsed >= 40 * LATENCY


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-key")
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


def sdk_client(backend: str, server: FakeLLMServer, **kw: Any) -> LLMClient:
    base_url = server.url + "/v1" if backend == "openai" else server.url
    kw.setdefault("max_concurrency", 16)
    return LLMClient(backend, base_url=base_url, use_cache=False, progress=False, retry_base_s=0.001, **kw)


@pytest.mark.parametrize("backend", ["anthropic", "openai", "bedrock"])
def test_sdk_backends_round_trip_and_respect_the_bound(keys, backend: str) -> None:
    fake = FakeBedrock(latency_s=0.02, responder=echo_reply) if backend == "bedrock" else FakeLLMServer(
        latency_s=0.02, reply="echo")
    with fake as server, sdk_client(backend, server) as client:
        responses = client.run_all(requests(64))
        assert [r.text for r in responses] == [f"echo: q{i}" for i in range(64)]
        assert 1 < server.peak_in_flight <= 16
        assert server.total("requests") == 64


@pytest.mark.parametrize("options", [{}, {"http_transport": "httpx"}])
def test_the_openai_backend_calls_over_the_sdks_aiohttp_transport_unless_told_httpx(keys, options) -> None:
    """aiohttp is the default because it was measured faster (benchmarks/openai_transport.py)."""
    backend = OpenAIBackend(**options)

    async def sdk_http_client(server: FakeLLMServer) -> tuple[str, object]:
        backend.base_url = server.url + "/v1"
        answer = await backend.acomplete(requests(1)[0], "gpt-4o-mini")
        http = backend._clients.get()._client
        await backend.aclose()
        return answer.text, http

    with FakeLLMServer(reply="echo") as server:
        text, http = asyncio.run(sdk_http_client(server))
    assert text == "echo: q0" and server.total("requests") == 1
    assert isinstance(http, openai.DefaultAioHttpClient) == (options.get("http_transport") != "httpx")
    assert isinstance(http, httpx2.AsyncClient)  # the httpx one otherwise: the SDK's own default
    with pytest.raises(ValueError, match="http_transport must be one of"):
        OpenAIBackend(http_transport="requests")


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_a_backend_called_from_another_clients_loop_closes_its_aiohttp_session(keys, backend, caplog) -> None:
    """A simulation calls its assistant's client from its user agent's loop: the session the SDK makes
    there is closed when that loop stops, not reported unclosed by aiohttp when collected."""
    with FakeLLMServer(reply="echo") as server:
        assistant, user = sdk_client(backend, server), LLMClient("offline", progress=False)
        assert user._loop.run(assistant.acomplete(requests(1)[0]), misuse="").text == "echo: q0"
        user.close()
        assistant.close()
    gc.collect()  # aiohttp reports a session collected unclosed through asyncio's logger
    assert not [r for r in caplog.records if "Unclosed" in r.getMessage()]


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_injected_faults_are_retried_and_counted(keys, backend: str) -> None:
    with (
        FakeLLMServer(fault_rate=0.3, seed=7, reply="echo") as server,
        sdk_client(backend, server, max_retries=5) as client,
    ):
        responses = client.run_all(requests(100))
        injected = server.total("injected")
        assert injected > 0
        assert [r.text for r in responses] == [f"echo: q{i}" for i in range(100)]
        assert sum(r.retries for r in responses) == injected == client.totals()["retries"]
        assert server.total("requests") == 100 + injected
        assert {"429", "529", "500"} & set(next(iter(server.stats().values())))


def test_fault_pattern_is_set_by_the_seed() -> None:
    def faults(seed: int) -> int:
        with (
            FakeLLMServer(fault_rate=0.3, seed=seed) as server,
            LLMClient(
                LoopbackModel(server.url), use_cache=False, progress=False, retry_base_s=0.001
            ) as client,
        ):
            client.run_all(requests(40))
            return server.total("injected")

    assert faults(3) == faults(3)
    assert len({faults(seed) for seed in range(4)}) > 1


def test_wrong_key_is_a_fast_401(keys) -> None:
    with FakeLLMServer(require_key="right-key") as server, sdk_client("anthropic", server) as client:
        with pytest.raises(FatalError, match="ANTHROPIC_API_KEY"):
            client.complete(requests(1)[0])
        assert server.total("401") == 1


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    raw = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(raw) as reply:
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_429_carries_retry_after_and_faults_are_capped() -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    with FakeLLMServer(
        fault_rate=1.0, fault_statuses=(429,), retry_after_s=1.5, max_faults_per_request=2
    ) as s:
        statuses = [post(s.url + "/v1/messages", body) for _ in range(3)]
    assert [status for status, _, _ in statuses] == [429, 429, 200]
    assert statuses[0][1]["retry-after"] == "1.5"
    assert json.loads(statuses[0][2])["error"]["type"] == "rate_limit_error"


def test_custom_routes_and_reply_functions() -> None:
    def batches(server: FakeLLMServer, method: str, path: str, body: dict, headers: dict) -> tuple:
        return 200, {"method": method, "path": path, "n": len(body.get("requests", []))}, {}

    def reply(api: str, body: dict[str, Any]) -> str:
        return f"{api}:{body['model']}"

    with FakeLLMServer(reply=reply) as server:
        server.add_route("/v1/messages/batches", batches)
        status, _, raw = post(server.url + "/v1/messages/batches", {"requests": [1, 2]})
        assert status == 200 and json.loads(raw) == {"method": "POST", "path": "/v1/messages/batches", "n": 2}
        status, _, raw = post(server.url + "/v1/chat/completions", {"model": "x", "messages": []})
        assert json.loads(raw)["choices"][0]["message"]["content"] == "openai:x"
        status, _, _ = post(server.url + "/nowhere", {})
        assert status == 404
        assert server.stats()["/v1/chat/completions"] == {"requests": 1, "200": 1, "ok": 1}


def test_a_server_in_a_child_process_reports_its_counters() -> None:
    with FakeLLMServer(reply="echo", fault_rate=1.0, max_faults_per_request=1, process=True) as server:
        with LLMClient(
            LoopbackModel(server.url), use_cache=False, progress=False, retry_base_s=0.001
        ) as client:
            assert client.complete(requests(1)[0]).text == "echo: q0"
        assert server.total("requests") == 2 and server.total("injected") == 1
        assert server.peak_in_flight == 1
        server.reset()
        assert server.stats() == {}
    with pytest.raises(ValueError, match="module-level"):
        FakeLLMServer(reply=lambda api, body: "x", process=True).start()
