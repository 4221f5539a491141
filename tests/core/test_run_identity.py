"""Run identity: dialogues and judgments are keyed by the backend and resolved model id of each role.

An offline run is never reused for a real model (the planner simulates and judges again), a store
holding both keeps them apart in the tables, and a store written before run identity is migrated
once, when opened, and is resumed on the backend it was made with.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import papermill
import pytest
from support.fake_server import FakeLLMServer
from support.records import dialogue_json, write_lines
from support.roles import judge_of, user_of
from support.scripted_models import JUDGE, scripted_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import analysis, judging
from personalens_utils.analysis.dialogue_stats import table13
from personalens_utils.assistants import resolve_assistant
from personalens_utils.data import Benchmark, save_benchmark
from personalens_utils.judging import JudgingConfig
from personalens_utils.llm import LLMClient, registry
from personalens_utils.llm.client import Clients
from personalens_utils.measures import scores
from personalens_utils.measures.display import ASSISTANT_DIMENSIONS
from personalens_utils.outputs.tables import read_table
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore, StoreMigrated, stable_id
from personalens_utils.simulation import SimulationConfig, plan_dialogues, run_simulation

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

MODEL = "claude-3-5-haiku"
NOTEBOOK_03 = Path(__file__).resolve().parents[2] / "notebooks" / "03_simulation.ipynb"


def offline_client() -> LLMClient:
    return LLMClient("offline", max_concurrency=4, progress=False)


def anthropic_client(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> LLMClient:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
    return LLMClient("anthropic", max_concurrency=8, use_cache=False, progress=False, retry_base_s=0.01,
                     retry_cap_s=0.05)


def only(backend: str):
    """`select` for judging: the dialogues whose assistant ran on `backend`."""
    return lambda dialogue: dialogue.assistant_backend == backend


@pytest.fixture
def bench() -> Benchmark:
    return tiny_benchmark(n_users=2, seed=3)


def simulate_and_judge(bench: Benchmark, store: RunStore, client: LLMClient) -> None:
    with client:
        run_simulation(bench, store, client, SimulationConfig(user_model=MODEL, assistant_model=MODEL))
        judging.run_judging(store, client, judging.benchmark_contexts(bench),
                            JudgingConfig(judge_model=JUDGE, select=only(client.backend_name)))


def test_records_carry_each_roles_backend_and_model_id_and_ids_depend_on_them(bench, tmp_path):
    store = RunStore(tmp_path)
    simulate_and_judge(bench, store, offline_client())
    dialogue = store.read(Dialogue)[0]
    offline_id = registry.resolve(MODEL, "offline")
    assert dialogue.user == dialogue.assistant == ("offline", offline_id)
    stored = store.records(Dialogue)[0]
    assert stored["user_backend"] == "offline" and stored["assistant_model_id"] == offline_id
    judgment = store.read(Judgment)[0]
    assert judgment.judge == ("offline", registry.resolve(JUDGE, "offline"))
    assert store.records(Judgment)[0]["judge_model_id"] == judgment.judge_model_id
    # the same dialogue on another backend is another record
    moved = replace(dialogue, id="", user_backend="anthropic", assistant_backend="anthropic")
    assert moved.id and moved.id != dialogue.id
    assert moved.id != replace(dialogue, id="", assistant_model_id="another-id").id != dialogue.id
    assert replace(judgment, id="", backend="anthropic").id != judgment.id
    assert replace(judgment, id="").id == judgment.id


def test_after_an_offline_run_a_real_backend_simulates_and_judges_everything_again(
    bench, tmp_path, monkeypatch
):
    store = RunStore(tmp_path)
    simulate_and_judge(bench, store, offline_client())
    n = len(bench.scenarios)
    assert len(store.records(Dialogue)) == n
    faults = dict(fault_rate=0.1, fault_statuses=(429, 529, 500), seed=5)
    with FakeLLMServer(reply=scripted_reply, **faults) as server:
        client = anthropic_client(server, monkeypatch)
        with client:
            report = run_simulation(bench, store, client,
                                    SimulationConfig(user_model=MODEL, assistant_model=MODEL))
            judged = judging.run_judging(store, client, judging.benchmark_contexts(bench),
                                         JudgingConfig(judge_model=JUDGE, select=only("anthropic")))
        served = server.total("requests") - server.total("injected")
    assert report.already_done == 0 and report.statuses == {"terminated": n}
    assert judged.details["judgments_done_before"] == 0 and judged.statuses == {"ok": n * 7}
    dialogues = store.read(Dialogue)
    assert len(dialogues) == 2 * n
    for backend in ("offline", "anthropic"):
        mine = [d for d in dialogues if d.assistant_backend == backend]
        assert len(mine) == n and {d.user_backend for d in mine} == {backend}
        assert {d.scenario_id for d in mine} == set(bench.scenarios["scenario_id"])
    real = [d for d in dialogues if d.assistant_backend == "anthropic"]
    assert {d.assistant_model_id for d in real} == {registry.resolve(MODEL, "anthropic")}
    turns = sum(2 * d.n_turns for d in real)  # a user and an assistant call per turn
    judge_calls = served - turns
    assert judge_calls >= n * 7 and {j.backend for j in store.read(Judgment)} == {"offline", "anthropic"}
    # a second real run finds everything done
    with FakeLLMServer(reply=scripted_reply) as server:
        with anthropic_client(server, monkeypatch) as client:
            again = run_simulation(bench, store, client,
                                   SimulationConfig(user_model=MODEL, assistant_model=MODEL))
        assert server.total("requests") == 0
    assert again.already_done == n and again.stored == 0

    tidy = scores.load_scores(store, judge_model=JUDGE)
    table = analysis.table3(tidy)
    missing = analysis.judge_missing(store, JUDGE, "v1")
    assert sorted(set(missing.frame["backend"])) == ["anthropic", "offline"]
    assert set(missing.source.models) == {registry.resolve(JUDGE, b) for b in ("offline", "anthropic")}
    rows = list(table.frame["Assistant model"])
    assert len(rows) == 2 and sum("offline" in r for r in rows) == sum("anthropic" in r for r in rows) == 1
    assert all(r.startswith(MODEL) for r in rows)
    long = table.data
    assert set(long.groupby("assistant_model")["n"].sum()) == {
        (tidy[tidy["assistant_backend"] == b]["dimension"].isin(ASSISTANT_DIMENSIONS)).sum()
        for b in ("offline", "anthropic")
    }
    assert table.source.backends == ("anthropic", "offline")
    assert set(table.source.models) == {registry.resolve(m, b) for m in (MODEL, JUDGE)
                                        for b in ("offline", "anthropic")}
    assert "anthropic" in table.describe() and "offline" in table.describe()
    with pytest.raises(scores.ScoresError, match=r"user agent offline:.* and user agent anthropic:|"
                                                 r"user agent anthropic:.* and user agent offline:"):
        scores.aggregate(tidy, ["assistant_model", "task_type"])
    with pytest.raises(scores.ScoresError, match=r"Table 13 .*assistant_backend=.*(offline|anthropic):"):
        table13(store)
    real = table13(store, assistant_backend="anthropic")
    assert real.source.backends == ("anthropic",) and real.source.n == n
    assert real.source.models == (registry.resolve(MODEL, "anthropic"),)


def test_one_judge_on_two_backends_is_told_apart_by_judge_backend(bench, tmp_path):
    store = RunStore(tmp_path)
    simulate_and_judge(bench, store, offline_client())
    legacy_copy = [{**j, "id": j["id"][::-1], "backend": "elsewhere", "judge_model_id": "x"}
                   for j in store.records(Judgment)]
    write_lines(store, Judgment, legacy_copy)
    with pytest.raises(scores.ScoresError, match=r"Claude 3\.5 Sonnet on elsewhere:x.*judge_backend="):
        scores.load_scores(store, judge_model=JUDGE)
    tidy = scores.load_scores(store, judge_model=JUDGE, judge_backend="offline")
    assert set(tidy["judge_backend"]) == {"offline"}


IDENTITY_KEYS = ("user_backend", "user_model_id", "assistant_backend", "assistant_model_id")


def old_dialogue_id(row: dict[str, Any]) -> str:
    """The id recipe before run identity, written out: no backends, no model ids."""
    return stable_id(row["scenario_id"], row["user_model"], row["assistant_model"], row["assistant_setting"],
                     row["prompt_version"])


def _as_before_run_identity(store: RunStore, old: Path) -> dict[str, str]:
    """Write a copy of `store` in `old` the way the kit wrote it before run identity (no identity fields,
    ids by the old recipe), without opening it; the new dialogue ids by their old ones."""
    old.mkdir()
    new_to_old = {rec["id"]: old_dialogue_id(rec) for rec in store.records(Dialogue)}
    dialogues = [{**{k: v for k, v in rec.items() if k not in IDENTITY_KEYS}, "id": new_to_old[rec["id"]]}
                 for rec in store.records(Dialogue)]
    judgments = []
    for rec in store.records(Judgment):
        row = {k: v for k, v in rec.items() if k != "judge_model_id"}
        row["dialogue_id"] = new_to_old[rec["dialogue_id"]]
        row["id"] = stable_id(row["dialogue_id"], rec["dimension"], rec["judge_model"], rec["prompt_version"])
        judgments.append(row)
    for kind, rows in ((Dialogue, dialogues), (Judgment, judgments)):
        (old / f"{kind.table}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return {v: k for k, v in new_to_old.items()}


def test_a_store_from_before_run_identity_is_migrated_once_and_resumes_on_its_backend(bench, tmp_path):
    fresh = RunStore(tmp_path / "new")
    simulate_and_judge(bench, fresh, offline_client())
    old_to_new = _as_before_run_identity(fresh, tmp_path / "old")
    with pytest.warns(StoreMigrated, match=r"(\d+) dialogue\(s\) and (\d+) judgment\(s\) written before run"):
        old = RunStore(tmp_path / "old")
    # the same work, so the same identity, ids and lines as the store written today
    assert old.records(Dialogue) == fresh.records(Dialogue)
    assert old.records(Judgment) == fresh.records(Judgment)
    moved = orjson.loads((tmp_path / "old" / "id_migration.json").read_bytes())
    assert moved[Dialogue.table] == old_to_new
    assert (tmp_path / "old" / "dialogues.jsonl.before-run-identity").exists()  # nothing lost
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RunStore(tmp_path / "old")  # once: opening it again changes nothing

    n = len(bench.scenarios)
    config = SimulationConfig(user_model=MODEL, assistant_model=MODEL)
    same = plan_dialogues(bench, old, config, user=user_of(config, "offline"))
    assert same.items == [] and same.already_done == n
    other = plan_dialogues(bench, old, config, user=user_of(config, "anthropic"))
    assert len(other.items) == n
    with offline_client() as client:
        rerun = run_simulation(bench, old, client, SimulationConfig(user_model=MODEL, assistant_model=MODEL))
        rejudged = judging.run_judging(old, client, judging.benchmark_contexts(bench),
                                       JudgingConfig(judge_model=JUDGE))
    assert rerun.stored == 0 and rerun.already_done == n
    assert rejudged.stored == 0 and rejudged.details["judgments_done_before"] == n * 7

    before, after = (scores.load_scores(s, judge_model=JUDGE) for s in (fresh, old))
    for column in (*scores.IDENTITY, "score", "scenario_id", "dimension"):
        assert sorted(before[column].astype(str)) == sorted(after[column].astype(str)), column
    assert list(analysis.table3(after).frame["Assistant model"]) == [MODEL]
    sources = [analysis.table3(t).source for t in (before, after)]
    assert sources[0].models == sources[1].models
    assert sources[0].backends == sources[1].backends == ("offline",)


@pytest.mark.slow
def test_notebook_03_on_a_real_backend_after_an_offline_run_simulates_again(tmp_path, monkeypatch):
    save_benchmark(tiny_benchmark(n_users=2, seed=3), tmp_path / "bench")
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))  # every answer from the server
    n = 2 * 4

    def notebook(backend: str) -> None:
        papermill.execute_notebook(
            str(NOTEBOOK_03), str(tmp_path / f"{backend}.ipynb"), kernel_name="python3", progress_bar=False,
            parameters={"benchmark_dir": str(tmp_path / "bench"), "run_dir": str(tmp_path / "run"),
                        "output_dir": str(tmp_path / backend), "backend": backend, "user_model": MODEL,
                        "assistant_model": MODEL},
        )

    notebook("offline")
    with FakeLLMServer(reply=scripted_reply) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        notebook("anthropic")
        calls = server.total("requests")
    dialogues = RunStore(tmp_path / "run").read(Dialogue)
    by_backend = {b: [d for d in dialogues if d.assistant_backend == b] for b in ("offline", "anthropic")}
    assert [len(v) for v in by_backend.values()] == [n, n]
    assert {d.status for d in by_backend["anthropic"]} == {"terminated"}
    assert calls >= n  # the dialogues were made by the server (identical prompts may come from the cache)
    outcome = read_table(tmp_path / "anthropic" / "tables" / "tableS1_dialogue_outcomes.csv")
    assert outcome["n_dialogues"].sum() == n  # the real run's report shows its own dialogues only
    stats = read_table(tmp_path / "anthropic" / "tables" / "table13_dialogue_stats.csv")
    assert stats["# Dialogues"].sum() == n


def test_an_old_record_of_a_model_now_retired_migrates_as_what_it_was_and_is_not_reused(bench, tmp_path):
    paper_model = "Claude 3 Sonnet"  # retired on the Anthropic API: today's runs call its successor
    successor = registry.resolve(paper_model, "anthropic")
    original = registry.lookup(paper_model).ids["anthropic"]
    assert successor != original
    scenario = bench.scenarios.iloc[0]
    row = dialogue_json("", scenario_id=scenario["scenario_id"], user_id=int(scenario["user_id"]),
                        task_id=scenario["task_id"], task_type=scenario["task_type"], user_model=paper_model,
                        assistant_model=paper_model, backend="anthropic")
    row = {k: v for k, v in row.items() if k not in IDENTITY_KEYS}
    row["id"] = old_id = old_dialogue_id(row)
    (tmp_path / "dialogues.jsonl").write_bytes(orjson.dumps(row) + b"\n")
    with pytest.warns(StoreMigrated):
        store = RunStore(tmp_path)
    (old,) = store.read(Dialogue)
    assert old.user == old.assistant == ("anthropic", original) and old.id != old_id
    config = SimulationConfig(user_model=paper_model, assistant_model=paper_model)
    planned = plan_dialogues(bench, store, config, user=user_of(config, "anthropic"))
    assert planned.already_done == 0 and len(planned.items) == len(bench.scenarios)
    assert old.id not in {i for item in planned.items for i in item.ids}
    tidy_dialogues = scores.load_dialogues(store)
    assert tidy_dialogues.loc[0, "assistant_model_id"] == original


def test_a_real_judge_leaves_offline_made_dialogues_alone_unless_asked(bench, tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    offline = offline_client()
    clients = Clients("offline", progress=False)
    python = resolve_assistant("python:personalens_utils.assistants.retrieval:RetrievalAssistant", clients)
    with FakeLLMServer(reply=scripted_reply) as server:
        real = anthropic_client(server, monkeypatch)
        try:
            # offline user and assistant
            run_simulation(bench, store, offline, SimulationConfig(task_types=["SD"]))
            run_simulation(bench, store, real,
                           SimulationConfig(user_model=MODEL, assistant=python, task_types=["SD"]))
            # above: a real user agent, but the assistant's model is offline
            run_simulation(bench, store, real,
                           SimulationConfig(user_model=MODEL, assistant_model=MODEL, task_types=["SD"]))
            dialogues = store.read(Dialogue)
            made_offline = [d for d in dialogues if d.made_offline]
            assert len(dialogues) == 3 * 6 and len(made_offline) == 2 * 6
            contexts = judging.benchmark_contexts(bench)
            options = dict(judge_model=JUDGE, dimensions=["personalization"])
            config = JudgingConfig(**options)
            estimate = judging.estimate_judging(store, contexts, config, judge=judge_of(config, "anthropic"))
            skipped = "12 finished dialogue(s) made on the offline backend"
            assert estimate.calls == 6 and skipped in str(estimate)
            report = judging.run_judging(store, real, contexts, JudgingConfig(**options))
            assert report.statuses == {"ok": 6}
            note = judging.skipped_offline_note(report.details)
            assert note.startswith(f"{skipped} were not judged by the anthropic judge")
            assert "judge_offline_dialogues=True" in note
            judged = {j.dialogue_id for j in store.read(Judgment)}
            assert judged == {d.id for d in dialogues if not d.made_offline}
            anyway = judging.run_judging(store, real, contexts,
                                         JudgingConfig(offline_dialogues=True, **options))
            assert anyway.statuses == {"ok": 12} and not judging.skipped_offline_note(anyway.details)
        finally:
            real.close()
            clients.close()
    # an offline judge judges every dialogue by default, and says nothing about skipping
    by_offline = judging.run_judging(store, offline, judging.benchmark_contexts(bench),
                                     JudgingConfig(**options))
    assert by_offline.statuses == {"ok": 18} and not judging.skipped_offline_note(by_offline.details)
    offline.close()
