"""A store written before issue 19 (tests/fixtures/store_v2) opens with today's code and every record in it
is reused: rerunning the same simulation and judging makes no model call and changes no line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from personalens_utils import judging, prompt_sets
from personalens_utils.assistants import resolve_assistant
from personalens_utils.data import load_benchmark
from personalens_utils.judging import JudgingConfig
from personalens_utils.llm.client import Clients
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store_v2"
RETRIEVAL = "python:personalens_utils.assistants.retrieval:RetrievalAssistant?k=2&model=offline"
MODEL, JUDGE = "Claude 3 Sonnet", "Claude 3.5 Sonnet"


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "v2")
    return tmp_path / "v2"


def lines(root: Path) -> dict[str, list[str]]:
    return {p.name: p.read_text().splitlines() for p in sorted((root / "store").glob("*.jsonl"))}


def test_the_store_written_before_issue_19_is_reused_without_a_call(old_store: Path, official_code: Path):
    before = lines(old_store)
    assert len(before["dialogues.jsonl"]) == 19 and len(before["judgments.jsonl"]) == 133
    bench = load_benchmark(old_store / "benchmark")
    store = RunStore(old_store / "store")
    clients = Clients("offline", max_concurrency=4, progress=False)
    client = clients.client(ModelSpec("offline", ""))
    reports = []
    for prompt_set in ("kit", "official"):
        prompts = prompt_sets.prompt_set(prompt_set, str(official_code))
        reports.append(run_simulation(bench, store, client,
                                      SimulationConfig(settings=["base", "base+all"], task_types=["SD", "MD"],
                                                       user_model=MODEL, assistant_model=MODEL, max_turns=3,
                                                       prompts=prompts)))
    reports.append(run_simulation(bench, store, client,
                                  SimulationConfig(assistant=resolve_assistant(RETRIEVAL, clients),
                                                   settings=["base+I"], task_types=["SD"], user_model=MODEL,
                                                   max_turns=2)))
    contexts = judging.benchmark_contexts(bench)
    for prompt_set in ("kit", "official"):
        prompts = prompt_sets.prompt_set(prompt_set, str(official_code))
        reports.append(judging.run_judging(store, client, contexts,
                                           JudgingConfig(judge_model=JUDGE, offline_dialogues=True,
                                                         select=lambda d, p=prompt_set: d.prompt_set == p,
                                                         prompts=prompts)))
    reports.append(judging.run_judging(store, client, contexts,
                                       JudgingConfig(judge_model=JUDGE, dimensions=["turn_personalization"],
                                                     offline_dialogues=True,
                                                     select=lambda d: d.prompt_set == "kit")))
    usage = clients.usage_frame()
    clients.close()
    assert usage.empty or int(usage["calls"].sum()) == 0, usage
    assert [(r.planned, r.finished, r.errors, r.calls) for r in reports] == [(0, 0, 0, 0)] * len(reports)
    assert all(r.already_done > 0 for r in reports)
    assert lines(old_store) == before
