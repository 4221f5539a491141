"""Repeats are part of identity (issue 22, part 1): k simulations x m judgments of a scenario are k*m
separate records and calls, never answered from one another's cache; a run killed part-way resumes per
sample; the offline backend varies with the sample index, seeded, and answers sample 0 as it always did."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.fake_server import FakeLLMServer, last_user_text
from support.records import stored_lines
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import judging
from personalens_utils.data import save_benchmark
from personalens_utils.judging import JudgingConfig
from personalens_utils.llm import CallKind, LLMClient, Message, Request
from personalens_utils.measures import scores
from personalens_utils.prompt_templates.dialogue import USER_SYSTEM
from personalens_utils.runstore.identity import IdentityError
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

MODEL = "claude-3-5-haiku"
CALLS_PER_DIALOGUE = 4
"""The scripted user opens, the assistant answers, the user thanks and ends, the assistant answers."""


def scripted_reply(api: str, body: dict[str, Any]) -> str:
    """The same text for every sample of a scenario (only the kit's identity keeps the samples apart);
    the user's opening names its prompt, so no two scenarios send the assistant the same request."""
    prompt = last_user_text(api, body)
    if "Personalization Score" in prompt:
        return "<response>\nPersonalization Score: 3\nKey Observations: fine.\n</response>"
    if body.get("system") != USER_SYSTEM:
        return "Here is what I found for you."
    history = prompt.split("# The conversation so far")[-1].split("# Your next message")[0]
    seen = history.count("ASSISTANT:") if "# The conversation so far" in prompt else 0
    tag = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    return f"Could you help me with this ({tag})?" if seen < 1 else "That's great, thanks! TERMINATE"


def anthropic_env(monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")


def test_k_repeats_times_m_judge_samples_are_k_m_separate_calls(tmp_path, monkeypatch):
    bench = tiny_benchmark(n_users=2, seed=3)
    k, m = 3, 2
    scenarios = len(bench.scenarios)
    with FakeLLMServer(reply=scripted_reply) as server:
        anthropic_env(monkeypatch, server)
        with LLMClient("anthropic", max_concurrency=8, use_cache=True, cache_dir=tmp_path / "cache",
                       progress=False) as client:
            store = RunStore(tmp_path / "run")
            sim = SimulationConfig(user_model=MODEL, assistant_model=MODEL, repeats=k)
            run_simulation(bench, store, client, sim)
            simulated = server.total("requests")
            config = JudgingConfig(judge_model=MODEL, dimensions=["personalization"], judge_samples=m)
            contexts = judging.benchmark_contexts(bench)
            judging.run_judging(store, client, contexts, config)
            judged = server.total("requests") - simulated
            again = (run_simulation(bench, store, client, sim), judging.run_judging(store, client, contexts,
                                                                                   config))
            usage = client.usage_frame()
        total = server.total("requests")

    assert simulated == scenarios * k * CALLS_PER_DIALOGUE
    assert judged == scenarios * k * m
    assert int(usage["cache_hits"].sum()) == 0  # identical prompts, yet no sample was served another's answer
    assert total == simulated + judged and all(r.planned == 0 for r in again)
    dialogues = store.read(Dialogue)
    assert sorted(d.sample for d in dialogues) == sorted(list(range(k)) * scenarios)
    pairs = {(d.scenario_id, d.sample) for d in dialogues}
    assert len(pairs) == len({d.id for d in dialogues}) == scenarios * k
    judgments = store.read(Judgment)
    assert len({j.id for j in judgments}) == scenarios * k * m
    assert {(j.dialogue_id, j.sample) for j in judgments} == {(d.id, s) for d in dialogues for s in range(m)}
    tidy = scores.load_scores(store)
    assert sorted(set(zip(tidy["sample"], tidy["judge_sample"], strict=True))) == [
        (s, j) for s in range(k) for j in range(m)]
    means = scores.aggregate(tidy, ["assistant_model"])
    assert list(means["n"]) == [scenarios]  # scenarios, not samples: their samples are averaged first
    assert "mean over its samples" in means.attrs["samples"]


def test_a_sample_0_request_keeps_its_cache_key_and_other_samples_get_their_own():
    request = Request(kind=CallKind.USER_TURN, messages=(Message("user", "hi"),), model="m")
    payload = {"backend": "anthropic", "model": "m", "temperature": None, "max_tokens": 1024, "stop": [],
               "system": "", "messages": [{"role": "user", "content": "hi"}]}
    before = hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()
    assert request.cache_key("anthropic", "m") == before  # the key caches written before repeats hold
    keys = {replace(request, sample=k).cache_key("anthropic", "m") for k in range(3)}
    assert len(keys) == 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_repeats_and_judge_samples_below_one_are_refused_by_name(bad):
    with pytest.raises(IdentityError, match="repeats must be a whole number of at least 1"):
        SimulationConfig(repeats=bad)
    with pytest.raises(IdentityError, match="judge_samples must be a whole number of at least 1"):
        JudgingConfig(judge_samples=bad)


SCRIPT = r"""
import sys
from personalens_utils.data import load_benchmark
from personalens_utils.llm.client import LLMClient
from personalens_utils.simulation import SimulationConfig, run_simulation

bench_dir, run_dir = sys.argv[1:3]
client = LLMClient("anthropic", max_concurrency=2, use_cache=False, progress=False)
config = SimulationConfig(user_model="MODEL", assistant_model="MODEL", repeats=3)
report = run_simulation(load_benchmark(bench_dir), run_dir, client, config)
print(report.planned, report.already_done)
""".replace("MODEL", MODEL)


def launch(server: FakeLLMServer, bench_dir: Path, run_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key-not-secret"}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(bench_dir), str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_a_killed_run_with_repeats_resumes_per_sample_repeating_and_losing_nothing(tmp_path):
    bench = tiny_benchmark(n_users=3, seed=4)
    save_benchmark(bench, tmp_path / "bench")
    total = len(bench.scenarios) * 3
    table = tmp_path / "run" / "dialogues.jsonl"
    with FakeLLMServer(reply=scripted_reply, latency_s=0.05) as server:
        first = launch(server, tmp_path / "bench", tmp_path / "run")
        deadline = time.monotonic() + 120
        while len(stored_lines(table)) < 8:
            assert first.poll() is None, f"finished before it could be killed: {first.communicate()}"
            assert time.monotonic() < deadline, "no progress within 120 s"
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        kept = stored_lines(table)
        assert first.returncode == -signal.SIGKILL and 8 <= len(kept) < total
        before = settled(server)  # requests the killed run had already sent are not the rerun's
        second = launch(server, tmp_path / "bench", tmp_path / "run")
        out, err = second.communicate(timeout=300)
        assert second.returncode == 0, err
        rerun_calls = server.total("requests") - before

    assert out.split() == [str(total - len(kept)), str(len(kept))]
    assert rerun_calls == (total - len(kept)) * CALLS_PER_DIALOGUE  # nothing stored is asked again
    rows = stored_lines(table)
    assert len(rows) == len({r["id"] for r in rows}) == total  # nothing lost, nothing twice
    assert sorted((r["scenario_id"], r.get("sample", 0)) for r in rows) == sorted(
        (s, k) for s in bench.scenarios["scenario_id"] for k in range(3))


def settled(server: FakeLLMServer) -> int:
    """The server's request count once it has stopped changing for a quarter of a second."""
    count = server.total("requests")
    while True:
        time.sleep(0.25)
        now = server.total("requests")
        if now == count:
            return count
        count = now


def offline_run(bench: Any, root: Path, *, repeats: int, judge_samples: int) -> RunStore:
    store = RunStore(root)
    with LLMClient("offline", max_concurrency=4, progress=False) as client:
        run_simulation(bench, store, client, SimulationConfig(settings=["base", "base+all"], repeats=repeats))
        judging.run_judging(store, client, judging.benchmark_contexts(bench),
                            JudgingConfig(judge_samples=judge_samples))
    return store


def by_id(store: RunStore, kind: type) -> dict[str, bytes]:
    return {r["id"]: orjson.dumps(r) for r in store.records(kind)}


def test_offline_samples_vary_seeded_and_sample_0_answers_as_before(tmp_path):
    bench = tiny_benchmark(n_users=3, seed=6)
    first = offline_run(bench, tmp_path / "a", repeats=2, judge_samples=2)
    second = offline_run(bench, tmp_path / "b", repeats=2, judge_samples=2)
    plain = offline_run(bench, tmp_path / "plain", repeats=1, judge_samples=1)

    for kind in (Dialogue, Judgment):
        assert by_id(first, kind) == by_id(second, kind)  # the same seed gives the same bytes
    firsts = {d.id for d in first.read(Dialogue) if d.sample == 0}
    assert {i: line for i, line in by_id(first, Dialogue).items() if i in firsts} == by_id(plain, Dialogue)
    assert {j.id: orjson.dumps(j.to_json()) for j in first.read(Judgment)
            if j.sample == 0 and j.dialogue_id in firsts} == by_id(plain, Judgment)  # sample 0: as always
    dialogues = first.read(Dialogue)
    turns = {(d.scenario_id, d.assistant_setting, d.sample): d.turns for d in dialogues}
    assert any(turns[s, a, 0] != turns[s, a, 1] for s, a, k in turns if k == 0)
    judged = {(j.dialogue_id, j.dimension, j.sample): j.score for j in first.read(Judgment)}
    assert any(judged[d, n, 0] != judged[d, n, 1] for d, n, k in judged if k == 0)
    tables = [scores.aggregate(scores.load_scores(s), ["assistant_setting"]).to_csv().encode()
              for s in (first, second)]
    assert tables[0] == tables[1]
