"""Notebook 03 runs under papermill on a small benchmark and writes its tables."""

from __future__ import annotations

import json
from pathlib import Path

import papermill
import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import save_benchmark
from personalens_utils.export.official import import_official
from personalens_utils.llm import registry
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.outputs.tables import read_caption, read_table
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "03_simulation.ipynb"


@pytest.mark.slow
def test_notebook_03_simulates_and_writes_table13(tmp_path):
    save_benchmark(tiny_benchmark(n_users=4), tmp_path / "bench")
    papermill.execute_notebook(
        str(NOTEBOOK), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False,
        parameters={"benchmark_dir": str(tmp_path / "bench"), "run_dir": str(tmp_path / "run"),
                    "output_dir": str(tmp_path / "out"), "settings": ["base", "base+I"],
                    "official_export_dir": str(tmp_path / "official")},
    )
    cells = json.loads((tmp_path / "out.ipynb").read_text())["cells"]
    printed = ["".join(o.get("text", "")) for c in cells if c["cell_type"] == "code" for o in c["outputs"]]
    roles = printed.index(
        "user agent: offline:claude-3-sonnet-20240229 (Claude 3 Sonnet)\n"
        "assistant: offline:ref-follows-setting\n"
    )
    run_cell = next(i for i, c in enumerate(cells) if "run_simulation(" in "".join(c["source"]))
    assert roles < sum(1 for c in cells[:run_cell] if c["cell_type"] == "code" for _ in c["outputs"])
    assert registry.role_lines({"user agent": "Claude 3 Sonnet"}, "anthropic")[0].endswith(
        "calling its successor Claude Sonnet 4.5 instead")
    records = RunStore(tmp_path / "run").read(Dialogue)
    assert len(records) == 4 * 4 * 2 and {r.status for r in records} == {"terminated"}
    tables = tmp_path / "out" / "tables"
    for name in ("table13_dialogue_stats", "table13_dialogue_stats_base_I", "tableS1_dialogue_outcomes"):
        assert OFFLINE_LABEL in read_caption(tables / f"{name}.csv")
    stats = read_table(tables / "table13_dialogue_stats.csv")
    assert stats["# Dialogues"].tolist() == [12, 4]
    assert sorted(import_official(tmp_path / "official"), key=lambda r: r.id) == sorted(
        records, key=lambda r: r.id)
