"""What `make reproduce` itself exports is paper-ready (issue 12): a small offline reproduction (the
generated pass only) runs through the real driver and notebooks, then every LaTeX table it wrote
compiles without an error or an overfull box, and every figure PDF passes the print checks."""

from __future__ import annotations

import csv as csvlib
import shutil
from pathlib import Path

import pandas as pd
import pytest
from support.pdf import font_sizes, font_subtypes, page_size
from test_figure_export import POINTS_PER_INCH, pdf_text
from test_latex_tables import PDFLATEX, compile_problems

from personalens_utils import plots
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.tables import read_caption

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reproduced_checkout")]


@pytest.fixture(scope="module")
def run_dir(reproduced_checkout) -> Path:
    return reproduced_checkout / "runs" / "small"


def test_the_reproduction_exports_tables_and_figures(run_dir):
    names = {p.name for p in run_dir.rglob("*.tex")}
    assert {"table3_assistant_models.tex", "table4_ablation.tex", "table11_models.tex"} <= names
    assert len(list(run_dir.rglob("figures/*.pdf"))) >= 4
    table3 = next(run_dir.rglob("table3_assistant_models.tex")).read_text(encoding="utf-8")
    assert "\\textbf{" in table3, "Table 3 compares assistants: its best values are set in bold"


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not found: install TeX Live (.ci/run does this)")
def test_every_exported_table_compiles(run_dir, tmp_path):
    failed = {}
    for tex in sorted(run_dir.rglob("*.tex")):
        copy = tmp_path / f"{tex.parent.parent.name}_{tex.name}"
        copy.write_bytes(tex.read_bytes())
        if problems := compile_problems(copy):
            failed[str(tex.relative_to(run_dir))] = problems
    assert failed == {}


def test_every_exported_csv_reads_plain(run_dir):
    """`pandas.read_csv` as it is gives each table's own header: no caption line above it."""
    csvs = sorted(run_dir.rglob("tables/*.csv"))
    assert len(csvs) >= 10
    for csv in csvs:
        columns = [str(c) for c in pd.read_csv(csv).columns]
        with csv.open(encoding="utf-8", newline="") as fh:
            assert columns == next(csvlib.reader(fh)), f"{csv.name}: the header is not the first line"
        assert not any(c.startswith("Unnamed:") for c in columns), f"{csv.name}: a caption line for a header"
        assert read_caption(csv) not in ",".join(columns), f"{csv.name}: the caption is in the CSV"


def test_every_exported_figure_is_print_ready(run_dir):
    widths = {round(w * POINTS_PER_INCH, 1) for w in plots.current_style().widths}
    for pdf in sorted(run_dir.rglob("figures/*.pdf")):
        data = pdf.read_bytes()
        assert round(page_size(data)[0], 1) in widths, f"{pdf}: page width not one of {sorted(widths)}"
        assert "Type3" not in font_subtypes(data), f"{pdf}: Type 3 fonts"
        assert min(font_sizes(data)) >= plots.MIN_FONT_PT, f"{pdf}: text below {plots.MIN_FONT_PT} pt"


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext not found: install poppler-utils")
def test_every_offline_figure_carries_the_offline_note(run_dir):
    """The reproduction is offline: every figure whose caption says so prints the note on one line, at
    both widths."""
    captions = [t for t in sorted(run_dir.rglob("figures/*.txt")) if OFFLINE_LABEL in t.read_text("utf-8")]
    assert len(captions) >= 4
    for caption in captions:
        pdfs = sorted(caption.parent.glob(f"{caption.stem}*.pdf"))
        assert len(pdfs) == 2, f"{caption.stem}: expected the figure at both widths, found {pdfs}"
        for pdf in pdfs:
            lines = [line.strip() for line in pdf_text(pdf).splitlines()]
            assert plots.OFFLINE_NOTE in lines, f"{pdf.name}: no offline note on one line"
