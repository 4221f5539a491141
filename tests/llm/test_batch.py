"""Batch judging through the anthropic backend against a local fake Message Batches endpoint."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_batches import FakeBatches
from support.fake_server import FakeLLMServer
from support.records import put
from support.scripted_judge import JUDGE, context_for, dialogue, judge_reply

from personalens_utils.judging import ALL_DIMENSIONS, Dimension, JudgingConfig, run_judging, run_judging_batch
from personalens_utils.llm import FatalError, LLMClient, registry
from personalens_utils.runstore.records import Batch, BatchEntry, Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

FAST = {"poll_interval_s": 0.01}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=judge_reply) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        yield fake


def client() -> LLMClient:
    return LLMClient("anthropic", use_cache=False, progress=False, retry_base_s=0.01, retry_cap_s=0.05)


def store_with(path: Path, dialogues: list[dict[str, Any]]) -> RunStore:
    store = RunStore(path)
    put(store, Dialogue, dialogues)
    return store


def sent_params(batches: FakeBatches) -> Counter[str]:
    entries = [r for b in batches.batches.values() for r in b["requests"]]
    return Counter(json.dumps(r["params"], sort_keys=True) for r in entries)


def test_batch_judging_sends_the_online_requests_and_stores_the_same_records_at_half_price(server, tmp_path):
    dialogues = [dialogue(0), dialogue(1, "MUMBLE"), dialogue(2, "SILENT")]
    online_bodies: Counter[str] = Counter()

    def recording_reply(api: str, body: dict[str, Any]) -> str:
        online_bodies[json.dumps(body, sort_keys=True)] += 1
        return judge_reply(api, body)

    server.reply = recording_reply
    online = store_with(tmp_path / "online", dialogues)
    with client() as llm:
        run_judging(online, llm, context_for, JudgingConfig(**JUDGE))
        online_books = llm.usage_frame()
    server.reply = judge_reply

    batches = FakeBatches(polls_in_progress=2).install(server)
    batched = store_with(tmp_path / "batch", dialogues)
    with client() as llm:
        report = run_judging_batch(batched, llm, context_for, JudgingConfig(**JUDGE, **FAST))
        batch_books = llm.usage_frame()

    assert sent_params(batches) == online_bodies, "every batch entry is exactly an online request"
    by_id = {r["id"]: r for r in online.records(Judgment)}
    records = batched.records(Judgment)
    assert len(records) == 3 * len(ALL_DIMENSIONS) == report.stored
    assert {r["id"]: r for r in records} == by_id
    mumbled = next(r for r in records if r["dialogue_id"] == "d001" and r["dimension"] == "coherence_user")
    assert mumbled["status"] == "ok" and mumbled["attempts"] == 2 and mumbled["score"] == 5
    silent = next(r for r in records if r["dialogue_id"] == "d002" and r["dimension"] == "naturalness_user")
    assert silent["status"] == "missing" and silent["score"] is None and silent["attempts"] == 2
    assert len(batches.created) == 2, "one batch of first questions, one of format reminders"

    results = batched.records(BatchEntry)
    assert len(results) == sum(online_bodies.values()) and {r["outcome"] for r in results} == {"succeeded"}
    for r in results:
        usage = registry.Usage(**r["usage"])
        assert r["cost_usd"] == pytest.approx(registry.cost_usd(r["model"], usage) / 2)
    assert batch_books["calls"].sum() == online_books["calls"].sum()
    assert batch_books["cost_usd"].sum() == pytest.approx(online_books["cost_usd"].sum() / 2)
    assert batch_books["cost_usd"].sum() == pytest.approx(sum(r["cost_usd"] for r in results))

    stored = batched.records(Batch)
    assert [b["id"] for b in stored] == batches.created
    keys = [key for b in stored for key in b["entries"].values()]
    assert all(key.split(":")[0] in by_id for key in keys), "custom_id -> judgment id:call:attempt"


def test_run_judging_batch_flag_and_rerun_does_nothing(server, tmp_path):
    batches = FakeBatches(polls_in_progress=0).install(server)
    store = store_with(tmp_path / "run", [dialogue(i) for i in range(3)])
    with client() as llm:
        first = run_judging(store, llm, context_for, JudgingConfig(**JUDGE, batch=True))
        again = run_judging(store, llm, context_for, JudgingConfig(**JUDGE, batch=True))
    assert first.stored == 3 * len(ALL_DIMENSIONS) and first.statuses == {"ok": 21}
    assert again.stored == 0 and again.details["judgments_done_before"] == 21
    assert len(batches.created) == 1


def test_errored_and_expired_entries_are_resubmitted_until_they_succeed(server, tmp_path):
    batches = FakeBatches(polls_in_progress=1, errored_rate=0.25, expired_rate=0.15, seed=4).install(server)
    store = store_with(tmp_path / "run", [dialogue(i) for i in range(6)])
    with client() as llm:
        report = run_judging_batch(store, llm, context_for, JudgingConfig(**JUDGE, max_rounds=8, **FAST))
    assert report.statuses == {"ok": 6 * len(ALL_DIMENSIONS)} and report.pending == 0
    results = store.records(BatchEntry)
    outcomes = Counter(r["outcome"] for r in results)
    assert outcomes["errored"] > 0 and outcomes["expired"] > 0 and len(batches.created) > 1
    succeeded = Counter(r["key"] for r in results if r["outcome"] == "succeeded")
    assert set(succeeded.values()) == {1}, "each request answered exactly once"
    assert set(succeeded) == {r["key"] for r in results}, "every failed request was answered in the end"


def test_entries_that_keep_failing_become_error_records_with_the_reason_and_a_rerun_replaces_them(
    server, tmp_path
):
    def outcome(custom_id: str, params: dict[str, Any]) -> str:
        text = json.dumps(params)
        return "errored" if "STUCK" in text else "invalid" if "BROKEN" in text else "succeeded"

    batches = FakeBatches(polls_in_progress=0, outcome=outcome).install(server)
    store = store_with(tmp_path / "run", [dialogue(0), dialogue(1, "STUCK"), dialogue(2, "BROKEN")])
    with client() as llm:
        report = run_judging_batch(store, llm, context_for, JudgingConfig(**JUDGE, max_rounds=3, **FAST))
    records = {(r["dialogue_id"], r["dimension"]): r for r in store.records(Judgment)}
    assert len(records) == 3 * len(ALL_DIMENSIONS), "nothing is dropped"
    assert report.statuses == {"ok": 7, "error": 14}
    stuck = records["d001", "personalization"]
    assert stuck["status"] == "error" and stuck["score"] is None
    assert "api_error" in stuck["explanation"] and "submitted 3 time(s)" in stuck["explanation"]
    assert records["d001", "turn_personalization"]["explanation"].startswith("batch entry failed: turn 1:")
    broken = records["d002", "task_completion"]
    assert "invalid_request_error" in broken["explanation"] and "submitted 1 time(s)" in broken["explanation"]
    submissions = Counter(key for b in store.records(Batch) for key in b["entries"].values())
    dialogue_of = {r["id"]: r["dialogue_id"] for r in records.values()}
    times: dict[str, set[int]] = {}
    for key, n in submissions.items():
        times.setdefault(dialogue_of[key.split(":")[0]], set()).add(n)
    assert times == {"d000": {1}, "d001": {3}, "d002": {1}}

    batches.outcome = None
    with client() as llm:
        rerun = run_judging_batch(store, llm, context_for, JudgingConfig(**JUDGE, **FAST))
    assert rerun.stored == 14 and rerun.statuses == {"ok": 14}
    assert {r["status"] for r in store.records(Judgment)} == {"ok"}


def test_max_wait_returns_early_and_a_later_call_collects_without_resubmitting(server, tmp_path):
    batches = FakeBatches(polls_in_progress=0).install(server)
    batches.hold = True
    store = store_with(tmp_path / "run", [dialogue(i) for i in range(2)])
    with client() as llm:
        waiting = run_judging_batch(store, llm, context_for, JudgingConfig(**JUDGE, max_wait_s=0, **FAST))
    assert waiting.stored == 0 and waiting.pending == 2 * len(ALL_DIMENSIONS)
    assert len(batches.created) == 1 and not store.path(Judgment).exists()

    batches.hold = False
    with client() as llm:
        done = run_judging_batch(store, llm, context_for, JudgingConfig(**JUDGE, **FAST))
    assert done.stored == 2 * len(ALL_DIMENSIONS) and done.pending == 0
    assert len(batches.created) == 1 and batches.retrieved[batches.created[0]] >= 2


def test_batch_judging_needs_a_backend_with_a_batch_api(tmp_path):
    store = store_with(tmp_path / "run", [dialogue(0)])
    with pytest.raises(FatalError, match="backend='anthropic'"):
        run_judging_batch(store, LLMClient("offline", progress=False), context_for, JudgingConfig(**JUDGE))


def test_stored_batch_results_are_used_again_without_any_call(server, tmp_path):
    FakeBatches(polls_in_progress=0).install(server)
    store = store_with(tmp_path / "run", [dialogue(0), dialogue(1, "MUMBLE")])
    with client() as llm:
        run_judging_batch(store, llm, context_for, JudgingConfig(**JUDGE, **FAST))
    first = sorted(store.records(Judgment), key=lambda r: r["id"])
    store.path(Judgment).unlink()  # as if the process died after storing the results, before the judgments
    calls_before = server.total("requests")
    with client() as llm:
        report = run_judging_batch(RunStore(store.root), llm, context_for, JudgingConfig(**JUDGE, **FAST))
        assert llm.totals()["calls"] == 0, "answers read back from the store are not booked again"
    assert server.total("requests") == calls_before
    assert report.stored == len(first)
    assert sorted(RunStore(store.root).records(Judgment), key=lambda r: r["id"]) == first


def test_a_parser_bug_stops_batch_judging_and_stores_no_judgment(server, tmp_path, monkeypatch):
    FakeBatches(polls_in_progress=0).install(server)
    store = store_with(tmp_path / "run", [dialogue(0)])

    def broken(self: Dimension, text: str) -> Any:
        raise KeyError("a bug in the parser")

    monkeypatch.setattr(Dimension, "parse", broken)
    with client() as llm, pytest.raises(KeyError, match="a bug in the parser"):
        run_judging_batch(store, llm, context_for,
                          JudgingConfig(**JUDGE, dimensions=["coherence_user"], **FAST))
    assert store.read(Judgment) == []
    assert store.read(BatchEntry), "the answers are kept: a rerun after the fix does not pay for them again"
