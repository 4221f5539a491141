"""Notebook 02 end to end on the official data: writes its tables (each fits an ACL page) and Figure 3,
agrees with the paper."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill
import pytest
from support.latex_page import PDFLATEX, compile_problems

from personalens_utils.outputs.tables import read_table

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "02_validation.ipynb"


@pytest.mark.official
@pytest.mark.slow
def test_notebook_02_on_official_data(official_data: Path, tmp_path: Path):
    out = tmp_path / "out"
    papermill.execute_notebook(
        str(NOTEBOOK),
        str(tmp_path / "02.ipynb"),
        parameters={
            "benchmark_dir": str(official_data),
            "output_dir": str(out),
            "users": [0, 1, 2],
            "run_dir": str(tmp_path / "store"),
        },
        kernel_name="python3",
        progress_bar=False,
        cwd=str(NOTEBOOK.parent),
    )
    for stem in (
        "table1_tasks_dialogues",
        "table1_totals",
        "table6_demographics_part1",
        "table7_demographics_part2",
        "table8_preferences",
        "table9_preferences",
        "tableA4_profile_consistency",
        "tableS1_paper_comparison",
    ):
        for ext in ("csv", "tex", "md"):
            assert (out / "tables" / f"{stem}.{ext}").is_file(), f"{stem}.{ext} not written"
        if PDFLATEX is not None:  # the official data's tables at their natural size on an ACL page
            assert compile_problems(out / "tables" / f"{stem}.tex") == [], stem
    for ext in ("pdf", "png"):
        assert (out / "figures" / f"figure3_demographics.{ext}").stat().st_size > 10_000
    caption = (out / "figures" / "figure3_demographics.txt").read_text(encoding="utf-8")
    assert "1500 users" in caption  # Figure 3 describes the whole benchmark
    executed = nbformat.read(tmp_path / "02.ipynb", as_version=4)
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert sum("image/png" in output.get("data", {}) for output in outputs) == 1  # Figure 3, shown once
    summary = read_table(out / "tables" / "tableS1_paper_comparison.csv").set_index("Table")
    for table in ("Table 6", "Table 7", "Table 8", "Table 9", "Table 1 totals"):
        assert summary.loc[table, "Cells"] == summary.loc[table, "Matching"] > 0
    checked = read_table(out / "tables" / "tableA4_profile_consistency.csv").set_index("Measure")
    assert checked.loc["Profiles checked", "Count"] == 3
    assert len((tmp_path / "store" / "consistency.jsonl").read_text().splitlines()) == 3
