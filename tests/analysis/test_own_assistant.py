"""Notebook 05's own-assistant comparison (`analysis.own_assistant`) keeps to the session's prompt set: in a
store that holds both prompt sets' dialogues and judgments of the same two assistants, the official
comparison reads only official records (and the kit one only kit records)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.analysis.own_assistant import (
    DIMENSIONS,
    AssistantComparison,
    ComparisonResult,
    compare_assistants,
)
from personalens_utils.data import load_benchmark, save_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm import LLMClient
from personalens_utils.prompt_sets import prompt_set
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import SessionConfig

RETRIEVAL = "python:personalens_utils.assistants.retrieval:RetrievalAssistant?k=2&model=offline"


def _compare(bench: Path, run: Path, prompt_set: str, code: Path) -> ComparisonResult:
    config = SessionConfig(benchmark_dir=bench, run_dir=run, output_dir=run.parent / "out",
                           prompt_set=prompt_set, official_code=code if prompt_set == "official" else None,
                           models={"user_model": "Claude 3 Sonnet", "judge_model": "Claude 3.5 Sonnet"},
                           assistants={"assistant_model": None, "compare_assistant": RETRIEVAL})
    with Session.open(config) as session:
        baseline, own = session.assistant("assistant_model"), session.assistant("compare_assistant")
        user, judge = session.role("user_model"), session.role("judge_model")
        comparison = AssistantComparison(user, judge, baseline, own, setting="base+I", task_types=["SD"],
                                         prompts=session.prompts)
        return compare_assistants(session.benchmark, session.run_store, comparison, seed=0)


@pytest.mark.parametrize("first", ["kit", "official"])
def test_the_comparison_reads_only_the_records_of_its_prompt_set(official_code, tmp_path, first):
    save_benchmark(tiny_benchmark(n_users=1, seed=3), tmp_path / "bench")
    run = tmp_path / "run"
    second = "official" if first == "kit" else "kit"
    _compare(tmp_path / "bench", run, first, official_code)
    _compare(tmp_path / "bench", run, second, official_code)
    # the other prompt set's judge scores the same dialogues too: a reader must pick its own judgments
    bench = load_benchmark(tmp_path / "bench")
    with LLMClient("offline", progress=False) as client:
        other = prompt_set(first, str(official_code) if first == "official" else None)
        crossed = run_judging(RunStore(run), client, benchmark_contexts(bench), JudgingConfig(
            judge_model="Claude 3.5 Sonnet", dimensions=list(DIMENSIONS), prompts=other,
            select=lambda d: d.prompt_set == second))
    assert crossed.stored > 0
    result = _compare(tmp_path / "bench", run, second, official_code)
    store = RunStore(run)
    assert {d.prompt_set for d in store.read(Dialogue)} == {"kit", "official"}  # both sets are stored
    assert {j.prompt_set for j in store.read(Judgment)} == {"kit", "official"}
    tidy = result.tidy
    assert not tidy.empty and set(tidy["dialogue_prompt_set"]) == {second}
    assert set(tidy["judge_prompt_set"]) == {second}
    own_set_ids = {d.id for d in store.read(Dialogue) if d.prompt_set == second}
    assert set(tidy["dialogue_id"]) <= own_set_ids
    assert set(tidy["assistant_backend"]) == {"offline", "python"}
    frame = result.table.frame
    labels = ["ref-follows-setting", "RetrievalAssistant (k=2, model=offline)"]  # row_label of the spec
    assert list(frame["Assistant model"]) == labels
    assert frame.notna().all().all()
    per_assistant = len(tidy["dialogue_id"].unique()) // 2
    assert [(r.planned, r.already_done) for r in result.simulated] == [(0, per_assistant)] * 2  # reused
