"""Notebooks 05 and 06 under papermill on a small generated benchmark (offline backend)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pandas as pd
import papermill
import pytest

from personalens_utils.base.paths import project_root
from personalens_utils.data import load_benchmark
from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.labels.sheets import export_sheet
from personalens_utils.llm import LLMClient
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.outputs.tables import read_caption, read_table
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation

pytestmark = pytest.mark.slow
NOTEBOOKS = project_root() / "notebooks"
MODELS = ("model-x", "model-y")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A 4-user benchmark with base dialogues of two assistants, judged on every dimension."""
    root = tmp_path_factory.mktemp("nb56")
    config = GenerationConfig(
        n_users=4,
        seed=1,
        sd_tasks_per_domain=1,
        md_tasks=2,
        domains=("Alarm", "Movies", "Music", "Messaging", "Restaurants"),
    )
    with LLMClient("offline", progress=False, use_cache=False) as client:
        generate_benchmark(config, client=client, output_dir=root / "bench", run_dir=root / "gen")
        benchmark = load_benchmark(root / "bench")
        store = RunStore(root / "store")
        for model in MODELS:
            run_simulation(benchmark, store, client,
                           SimulationConfig(assistant_model=model, user_model="user-sim"))
        run_judging(store, client, benchmark_contexts(benchmark), JudgingConfig(judge_model="judge-1"))
    return root


def _run(name: str, out: Path, root: Path, monkeypatch, **params) -> None:
    monkeypatch.setenv("PERSONALENS_CACHE", str(root / "cache"))
    out.mkdir(parents=True, exist_ok=True)
    common = {
        "benchmark_dir": str(root / "bench"),
        "run_dir": str(root / "store"),
        "output_dir": str(out),
        "user_model": "user-sim",
        "judge_model": "judge-1",
        "max_concurrency": 4,
    }
    papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(out / f"{name}.ipynb"),
        parameters={**common, **params},
        kernel_name="python3",
        progress_bar=False,
        cwd=str(NOTEBOOKS),
    )


def _caption(path: Path) -> str:
    return read_caption(path)


def test_ablation_notebook_reuses_stored_dialogues_and_writes_table4(prepared, tmp_path, monkeypatch):
    store = RunStore(prepared / "store")
    base_before = {d["id"] for d in store.records(Dialogue) if d["assistant_setting"] == "base"}
    _run("05_ablation", tmp_path, prepared, monkeypatch, assistant_model="model-x", ablation_users=2)
    dialogues = store.records(Dialogue)
    base_after = {d["id"] for d in dialogues if d["assistant_setting"] == "base"}
    assert base_after == base_before  # the base dialogues of the first two users were reused
    settings = {d["assistant_setting"] for d in dialogues if d["assistant_model"] == "model-x"}
    assert settings == {"vanilla", "base", "base+D", "base+I", "base+S", "base+all"}
    table = read_table(tmp_path / "tables" / "table4_ablation.csv")
    assert list(table["Setting"]) == ["vanilla", "base", "base+D", "base+I", "base+S", "base+all"]
    assert OFFLINE_LABEL in _caption(tmp_path / "tables" / "table4_ablation.csv")
    data = read_table(tmp_path / "tables" / "table4_ablation_data.csv")
    assert set(data.dropna(subset=["p_permutation"])["assistant_setting"]) == {
        "vanilla",
        "base+D",
        "base+I",
        "base+S",
        "base+all",
    }


def test_analysis_notebook_without_annotations(prepared, tmp_path, monkeypatch):
    _run(
        "06_analysis",
        tmp_path,
        prepared,
        monkeypatch,
        focus_model="model-x",
        annotation_size=12,
        figure5_domains=["Movies", "Music"],
        scoring="official",
    )
    tables, figures = tmp_path / "tables", tmp_path / "figures"
    assert "Scores read under the official rule" in _caption(tables / "table3_assistant_models.csv")
    for stem in (
        "table3_assistant_models",
        "table5_agreement",
        "table12_user_agent",
        "table13_dialogue_stats",
    ):
        assert OFFLINE_LABEL in _caption(tables / f"{stem}.csv"), stem
    assert list(read_table(tables / "table3_assistant_models.csv")["Assistant model"]) == list(MODELS)
    assert _caption(tables / "table5_agreement.csv").startswith("NO HUMAN ANNOTATIONS WERE GIVEN")
    for stem in ("figure4_domains", "figure5_turn_personalization", "figure_radar_personalization_by_domain"):
        assert (figures / f"{stem}.png").stat().st_size > 10_000, stem
        caption = (figures / f"{stem}.txt").read_text(encoding="utf-8")
        assert re.search(r"Source: run store store/, \d+ judged", caption), stem
    executed = nbformat.read(tmp_path / "06_analysis.ipynb", as_version=4)
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) == 3  # Figures 4, 5 and the radar chart, each shown once
    sheet = pd.read_csv(tmp_path / "annotation" / "annotation_sheet.csv")
    assert len(sheet) == 12 and sheet["personalization"].isna().all()
    # the explorer and the side-by-side view: live widgets, with a static page for copies without a kernel
    widgets = [o["data"] for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    explorer, compare = [w for w in widgets if "pl-" in w.get("text/html", "")]
    assert 'class="pl-page"' in explorer["text/html"]
    assert 'class="pl-turn pl-turn-user"' in explorer["text/html"]
    assert 'data-dimension="personalization"' in explorer["text/html"]
    assert 'class="pl-compare"' in compare["text/html"]
    assert "application/vnd.jupyter.widget-state+json" in executed.metadata["widgets"]


def test_analysis_notebook_with_filled_sheets(prepared, tmp_path, monkeypatch):
    # export the sample where notebook 06 will look for it; the notebook finds it and keeps it
    paths = export_sheet(
        prepared / "store",
        load_benchmark(prepared / "bench"),
        tmp_path / "annotation",
        n=12,
        seed=0,
        where={"assistant_setting": "base"},
        stratify_by="assistant_model",  # as notebook 06 draws Table 5's sample (judge_agreement)
        apart=True,
    )
    sheet = pd.read_csv(paths["sheet"], dtype=str, keep_default_na=False)
    filled = tmp_path / "filled"
    filled.mkdir()
    for k, value in enumerate(("2", "3")):
        copy = sheet.assign(
            annotator=f"ann{k}",
            task_completion="True",
            personalization=value,
            naturalness_user="4",
            naturalness_assistant="5",
            coherence_user="4",
            coherence_assistant="5",
        )
        copy.to_csv(filled / f"ann{k}.csv", index=False)
    _run(
        "06_analysis",
        tmp_path,
        prepared,
        monkeypatch,
        focus_model="model-x",
        annotation_size=12,
        annotation_sheets=str(filled / "*.csv"),
    )
    caption = _caption(tmp_path / "tables" / "table5_agreement.csv")
    assert "2 human annotator(s) on 12 dialogues" in caption and "NO HUMAN" not in caption
