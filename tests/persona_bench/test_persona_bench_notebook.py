"""Notebook 08 runs offline on synthetic data and writes PERSONA Bench's tables and figure: file names
with `persona`, tables that compile without a box wider than the text, a figure at one of the two
widths with TrueType fonts and no text below the minimum size, byte-identical on a second evaluation,
labelled synthetic and offline."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import papermill
import pytest
from support.latex_page import PDFLATEX, compile_problems
from support.pdf import POINTS_PER_INCH, font_sizes, font_subtypes, page_size

from personalens_utils.base.paths import project_root
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.outputs import plots
from personalens_utils.persona_bench.synthetic import SYNTHETIC_LABEL

pytestmark = pytest.mark.slow
NOTEBOOK = project_root() / "notebooks" / "08_persona_bench.ipynb"


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("nb08")
    papermill.execute_notebook(
        str(NOTEBOOK),
        str(out / "08.ipynb"),
        kernel_name="python3",
        progress_bar=False,
        cwd=str(out),
        parameters={
            "synthetic_users": 8,
            "persona_data": str(out / "data"),
            "output_dir": str(out),
            "n_resamples": 20,
        },
    )
    return out


def test_the_notebook_writes_the_data_store_tables_and_figure(executed):
    out = executed
    assert (out / "data" / "merged_posts_remapped.json").is_file()
    assert (out / "data" / "store" / "persona_bench.jsonl").is_file()
    tables = sorted(p.name for p in (out / "tables").glob("*.md"))
    assert tables == [
        "tableP1_persona_results.md",
        "tableP2_persona_domains.md",
        "tableP3_persona_gains.md",
        "tableP4_persona_coverage.md",
    ]
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert figures and all("persona" in name for name in figures)
    results = (out / "tables" / "tableP1_persona_results.md").read_text(encoding="utf-8")
    assert SYNTHETIC_LABEL in results and OFFLINE_LABEL in results and "not measured" in results


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not found: install TeX Live (.ci/run does this)")
def test_the_tables_compile_without_overfull_boxes(executed):
    out = executed
    failed = {tex.name: p for tex in sorted((out / "tables").glob("*.tex")) if (p := compile_problems(tex))}
    assert failed == {}


def test_the_radar_figure_meets_the_print_rules(executed):
    out = executed
    widths = {round(w * POINTS_PER_INCH, 1) for w in plots.current_style().widths}
    pdfs = sorted((out / "figures").glob("*.pdf"))
    assert pdfs and all(p.with_suffix(".png").is_file() for p in pdfs)
    captions = sorted((out / "figures").glob("*.txt"))
    assert captions, "no figure caption written"
    for caption in captions:
        drawn = sorted(caption.parent.glob(f"{caption.stem}*.pdf"))
        assert {round(page_size(p.read_bytes())[0], 1) for p in drawn} == widths, (
            f"{caption.stem}: not at both widths"
        )
    for pdf in pdfs:
        raw = pdf.read_bytes()
        assert "Type3" not in font_subtypes(raw)
        assert min(font_sizes(raw)) >= plots.MIN_FONT_PT


def test_a_second_evaluation_writes_the_same_bytes(executed, tmp_path):
    from personalens_utils.llm import LLMClient
    from personalens_utils.runstore.store import RunStore
    from personalens_utils.session.persona_bench import PersonaRun

    out = executed
    run = PersonaRun(
        out / "data" / "merged_posts_remapped.json",
        "synthetic",
        RunStore(out / "data" / "store"),
        tmp_path,
        LLMClient("offline", progress=False),
        "claude-3-5-sonnet",
    )
    first = {
        p.name: p.read_bytes()
        for p in run.evaluate(n_resamples=20).export(tmp_path / "a")
        if p.suffix in (".csv", ".md", ".tex")
    }
    second = {
        p.name: p.read_bytes()
        for p in run.evaluate(n_resamples=20).export(tmp_path / "b")
        if p.suffix in (".csv", ".md", ".tex")
    }
    assert first == second and len(first) == 12
