"""Time limits and faults (issue 21, item 7): a server that hangs, drops, throttles or answers garbage is
reported early and by name, with a line per retry; the limits are settable from the client, the notebook
parameters and `make reproduce`. Loopback only (`support.fault_server`)."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import papermill
import pytest
from support.fault_server import FaultServer
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import reproduce
from personalens_utils.data import save_benchmark
from personalens_utils.llm import CallKind, LLMClient, Message, PreflightError, Request, RetriesExhaustedError
from personalens_utils.llm.options import ClientOptions
from personalens_utils.reproduce import Settings

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
MODEL = "claude-sonnet-4-6"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "any-key")
    monkeypatch.setenv("OPENAI_API_KEY", "any-key")
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))
    return monkeypatch


@pytest.fixture
def hanging() -> Iterator[FaultServer]:
    """Accepts every request and never answers (each connection is closed after 30 s)."""
    with FaultServer(["hang"], times=100, hang_s=30) as server:
        yield server


def client_for(backend: str, server: FaultServer, **options: object) -> LLMClient:
    url = server.url if backend == "anthropic" else f"{server.url}/v1"
    options = {"use_cache": False, "progress": False, "retry_base_s": 0.01, **options}
    return LLMClient(backend, base_url=url, **options)


def judge_request(max_tokens: int = 1024) -> Request:
    return Request(kind=CallKind.JUDGE, messages=(Message("user", "Score this."),), model=MODEL,
                   max_tokens=max_tokens)


# -- the llm layer ------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_a_hanging_server_is_an_error_within_the_deadline_naming_backend_model_and_time_limit(
        backend, keys, hanging):
    with client_for(backend, hanging, request_timeout_s=0.5, call_deadline_s=1.75) as client:
        started = time.perf_counter()
        with pytest.raises(RetriesExhaustedError) as caught:
            client.complete(judge_request())
        elapsed = time.perf_counter() - started
    message = str(caught.value)
    assert elapsed < 1.75 + 1.5, f"reported after {elapsed:.1f} s"
    assert f"a judge call to {backend}/{MODEL}" in message
    assert f"{backend} backend, model '{MODEL}': no answer within" in message
    assert "request_timeout_s=0.5" in message and "call_deadline_s=1.75" in message
    assert 2 <= caught.value.attempts <= 4  # 0.5 s each, a deadline of 1.75 s
    assert 1 <= hanging.total("hang") <= caught.value.attempts  # an attempt may be cut before it arrives
    assert client.totals()["errors"] == 1 and client.totals()["retries"] == caught.value.attempts - 1


def test_each_retry_is_a_line_saying_what_why_and_which_attempt(keys, hanging, caplog):
    caplog.set_level(logging.WARNING, logger="personalens_utils.llm.retry")
    client = client_for("anthropic", hanging, request_timeout_s=0.3, call_deadline_s=1.0, max_retries=9)
    with client, pytest.raises(RetriesExhaustedError):
        client.complete(judge_request())
    lines = [r.getMessage() for r in caplog.records]
    wait = lines[0].split(" in ")[1].split()[0]
    assert lines[0] == (f"retrying a judge call to anthropic/{MODEL} in {wait} s (attempt 2 of 10): "
                        f"anthropic backend, model '{MODEL}': no answer within 0.3 s (request_timeout_s=0.3)")
    assert len(lines) == 1  # later retries within 10 s are counted, not each printed


def test_many_calls_retried_at_once_write_one_line_not_one_each(keys, caplog):
    caplog.set_level(logging.WARNING, logger="personalens_utils.llm.retry")
    with FaultServer([529], times=20) as server, client_for("anthropic", server, max_concurrency=20) as llm:
        requests = [Request(kind=CallKind.USER_TURN, messages=(Message("user", f"hi {i}"),), model=MODEL)
                    for i in range(20)]
        answers = llm.run_all(requests)
    assert sum(a.retries for a in answers) == 20 and server.total("529") == 20
    assert len(caplog.records) == 1 and "HTTP 529" in caplog.records[0].getMessage()


def test_the_attempt_time_limit_grows_with_the_tokens_a_call_may_write(keys):
    options = ClientOptions()
    assert (options.request_timeout_s, options.call_deadline_s) == (60.0, 300.0)
    assert options.attempt_timeout_s(800) == 60.0 and options.attempt_timeout_s(1) == 60.0
    assert options.attempt_timeout_s(4000) == pytest.approx(60.0 * 4000 / 1024)
    with LLMClient("anthropic", call_deadline_s=120, progress=False) as client:
        assert client.backend.timeout == 120  # the SDK's own limit never fires before the client's


def test_drops_garbage_and_throttling_are_retried_then_answered(keys):
    faults = ["drop", "garbage", 429, 500, 529, "delay"]
    for backend in ("anthropic", "openai"):
        with FaultServer(faults, delay_s=0.2) as server, client_for(backend, server) as client:
            answer = client.complete(judge_request())
            assert answer.retries == 5 and answer.text
            stats = server.total
            assert [stats(str(f)) for f in faults] == [1] * 6 and stats("requests") == 6


def test_garbage_in_preflight_stops_at_once_saying_the_address_does_not_serve_the_api(keys):
    with FaultServer(["garbage"], times=10) as server, client_for("anthropic", server) as client:
        with pytest.raises(PreflightError, match=r"judge on the anthropic backend.*is not the API's JSON"):
            client.preflight({"judge": MODEL})
        assert server.total("garbage") == 1


def test_preflight_against_a_hanging_server_reports_within_the_time_limit_in_one_message(keys, hanging):
    with client_for("anthropic", hanging, request_timeout_s=1, max_retries=20) as client:
        started = time.perf_counter()
        with pytest.raises(PreflightError) as caught:
            client.preflight({"user agent": MODEL, "assistant": MODEL})
        elapsed = time.perf_counter() - started
    assert elapsed < 4 and hanging.total("hang") == 1  # one attempt: no answer is not retried here
    assert str(caught.value) == (
        "preflight check failed for the user agent and assistant on the anthropic backend: anthropic "
        f"backend, model '{MODEL}': no answer within 1 s (request_timeout_s=1) Nothing was run or stored; "
        "fix this and run again.")


def test_client_options_are_typed_checked_and_the_client_takes_at_most_8_parameters():
    assert len(inspect.signature(LLMClient.__init__).parameters) <= 8
    for name, value in [("request_timeout_s", 0), ("call_deadline_s", "soon"), ("max_concurrency", 0),
                        ("max_retries", -1), ("request_timeout_s", float("nan"))]:
        with pytest.raises(ValueError, match=name):
            LLMClient("offline", **{name: value})
    options = ClientOptions(max_concurrency=3, request_timeout_s=5)
    client = LLMClient("offline", options, stage="x")
    assert client.options == ClientOptions(max_concurrency=3, request_timeout_s=5, stage="x")
    assert client.max_concurrency == 3 and client.current_stage == "x"
    client.close()


# -- the notebook parameter and `make reproduce` ------------------------------------------------------


@pytest.mark.slow
def test_notebook_03_takes_the_time_limit_and_stops_on_a_hanging_server_in_one_short_error(
        keys, hanging, tmp_path):
    save_benchmark(tiny_benchmark(n_users=1), tmp_path / "bench")
    keys.setenv("ANTHROPIC_BASE_URL", hanging.url)
    started = time.perf_counter()
    with pytest.raises(papermill.PapermillExecutionError) as caught:
        papermill.execute_notebook(
            str(NOTEBOOKS / "03_simulation.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3",
            progress_bar=False,
            parameters={"backend": "anthropic", "benchmark_dir": str(tmp_path / "bench"),
                        "run_dir": str(tmp_path / "run"), "output_dir": str(tmp_path / "out"),
                        "request_timeout_s": 2},
        )
    elapsed = time.perf_counter() - started
    error = caught.value
    assert error.ename == "PreflightError" and "no answer within 2 s (request_timeout_s=2)" in error.evalue
    assert hanging.total("hang") == 1 and elapsed < 60  # the default would wait 60 s for the check alone
    assert len(error.traceback) <= 3, "\n".join(error.traceback)
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").rglob("*.jsonl"))


def test_reproduce_passes_the_time_limits_to_notebooks_03_to_05_and_refuses_bad_ones(
        monkeypatch, tmp_path, capsys):
    calls: dict[str, dict] = {}

    def record(settings, name, out, params, label="", counter=""):
        calls[name + label] = params
        return reproduce.StepResult(name + label, None, 0.0, True)

    monkeypatch.setattr(reproduce.pipeline, "run_notebook", record)
    monkeypatch.setattr(reproduce.settings, "runs_dir", lambda: tmp_path)
    settings = reproduce.parse_args(["--request-timeout-s", "7.5", "--call-deadline-s", "40"])
    assert (settings.request_timeout_s, settings.call_deadline_s) == (7.5, 40.0)
    reproduce.run_pass(Settings(run="r", request_timeout_s=7.5, call_deadline_s=40, assistant_models=("m",)),
                       "generated", None)
    for name in ("03_simulation-m", "04_judging", "05_ablation"):
        assert (calls[name]["request_timeout_s"], calls[name]["call_deadline_s"]) == (7.5, 40), name
    assert reproduce.main(["--request-timeout-s", "0"]) == 1
    assert "request_timeout_s must be a positive number of seconds, got 0.0" in capsys.readouterr().err
