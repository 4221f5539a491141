"""Notebook 09 (validity) under papermill on a small offline store: its human-anchored table has the
columns docs/validity.md names, with the anchored estimate inside its interval; the blame and task-audit
tables are written; captions say offline and synthetic; every table prints on an ACL page unscaled."""

from __future__ import annotations

import json
import re
from pathlib import Path

import papermill
import pytest
import yaml
from support.latex_page import PDFLATEX, compile_problems

from personalens_utils import run
from personalens_utils.base import paths
from personalens_utils.base.paths import project_root
from personalens_utils.data import load_benchmark
from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.labels import sheets
from personalens_utils.labels.synthetic import synthetic_sheets
from personalens_utils.llm import LLMClient
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.measures.scores import load_scores
from personalens_utils.outputs.tables import read_caption, read_table
from personalens_utils.runstore.records import Blame
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.validity import OFFLINE_BLIND, OFFLINE_FULL

pytestmark = pytest.mark.slow
NOTEBOOK = project_root() / "notebooks" / "09_validity.ipynb"
COLUMNS = ["assistant", "dimension", "judge_estimate", "human_estimate", "anchored_estimate", "ci_low",
           "ci_high", "n_labels", "n_judged"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A 4-user generated benchmark; the blind and the full reference assistant's base dialogues, judged."""
    root = tmp_path_factory.mktemp("nb09")
    config = GenerationConfig(n_users=4, seed=1, sd_tasks_per_domain=1, md_tasks=2,
                              domains=("Alarm", "Movies", "Music", "Messaging", "Restaurants"))
    with LLMClient("offline", progress=False, use_cache=False) as client:
        generate_benchmark(config, client=client, output_dir=root / "bench", run_dir=root / "gen")
        benchmark = load_benchmark(root / "bench")
        store = RunStore(root / "store")
        for arm in (OFFLINE_BLIND, OFFLINE_FULL):
            run_simulation(benchmark, store, client,
                           SimulationConfig(assistant_model=arm.assistant_model, user_model="user-sim"))
        run_judging(store, client, benchmark_contexts(benchmark), JudgingConfig(judge_model="judge-1"))
    return root


@pytest.fixture(scope="module")
def ran(prepared, tmp_path_factory) -> Path:
    """Notebook 09 run once (the store's models, a small sample): its output folder."""
    out = tmp_path_factory.mktemp("out09")
    sheets.export_sheet(prepared / "store", load_benchmark(prepared / "bench"), out / "annotation", n=12)
    with pytest.MonkeyPatch.context() as patch:  # 06's Table 5 sample is in the same output folder
        patch.setenv("PERSONALENS_CACHE", str(prepared / "cache"))
        papermill.execute_notebook(str(NOTEBOOK), str(out / "09_validity.ipynb"), kernel_name="python3",
                                   progress_bar=False, cwd=str(NOTEBOOK.parent), parameters={
                                       "benchmark_dir": str(prepared / "bench"),
                                       "run_dir": str(prepared / "store"), "output_dir": str(out),
                                       "user_model": "user-sim", "judge_model": "judge-1",
                                       "reviewer_model": "reviewer-1", "max_concurrency": 4,
                                       "annotation_size": 24, "n_resamples": 200})
    return out


def _caption(path: Path) -> str:
    return read_caption(path)


def test_notebook_09_exports_anchored_blame_and_task_audit_tables(prepared, ran):
    executed = ran / "09_validity.ipynb"
    tables = ran / "tables"
    anchored = tables / "tableV1_human_anchored.csv"
    frame = read_table(anchored)
    assert set(COLUMNS) <= set(frame.columns)
    assert set(frame["assistant"]) == {OFFLINE_BLIND.assistant_model, OFFLINE_FULL.assistant_model}
    shown = frame.dropna(subset=["anchored_estimate"])
    assert len(shown) >= 4 and (shown["n_labels"] > 0).all()
    assert (shown["n_judged"] >= shown["n_labels"]).all()
    assert (shown["ci_low"] <= shown["anchored_estimate"]).all()
    assert (shown["anchored_estimate"] <= shown["ci_high"]).all()
    for ext in ("tex", "md"):
        assert (tables / f"tableV1_human_anchored.{ext}").is_file()
    for stem in ("tableV1_human_anchored", "tableV1b_anchored_differences", "tableV1c_label_plan"):
        caption = _caption(tables / f"{stem}.csv")
        assert caption.startswith("SYNTHETIC ANNOTATORS") and OFFLINE_LABEL in caption, stem
    for stem in ("tableV2_blame_rates", "tableV3_table3_without_user_faults", "tableV4_task_audit",
                 "tableV5_table3_on_measuring_tasks"):
        assert OFFLINE_LABEL in _caption(tables / f"{stem}.csv"), stem
    reviews = RunStore(ran / "validity_store").read(Blame)
    assert reviews and {b.reviewer_model for b in reviews} == {"reviewer-1"}
    assert not (prepared / "store" / "blames.jsonl").exists()  # the run store stays as 03 and 04 left it
    text = json.dumps(json.loads(executed.read_text(encoding="utf-8"))["cells"])
    assert "No people's dialogues given" in text and "Notebook 09 finished" in text
    assert not list((ran / "people").glob("*.jsonl"))  # the widget is shown, not driven


def test_through_the_entry_point_relative_sheet_paths_are_found_and_the_store_goes_to_the_output_named(
        prepared, tmp_path, monkeypatch):
    """Issue 39: `annotation_manifest` given relative to where the command runs was not found (the kernel
    ran in notebooks/), and 09's store went to runs/validity/ although the executed copy was named."""
    store = RunStore(prepared / "store")
    sample = sheets.export_sheet(store, load_benchmark(prepared / "bench"), tmp_path / "people", n=12,
                                     where={"assistant_setting": "base"}, stratify_by="assistant_model")
    (filled,) = synthetic_sheets(sample, load_scores(store, judge_model="judge-1"), annotators=1)
    header, rows, delimiter = sheets.read_table(filled)
    (tmp_path / "ratings").mkdir()
    sheets.write_table(tmp_path / "ratings" / "alice.csv", header,
                           [dict(row, annotator="alice", notes="") for row in rows], delimiter)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PERSONALENS_CACHE", str(prepared / "cache"))
    monkeypatch.delenv(paths.OUTPUT_ENV, raising=False)
    given = {"benchmark_dir": str(prepared / "bench"), "run_dir": str(prepared / "store"),
             "user_model": "user-sim", "judge_model": "judge-1", "reviewer_model": "reviewer-1",
             "max_concurrency": 4, "n_resamples": 200, "annotation_sheets": "ratings/*.csv",
             "annotation_manifest": "people/annotation_sample.json"}
    assert run.main(["09", "named/09.ipynb", "-y", yaml.safe_dump(given)]) == 0
    named = tmp_path / "named"
    assert not _caption(named / "tables" / "tableV1_human_anchored.csv").startswith("SYNTHETIC")
    assert read_table(named / "tables" / "tableV1_human_anchored.csv")["n_labels"].max() > 0
    assert RunStore(named / "validity_store").read(Blame) and not (named / "anchored_sample").exists()


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not found")
def test_every_table_of_notebook_09_prints_unscaled_on_an_acl_page(ran):
    failed = {}
    tables = sorted((ran / "tables").glob("tableV*.tex"))
    assert len(tables) == 7  # V1, V1b, V1c, V2-V5 (V6 needs people's dialogues)
    for tex in tables:
        text = tex.read_text(encoding="utf-8")
        assert not re.search(r"adjustbox|resizebox|scalebox", text), tex.name
        if problems := compile_problems(tex):
            failed[tex.name] = problems
    assert failed == {}
