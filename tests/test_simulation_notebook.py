"""Notebook 03 runs under papermill on a small benchmark and writes its tables."""

from __future__ import annotations

from pathlib import Path

import papermill
import pytest
from test_simulation_support import tiny_benchmark

from personalens_utils.data import save_benchmark
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.official_io import import_official
from personalens_utils.records import Dialogue
from personalens_utils.store import RunStore
from personalens_utils.tables import read_table

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "03_simulation.ipynb"


@pytest.mark.slow
def test_notebook_03_simulates_and_writes_table13(tmp_path):
    save_benchmark(tiny_benchmark(n_users=4), tmp_path / "bench")
    papermill.execute_notebook(
        str(NOTEBOOK), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False,
        parameters={"benchmark_dir": str(tmp_path / "bench"), "run_dir": str(tmp_path / "run"),
                    "output_dir": str(tmp_path / "out"), "settings": ["base", "base+I"],
                    "official_export_dir": str(tmp_path / "official")},
    )
    records = RunStore(tmp_path / "run").read(Dialogue)
    assert len(records) == 4 * 4 * 2 and {r.status for r in records} == {"terminated"}
    tables = tmp_path / "out" / "tables"
    for name in ("table13_dialogue_stats", "table13_dialogue_stats_base_I", "tableS1_dialogue_outcomes"):
        caption = (tables / f"{name}.csv").read_text().splitlines()[0]
        assert OFFLINE_LABEL in caption
    stats = read_table(tables / "table13_dialogue_stats.csv")
    assert stats["# Dialogues"].tolist() == [12, 4]
    assert sorted(import_official(tmp_path / "official"), key=lambda r: r.id) == sorted(
        records, key=lambda r: r.id)
