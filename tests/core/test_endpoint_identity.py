"""Two OpenAI-compatible servers serving one model name are two models: the endpoint is identity.

Each server gets its own calls and its own cached answers, their dialogues are different records and
the tables show them as two rows; the default endpoints keep the keys and ids they always had; no
API key (nor a password written into an endpoint's URL) reaches a cache, a record or a log line.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from support.fake_server import FakeLLMServer
from support.scripted_models import JUDGE, scripted_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import analysis, judging
from personalens_utils.assistants import resolve_assistant
from personalens_utils.judging import JudgingConfig
from personalens_utils.llm import CallKind, LLMClient, LLMError, Message, Request, registry
from personalens_utils.llm.client import Clients
from personalens_utils.llm.role import Role
from personalens_utils.measures import scores
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

MODEL = "my-model"
SPEC_A, SPEC_B = f"openai@PL_ENDPOINT_A:{MODEL}", f"openai@PL_ENDPOINT_B:{MODEL}"
KEY = "sk-test-KEY-SENTINEL-5e1d"
PASSWORD = "pw-SENTINEL-77c2"
REQUEST = Request(kind=CallKind.ASSISTANT_TURN, model=MODEL, messages=(Message("user", "hello"),),
                  max_tokens=50)


def _said(text: str):
    return lambda api, body: text


def _clients(cache: Path) -> Clients:
    return Clients("offline", cache_dir=cache, progress=False, retry_base_s=0.01, retry_cap_s=0.05)


def _config(spec: str, clients: Clients) -> SimulationConfig:
    """Simulation with the offline user agent and the assistant `spec`."""
    return SimulationConfig(user_model="Claude 3 Sonnet", assistant=resolve_assistant(spec, clients))


def _ask(spec: str, cache: Path) -> Any:
    clients = _clients(cache)
    try:
        return clients.client(clients.spec(spec)).complete(REQUEST)
    finally:
        clients.close()


def test_two_servers_under_one_model_name_never_share_cached_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeLLMServer(reply=_said("from server A")) as a, FakeLLMServer(reply=_said("from server B")) as b:
        monkeypatch.setenv("PL_ENDPOINT_A", a.url + "/v1")
        monkeypatch.setenv("PL_ENDPOINT_B", b.url + "/v1")
        first, second = _ask(SPEC_A, tmp_path), _ask(SPEC_B, tmp_path)
        again_a, again_b = _ask(SPEC_A, tmp_path), _ask(SPEC_B, tmp_path)
        assert (first.text, first.cached) == ("from server A", False)
        assert (second.text, second.cached) == ("from server B", False)
        assert (again_a.text, again_a.cached) == ("from server A", True)
        assert (again_b.text, again_b.cached) == ("from server B", True)
        assert a.total("requests") == 1 == b.total("requests")
        # the variable's value is what counts: pointed at the other server, it gets that server's answers
        monkeypatch.setenv("PL_ENDPOINT_A", b.url + "/v1/")
        moved = _ask(SPEC_A, tmp_path)
        assert (moved.text, moved.cached) == ("from server B", True)
        assert a.total("requests") == 1 == b.total("requests")


def test_dialogues_on_two_endpoints_are_two_runs_kept_apart_in_the_tables(tmp_path, monkeypatch):
    bench = tiny_benchmark(n_users=1, seed=3)
    n = len(bench.scenarios)
    store = RunStore(tmp_path / "run")
    with FakeLLMServer(reply=scripted_reply) as a, FakeLLMServer(reply=scripted_reply) as b:
        urls = a.url, b.url
        monkeypatch.setenv("PL_ENDPOINT_A", a.url + "/v1")
        monkeypatch.setenv("PL_ENDPOINT_B", b.url + "/v1")
        clients = _clients(tmp_path / "cache")
        user = clients.client(clients.spec("offline:Claude 3 Sonnet"))
        try:
            def simulate(spec: str) -> Any:
                return run_simulation(bench, store, user, _config(spec, clients))

            on_a = simulate(SPEC_A)
            served_a = a.total("ok")
            on_b = simulate(SPEC_B)
            again = simulate(SPEC_A)
            with LLMClient("offline", progress=False) as judge:
                judging.run_judging(store, judge, judging.benchmark_contexts(bench),
                                    JudgingConfig(judge_model=JUDGE))
        finally:
            clients.close()
        assert a.total("ok") == served_a and b.total("ok") > 0  # each server got its own calls, only those
        served_b = b.total("ok")
    assert on_a.stored == n and on_b.already_done == 0 and on_b.stored == n
    assert again.already_done == n and again.stored == 0
    dialogues = store.read(Dialogue)
    ids = [{d.id for d in dialogues if d.assistant_model_id == f"{MODEL} at {url}/v1"} for url in urls]
    assert len(ids[0]) == len(ids[1]) == n and not ids[0] & ids[1]
    assert served_b == sum(d.n_turns for d in dialogues if d.id in ids[1])
    assert {d.assistant_model for d in dialogues} == {MODEL}

    tidy = scores.load_scores(store, judge_model=JUDGE)
    rows = list(analysis.table3(tidy).frame["Assistant model"])
    assert len(rows) == 2 and all(r.startswith(MODEL) for r in rows)
    assert sorted(url for r in rows for url in urls if url in r) == sorted(urls)
    with pytest.raises(scores.ScoresError, match=r"would pool records of \d+ different runs") as refused:
        scores.aggregate(tidy, ["assistant_model", "task_type"])
    assert all(url in str(refused.value) for url in urls)


def test_the_default_endpoints_keep_their_cache_keys_and_ids(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = "Llama 3.1 8B Instruct"
    for url in (None, "https://api.openai.com/v1/", "HTTPS://API.OPENAI.COM/v1"):
        if url is not None:
            monkeypatch.setenv("OPENAI_BASE_URL", url)
        with LLMClient("openai", progress=False) as client:
            assert client.endpoint == "" and client._namespace == "openai"
        assert Role.of(model, "openai", client.endpoint) == Role.of(model, "openai")
    assert Role.of(model, "openai").model_id == registry.resolve(model, "openai")
    with LLMClient("offline", progress=False) as offline:
        assert offline.endpoint == ""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with LLMClient("openai", progress=False) as local:
        assert local.endpoint == "http://127.0.0.1:9/v1" and local._namespace == "openai@http://127.0.0.1:9/v1"
    served = Role.of(model, "openai", local.endpoint).model_id
    assert served == f"{registry.resolve(model, 'openai')} at {local.endpoint}"


def test_no_key_or_password_reaches_a_cache_a_record_or_a_log_line(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    bench = tiny_benchmark(n_users=1, seed=3)
    store = RunStore(tmp_path / "run")
    with FakeLLMServer(reply=scripted_reply, fault_rate=0.2, fault_statuses=(429, 500), seed=2) as server:
        url = server.url
        monkeypatch.setenv("PL_ENDPOINT_A", f"{url}/v1/")
        clients = _clients(tmp_path / "cache")
        try:
            report = run_simulation(bench, store, clients.client(clients.spec("offline:Claude 3 Sonnet")),
                                    _config(SPEC_A, clients))
            usage = clients.usage_frame().to_string()
        finally:
            clients.close()
    assert report.stored == len(bench.scenarios) and report.statuses.get("error", 0) == 0
    assert {d.assistant_model_id for d in store.read(Dialogue)} == {f"{MODEL} at {url}/v1"}
    written = b"".join(p.read_bytes() for folder in (tmp_path / "cache", tmp_path / "run")
                       for p in folder.rglob("*") if p.is_file())
    for secret in (KEY, PASSWORD):
        assert secret.encode() not in written
        assert secret not in caplog.text and secret not in usage and secret not in repr(clients)
    # an endpoint that does not answer is named in the error without its password
    monkeypatch.setenv("PL_ENDPOINT_A", f"http://someone:{PASSWORD}@127.0.0.1:9/v1")
    clients = Clients("offline", progress=False, use_cache=False, max_retries=0)
    try:
        with pytest.raises(LLMError) as failed:
            clients.client(clients.spec(SPEC_A)).complete(REQUEST)
    finally:
        clients.close()
    assert "127.0.0.1:9" in str(failed.value) and PASSWORD not in str(failed.value)
