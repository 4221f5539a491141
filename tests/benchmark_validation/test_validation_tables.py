"""Notebook 02's tables as TableResults: frames from `metrics`, captions and sources worded once."""

from __future__ import annotations

import pytest
from support.latex_page import PDFLATEX, compile_problems
from support.synthetic_store import build_store

from personalens_utils.benchmark_validation import metrics
from personalens_utils.benchmark_validation import tables as validation_tables
from personalens_utils.data import load_benchmark
from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.llm import LLMClient
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.llm.role import Role
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.latex import split_caption
from personalens_utils.outputs.tables import read_table
from personalens_utils.runstore.records import ConsistencyCheck


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory):
    root = tmp_path_factory.mktemp("validation")
    config = GenerationConfig(n_users=4, seed=1, sd_tasks_per_domain=1, md_tasks=2,
                              domains=("Alarm", "Movies", "Music", "Messaging"))
    with LLMClient("offline", progress=False, use_cache=False) as client:
        generate_benchmark(config, client=client, output_dir=root / "bench", run_dir=root / "gen")
    return load_benchmark(root / "bench")


def test_benchmark_tables_keep_the_metrics_frames_and_name_the_benchmark(benchmark):
    per_domain, totals = validation_tables.table1(benchmark)
    expected_domain, expected_totals = metrics.benchmark_table1(benchmark)
    assert per_domain.frame.equals(expected_domain) and totals.frame.equals(expected_totals)
    assert per_domain.source.n == len(benchmark.scenarios) and per_domain.source.origin == "benchmark bench/"
    assert "a multi-domain task counts toward each of its domains" in per_domain.caption
    assert OFFLINE_LABEL in per_domain.caption  # the generated benchmark's label names the offline backend
    demographics, tables = validation_tables.tables6_7(benchmark)
    assert sorted(tables) == [6, 7] and demographics["Table"].isin([6, 7]).all()
    assert sum(len(t.frame) for t in tables.values()) == len(demographics)
    assert all(t.source.n == 4 and t.source.unit == "users" for t in tables.values())
    halves = validation_tables.tables8_9(benchmark)
    assert sum(len(t.frame) for t in halves.values()) == len(metrics.benchmark_preferences(benchmark))
    totals_compared = metrics.compare_table1_totals(totals.frame)
    comparison = validation_tables.paper_comparison(benchmark, {"Table 1 totals": totals_compared})
    assert comparison.source.n == int(comparison.frame["Cells"].sum()) > 0


def test_table10_names_its_store_and_the_offline_backend(tmp_path):
    build_store(tmp_path / "store", users=3, second_judge=False)
    result = validation_tables.table10(tmp_path / "store", self_bleu_sample=50)
    assert list(result.frame["task_type"]) == ["SD", "MD"]
    assert OFFLINE_LABEL in result.caption and result.source.backends == ("offline",)
    head, note = split_caption(result.caption)  # the label is a note of its own, below the table
    assert OFFLINE_LABEL not in head and note == f"Made with the {OFFLINE_LABEL}."
    assert result.source.origin == "run store store/" and result.source.n == int(result.frame["# Dial"].sum())


def test_consistency_table_counts_profiles_and_names_the_checker(benchmark):
    checked = {"model": "m", "backend": "offline", "prompt_version": "v1"}
    records = [
        ConsistencyCheck(user_id=1, status="ok", within_domain=1, cross_domain=0, **checked),
        ConsistencyCheck(user_id=2, status="ok", within_domain=0, cross_domain=0, **checked),
        ConsistencyCheck(user_id=3, status="missing", **checked),
    ]
    result = validation_tables.consistency_table(records, benchmark, checker=Role.of("m", "offline"))
    rows = result.frame.set_index("Measure")
    assert rows.loc["Profiles checked", "Count"] == 3 and rows.loc["Flagged (any conflict)", "Rate"] == 0.5
    assert OFFLINE_LABEL in result.caption and result.source.models == ("m",) and result.source.n == 3
    assert result.source.backends == ("offline",)
    real = validation_tables.consistency_table(records, benchmark, checker=Role.of("checker-x", "anthropic"))
    assert "(checker-x on anthropic)" in real.caption and real.source.backends == ("anthropic",)


def test_the_paper_comparison_of_a_few_users_prints_on_the_page(benchmark, tmp_path):
    """On a few users nearly every printed cell differs: the LaTeX counts them per column (naming each
    made a cell thousands of points wide, and the export refused it); the CSV still names every one."""
    per_domain, totals = validation_tables.table1(benchmark)
    _, tables = validation_tables.tables6_7(benchmark)
    comparisons = {"Table 1": metrics.compare_table(1, per_domain.frame),
                   "Table 1 totals": metrics.compare_table1_totals(totals.frame),
                   **{f"Table {n}": metrics.compare_table(n, t.frame) for n, t in tables.items()}}
    summary = validation_tables.paper_comparison(benchmark, comparisons)
    paths = summary.save(tmp_path, OutputId("table", "S1", "paper_comparison"))
    written = read_table(paths["csv"]).set_index("Table")
    assert written.loc["Table 6", "Differing cells"].count(";") + 1 == 80 - written.loc["Table 6", "Matching"]
    latex = paths["tex"].read_text(encoding="utf-8")
    differing = comparisons["Table 6"].loc[~comparisons["Table 6"]["match"], "Column"].value_counts()
    assert f"Count: {differing['Count']}; Percent: {differing['Percent']}" in latex
    assert "Differing cells by column: how many cells of each column differ" in latex
    if PDFLATEX is not None:
        assert compile_problems(paths["tex"]) == []
