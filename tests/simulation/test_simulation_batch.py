"""Simulation through batch APIs, turn by turn, against the loopback fake server's batch endpoints:
the same dialogue records as live, no live call for a role that has batches, resubmission of failed
entries, and mixed runs (a role without batches answers live inside the round)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.fake_batches import FakeBatches, FakeOpenAIBatches
from support.fake_server import FakeLLMServer
from support.records import dialogue_lines
from support.scripted_models import UNPRICED, dialogue_config, dialogue_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants.python import PythonAssistant, PythonOptions
from personalens_utils.llm import LLMClient, registry
from personalens_utils.runstore.records import Batch, BatchEntry, Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import run_simulation

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

FAST = {"poll_interval_s": 0.01}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=dialogue_reply) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        yield fake


def client() -> LLMClient:
    return LLMClient("anthropic", use_cache=False, progress=False, retry_base_s=0.01, retry_cap_s=0.05)


@pytest.mark.parametrize("model", [UNPRICED, "claude-3-5-haiku"])
def test_a_batch_run_stores_the_live_records_byte_for_byte_without_a_live_call(server, tmp_path, model):
    bench = tiny_benchmark(n_users=10, seed=3)
    with client() as llm:
        live = run_simulation(bench, tmp_path / "live", llm, dialogue_config(model))
    assert live.stored == 40
    server.reset()
    batches = FakeBatches(polls_in_progress=1).install(server)
    with client() as llm:
        batched = run_simulation(bench, tmp_path / "batch", llm, dialogue_config(model, batch=True, **FAST))
    assert batched.stored == 40 and batched.statuses == live.statuses
    assert "/v1/messages" not in server.stats(), "no live call for a role whose backend has batches"
    live_lines = dialogue_lines(RunStore(tmp_path / "live"))
    batch_lines = dialogue_lines(RunStore(tmp_path / "batch"))
    assert set(live_lines) == set(batch_lines), "record ids do not depend on the transport"
    statuses = {json.loads(line)["status"] for line in live_lines.values()}
    assert statuses == {"terminated", "turn_cap"}
    if registry.price_for(model) is None:
        assert batch_lines == live_lines
    else:  # the same dialogues; what each cost is the batch price, half the list price
        for did, line in live_lines.items():
            was, now = json.loads(line), json.loads(batch_lines[did])
            assert now.pop("cost_usd") == pytest.approx(was.pop("cost_usd") / 2) and now == was
    turns = max(json.loads(line)["n_turns"] for line in live_lines.values())
    assert len(batches.created) == 2 * turns, "one batch per round: the users' turns, then the assistants'"
    results = RunStore(tmp_path / "batch").records(BatchEntry)
    assert len({r["key"] for r in results}) == len(results), "each request asked once"
    assert len(results) <= sum(len(json.loads(line)["turns"]) for line in live_lines.values())


def test_an_expired_entry_is_resubmitted_once_and_its_dialogue_finishes(server, tmp_path):
    bench = tiny_benchmark(n_users=2, seed=3)
    expired: list[str] = []

    def outcome(custom_id: str, params: dict[str, Any]) -> str:
        if not expired:
            expired.append(custom_id)
            return "expired"
        return "succeeded"

    with client() as llm:
        run_simulation(bench, tmp_path / "live", llm, dialogue_config())
    batches = FakeBatches(polls_in_progress=0, outcome=outcome).install(server)
    with client() as llm:
        report = run_simulation(bench, tmp_path / "batch", llm, dialogue_config(batch=True, **FAST))
    assert report.statuses.get("error", 0) == 0 and report.stored == 8
    store = RunStore(tmp_path / "batch")
    entries = store.records(BatchEntry)
    (failed,) = [e for e in entries if e["outcome"] == "expired"]
    again = [e for e in entries if e["key"] == failed["key"]]
    assert [e["outcome"] for e in again] == ["expired", "succeeded"], "resubmitted once"
    assert dialogue_lines(store) == dialogue_lines(RunStore(tmp_path / "live"))
    assert len(store.records(Batch)) == len(batches.created)


def test_a_mixed_run_batches_the_user_agent_and_asks_a_python_assistant_live(server, tmp_path):
    bench = tiny_benchmark(n_users=2, seed=3)
    batches = FakeBatches(polls_in_progress=0).install(server)
    with client() as llm:
        assistant = PythonAssistant("support.assistants:Recorder", None, PythonOptions())
        report = run_simulation(bench, tmp_path / "run", llm,
                                dialogue_config(batch=True, assistant=assistant, **FAST))
    assert report.stored == 8 and report.statuses.get("error", 0) == 0
    assert "/v1/messages" not in server.stats()
    records = RunStore(tmp_path / "run").records(Dialogue)
    assert all(t["content"] == "Noted." for r in records for t in r["turns"] if t["role"] == "assistant")
    user_turns = sum(t["role"] == "user" for r in records for t in r["turns"])
    assert len(RunStore(tmp_path / "run").records(BatchEntry)) == user_turns
    assert len(batches.created) == max(r["n_turns"] for r in records), "one batch per user round"


def test_a_rerun_submits_nothing_whose_answer_is_stored(server, tmp_path):
    bench = tiny_benchmark(n_users=2, seed=3)
    batches = FakeBatches(polls_in_progress=0).install(server)
    store = RunStore(tmp_path / "run")
    with client() as llm:
        run_simulation(bench, store, llm, dialogue_config(batch=True, **FAST))
    submitted = len(batches.created)
    store.path(Dialogue).unlink()  # as if killed after the last round, before the dialogues landed
    with client() as llm:
        again = run_simulation(bench, RunStore(store.root), llm, dialogue_config(batch=True, **FAST))
    assert again.stored == 8
    assert len(batches.created) == submitted, "every turn answered from the stored batch entries"
    assert len(dialogue_lines(RunStore(store.root))) == 8


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=dialogue_reply) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        yield fake


def openai_client() -> LLMClient:
    return LLMClient("openai", use_cache=False, progress=False, retry_base_s=0.01, retry_cap_s=0.05)


def test_an_openai_batch_run_stores_the_live_records_byte_for_byte(openai_server, tmp_path):
    bench = tiny_benchmark(n_users=10, seed=3)
    with openai_client() as llm:
        live = run_simulation(bench, tmp_path / "live", llm, dialogue_config())
    openai_server.reset()
    batches = FakeOpenAIBatches(polls_in_progress=1).install(openai_server)
    with openai_client() as llm:
        batched = run_simulation(bench, tmp_path / "batch", llm, dialogue_config(batch=True, **FAST))
    assert batched.stored == live.stored == 40 and batched.statuses == live.statuses
    assert "/v1/chat/completions" not in openai_server.stats(), "no live call for a role with batches"
    live_lines = dialogue_lines(RunStore(tmp_path / "live"))
    assert dialogue_lines(RunStore(tmp_path / "batch")) == live_lines
    turns = max(json.loads(line)["n_turns"] for line in live_lines.values())
    assert len(batches.created) == len(batches.uploads) == 2 * turns
    first = [json.loads(line) for line in batches.uploads[0].decode().splitlines()]
    assert {line["url"] for line in first} == {"/v1/chat/completions"} and len(first) == 40


def test_an_openai_server_without_a_batch_api_answers_live_inside_the_round(openai_server, tmp_path):
    bench = tiny_benchmark(n_users=2, seed=3)
    with openai_client() as llm:
        live = run_simulation(bench, tmp_path / "live", llm, dialogue_config())
        batched = run_simulation(bench, tmp_path / "batch", llm, dialogue_config(batch=True, **FAST))
    assert batched.stored == live.stored == 8
    assert openai_server.stats()["/v1/files"]["404"] == 1, "asked once, then answered live"
    assert dialogue_lines(RunStore(tmp_path / "batch")) == dialogue_lines(RunStore(tmp_path / "live"))


def test_a_batch_is_split_by_the_backends_request_limit(openai_server, tmp_path, monkeypatch):
    from personalens_utils.llm.backends.openai import OpenAIBackend

    monkeypatch.setattr(OpenAIBackend, "batch_limits", (3, 200 * 10**6))
    bench = tiny_benchmark(n_users=2, seed=3)
    batches = FakeOpenAIBatches(polls_in_progress=0).install(openai_server)
    with openai_client() as llm:
        report = run_simulation(bench, tmp_path / "batch", llm,
                                dialogue_config(batch=True, max_turns=1, **FAST))
    assert report.stored == 8
    assert [len(batches.batches[b]["requests"]) for b in batches.created[:3]] == [3, 3, 2], "8 openings"


def test_make_reproduce_batch_reaches_notebooks_03_and_04_and_is_refused_offline(tmp_path):
    from personalens_utils.reproduce.cli import parse_args, problems
    from personalens_utils.reproduce.pipeline import plan_pass

    offline = parse_args(["--batch"])
    assert any(line.startswith("--batch: the offline backend has no batch API") for line in problems(offline))
    settings = parse_args(["--batch", "--backend", "anthropic", "--passes", "generated"])
    assert not [line for line in problems(settings) if "--batch" in line]
    steps = {s.notebook: s.params for s in plan_pass(settings, tmp_path, tmp_path / "bench", None, True)}
    assert steps["03_simulation"]["batch"] is True and steps["04_judging"]["batch"] is True


def test_a_batch_run_shows_one_progress_line(server, tmp_path, capsys):
    FakeBatches(polls_in_progress=0).install(server)
    with LLMClient("anthropic", use_cache=False, progress=True, retry_base_s=0.01, retry_cap_s=0.05) as llm:
        run_simulation(tiny_benchmark(n_users=2, seed=3), tmp_path / "run", llm,
                       dialogue_config(batch=True, **FAST))
    shown = capsys.readouterr().err
    assert "simulation (batch rounds)" in shown and "rounds=" in shown
    assert f"{Dialogue.table}:" not in shown, "the pool's own bar is not drawn beside the rounds' line"
