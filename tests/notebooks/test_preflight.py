"""Preflight: each role's backend is checked once before any work, and a failure says what to fix.

Loopback only: a missing key, a port nobody listens on, and a 401 from the fake server, first at
the llm layer, then as the papermill error of notebooks 03 and 04 with the run store unchanged.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import papermill
import pytest
from support.fake_server import FakeLLMServer
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import save_benchmark
from personalens_utils.llm import (
    FatalError,
    LLMClient,
    PreflightError,
    Request,
    Response,
    make_backend,
    registry,
)
from personalens_utils.llm.backends._http import classify_status
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import run_simulation

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KEY_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in (*KEY_VARS, "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))
    return monkeypatch


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(require_key="the-right-key") as fake:
        yield fake


def check(backend: str, roles: dict[str, str], **options: object) -> list[str]:
    with LLMClient(backend, progress=False, retry_base_s=0.01, **options) as client:
        return client.preflight(roles)


# -- the llm layer ------------------------------------------------------------------------------------


def test_offline_passes_without_a_call():
    assert check("offline", {"user agent": "Claude 3 Sonnet", "assistant": "Claude 3 Sonnet"}) == [
        "user agent and assistant: offline backend, nothing to check"]


def test_a_missing_key_names_the_role_the_backend_and_the_variable(no_keys):
    with pytest.raises(PreflightError) as caught:
        check("anthropic", {"judge": "Claude 3.5 Sonnet"})
    message = str(caught.value)
    assert message.startswith("preflight check failed for the judge on the anthropic backend")
    assert "ANTHROPIC_API_KEY" in message and "Nothing was run or stored" in message


def test_no_server_at_the_base_url_stops_at_once_naming_the_address(no_keys):
    port = closed_port()
    no_keys.setenv("ANTHROPIC_API_KEY", "any-key")
    no_keys.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    where = rf"cannot reach http://127.0.0.1:{port} \(set by ANTHROPIC_BASE_URL\)"
    with pytest.raises(PreflightError, match=where):
        check("anthropic", {"assistant": "claude-sonnet-4-6"}, max_retries=50)  # not retried 50 times
    no_keys.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    with pytest.raises(PreflightError, match=r"assistant on the openai backend.*set by OPENAI_BASE_URL"):
        check("openai", {"assistant": "Qwen/Qwen2.5-7B-Instruct"})


def test_a_refused_key_is_a_401_naming_the_variable_and_one_call_checks_a_shared_model(no_keys, server):
    no_keys.setenv("ANTHROPIC_API_KEY", "a-wrong-key")
    no_keys.setenv("ANTHROPIC_BASE_URL", server.url)
    refused = r"user agent and assistant on the anthropic .*HTTP 401.*ANTHROPIC_API_KEY"
    with pytest.raises(PreflightError, match=refused):
        check("anthropic", {"user agent": "claude-sonnet-4-6", "assistant": "claude-sonnet-4-6"})
    assert server.total("requests") == 1
    no_keys.setenv("ANTHROPIC_API_KEY", "the-right-key")
    lines = check("anthropic", {"user agent": "claude-sonnet-4-6", "judge": "Claude Haiku 4.5"})
    judge = registry.resolve("Claude Haiku 4.5", "anthropic")
    assert lines == ["user agent: anthropic backend, model 'claude-sonnet-4-6' answered",
                     f"judge: anthropic backend, model '{judge}' answered"]
    no_keys.setenv("OPENAI_API_KEY", "the-right-key")
    no_keys.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    assert check("openai", {"assistant": "Qwen/Qwen2.5-7B-Instruct"}) == [
        "assistant: openai backend, model 'Qwen/Qwen2.5-7B-Instruct' answered"]


def test_throttling_during_the_check_is_retried(no_keys):
    with FakeLLMServer(fault_rate=1.0, fault_statuses=(529,), max_faults_per_request=2) as flaky:
        no_keys.setenv("ANTHROPIC_API_KEY", "any-key")
        no_keys.setenv("ANTHROPIC_BASE_URL", flaky.url)
        assert check("anthropic", {"judge": "claude-sonnet-4-6"})[0].endswith("answered")
        assert flaky.total("requests") == 3


# -- a key revoked mid-run -------------------------------------------------------------------------------


class RevokedAfter:
    """The offline backend until `calls` calls were made, then the 401 a revoked key gets."""

    name = "anthropic"

    def __init__(self, calls: int):
        self.left = calls
        self.offline = make_backend("offline")

    async def acomplete(self, request: Request, model: str) -> Response:
        self.left -= 1
        if self.left < 0:
            raise classify_status(401, "invalid x-api-key", {}, backend="anthropic", model=model,
                                  key_hint="Set ANTHROPIC_API_KEY in the environment to a valid key.")
        return await self.offline.acomplete(request, model)


def test_a_key_revoked_mid_run_stops_it_with_one_message_and_keeps_finished_dialogues(tmp_path):
    bench = tiny_benchmark(n_users=3)
    client = LLMClient(RevokedAfter(60), progress=False, use_cache=False, max_concurrency=1)
    with pytest.raises(FatalError) as caught:
        run_simulation(bench, tmp_path / "run", client)
    message = str(caught.value)
    assert message.startswith("simulation stopped: the ")  # the user agent's or the assistant's call
    assert "call failed: anthropic backend" in message and "authentication failed (HTTP 401)" in message
    assert "ANTHROPIC_API_KEY" in message and f"kept in the run store {tmp_path / 'run'}" in message
    kept = RunStore(tmp_path / "run").read(Dialogue)
    assert 0 < len(kept) < 12 and {d.status for d in kept} == {"terminated"}


# -- notebooks 03 and 04 under papermill ----------------------------------------------------------------


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A benchmark and a run store holding an offline run of it (what a real-model run starts from)."""
    root = tmp_path_factory.mktemp("preflight")
    bench = tiny_benchmark(n_users=2)
    save_benchmark(bench, root / "bench")
    with LLMClient("offline", progress=False) as client:
        run_simulation(bench, root / "run", client)
    return root


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("notebook, role, failure", [
    ("03_simulation", "user agent and assistant", "missing key"),
    ("04_judging", "judge", "no server"),
    ("03_simulation", "user agent and assistant", "401"),
])  # each failure in one notebook: the llm-layer tests above take each on both backends
def test_a_failed_preflight_stops_the_notebook_before_anything_is_stored(
        notebook, role, failure, offline_run, no_keys, server, tmp_path):
    expected = {
        "missing key": "has no credentials. Set ANTHROPIC_API_KEY",
        "no server": "(set by ANTHROPIC_BASE_URL)",
        "401": "authentication failed (HTTP 401): invalid key. Set ANTHROPIC_API_KEY",
    }[failure]
    if failure != "missing key":
        no_keys.setenv("ANTHROPIC_API_KEY", "a-wrong-key")
    base_url = f"http://127.0.0.1:{closed_port()}" if failure == "no server" else server.url
    no_keys.setenv("ANTHROPIC_BASE_URL", base_url)
    before = snapshot(offline_run / "run")
    with pytest.raises(papermill.PapermillExecutionError) as caught:
        papermill.execute_notebook(
            str(NOTEBOOKS / f"{notebook}.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3",
            progress_bar=False,
            parameters={"backend": "anthropic", "benchmark_dir": str(offline_run / "bench"),
                        "run_dir": str(offline_run / "run"), "output_dir": str(tmp_path / "out")},
        )
    error = caught.value
    assert error.ename == "PreflightError"
    assert error.evalue.startswith(f"preflight check failed for the {role} on the anthropic backend")
    assert expected in error.evalue and "Nothing was run or stored" in error.evalue
    assert snapshot(offline_run / "run") == before
    assert server.total("requests") == (1 if failure == "401" else 0)  # the check; no dialogue or judgment
