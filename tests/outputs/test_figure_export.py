"""Every figure the analysis and validation code writes is ready for a paper (issue 12, item 2).

The PDFs are read as a printer would: the page is one of the two configured widths, fonts are
embedded as TrueType (no Type 3 bitmaps-as-glyphs), and no text is set below `MIN_FONT_PT` at that
size. The figures themselves are checked for text that overlaps other text or leaves the page.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from support.figures import overlaps_and_overflows, persona_radar
from support.pdf import POINTS_PER_INCH, font_sizes, font_subtypes, page_size, pdf_text
from support.synthetic_store import JUDGE

from personalens_utils import analysis
from personalens_utils.benchmark_validation.figures import figure3
from personalens_utils.data.demographics import sample_demographics
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.measures import scores
from personalens_utils.outputs import plots
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.store import RunStore

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("figure_export")]  # one worker makes `figure_dir`
FIGURES = ("figure3_demographics", "figure4_domains", "figure5_turns", "figure_radar_personalization")
OTHER_WIDTH = {"figure3_demographics": "column", "figure4_domains": "column", "figure5_turns": "text",
               "figure_radar_personalization": "text"}


@pytest.fixture(scope="module")
def figure_dir(tmp_path_factory, paper_outputs) -> Path:
    """Every figure of `write_outputs` (`paper_outputs`), and Figures 3 and 5 made from offline results
    as well."""
    root = tmp_path_factory.mktemp("figure_export")
    shutil.copytree(paper_outputs / "out", root / "out")
    store = RunStore(paper_outputs / "store")
    turns = scores.turn_frame(scores.load_scores(store, judge_model=JUDGE))
    fig5 = analysis.figure5(turns, assistant_model="model-a", backend_names={"offline"})
    fig5.save(root / "out", OutputId("figure", 5, "offline"))
    fig3 = figure3(sample_demographics(40, seed=1), backend_names=["offline"])
    fig3.save(root / "out", OutputId("figure", 3, "offline"))
    return root / "out" / "figures"


def test_every_figure_is_written_with_pdf_png_and_caption(figure_dir):
    for stem in FIGURES:
        for ext in ("pdf", "png", "txt"):
            assert (figure_dir / f"{stem}.{ext}").is_file(), f"{stem}.{ext} not written"
        caption = (figure_dir / f"{stem}.txt").read_text(encoding="utf-8")
        assert re.search(r"Source: .+, \d+ ", caption), f"{stem}.txt names no source and N: {caption!r}"


def test_every_figure_exists_at_the_column_and_the_text_width(figure_dir):
    style = plots.current_style()
    for stem, other in OTHER_WIDTH.items():
        widths = set()
        for name in (stem, f"{stem}_{other}"):
            for ext in ("pdf", "png"):
                assert (figure_dir / f"{name}.{ext}").is_file(), f"{name}.{ext} not written"
            widths.add(round(page_size((figure_dir / f"{name}.pdf").read_bytes())[0], 1))
        assert widths == {round(w * POINTS_PER_INCH, 1) for w in style.widths}, stem


def test_a_figure_from_offline_results_carries_the_note_inside(figure_dir):
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed: apt-get install poppler-utils")
    offline = [t for t in sorted(figure_dir.glob("*.txt")) if OFFLINE_LABEL in t.read_text(encoding="utf-8")]
    assert {t.stem for t in offline} >= {"figure4_domains", "figure_radar_personalization", "figure5_offline",
                                          "figure3_offline"}
    for caption in offline:
        for pdf in sorted(figure_dir.glob(f"{caption.stem}*.pdf")):
            text = pdf_text(pdf)
            assert plots.OFFLINE_NOTE in [line.strip() for line in text.splitlines()], (
                f"{pdf.name}: no offline note on one line in the image")
    assert "Offline" not in pdf_text(figure_dir / "figure3_demographics.pdf")  # given data: no note


def test_pages_are_one_of_the_two_widths(figure_dir):
    style = plots.current_style()
    widths = {round(w * POINTS_PER_INCH, 1) for w in style.widths}
    assert widths == {round(3.03 * 72, 1), round(6.30 * 72, 1)}  # the ACL defaults
    pdfs = sorted(figure_dir.glob("*.pdf"))
    assert {p.stem for p in pdfs} >= set(FIGURES)
    for pdf in pdfs:
        width, height = page_size(pdf.read_bytes())
        assert round(width, 1) in widths, f"{pdf.name}: page {width} pt wide, not one of {sorted(widths)}"
        assert 0 < height <= 9 * POINTS_PER_INCH, f"{pdf.name}: page {height} pt high"


def test_fonts_are_truetype_and_never_type3(figure_dir):
    for pdf in sorted(figure_dir.glob("*.pdf")):
        data = pdf.read_bytes()
        subtypes = font_subtypes(data)
        assert subtypes, f"{pdf.name}: no font dictionaries found"
        assert "Type3" not in subtypes, f"{pdf.name}: Type 3 fonts {subtypes}"
        assert subtypes <= {"TrueType", "Type0", "CIDFontType2"}, f"{pdf.name}: fonts {subtypes}"
        assert b"/FontFile2" in data, f"{pdf.name}: no embedded TrueType font program"


def test_no_text_below_the_minimum_size(figure_dir):
    for pdf in sorted(figure_dir.glob("*.pdf")):
        sizes = font_sizes(pdf.read_bytes())
        assert sizes, f"{pdf.name}: no text found"
        assert min(sizes) >= plots.MIN_FONT_PT, f"{pdf.name}: text at {min(sizes)} pt"


def test_pdffonts_agrees_when_poppler_is_installed(figure_dir):
    if shutil.which("pdffonts") is None:
        pytest.skip("pdffonts (poppler-utils) is not installed; the parsed font check above still ran")
    for pdf in sorted(figure_dir.glob("*.pdf")):
        listing = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
        rows = listing.splitlines()[2:]
        assert rows, f"{pdf.name}: pdffonts lists no fonts"
        for row in rows:
            assert "Type 3" not in row, f"{pdf.name}: {row}"
            assert " yes " in row, f"{pdf.name}: font not embedded: {row}"


def test_the_parsers_see_a_type3_font_and_small_text(tmp_path):
    """The checks above can fail: a Type 3 font and 5 pt text are found in a figure that has them."""
    with matplotlib.rc_context({"pdf.fonttype": 3}):
        fig = Figure(figsize=(2, 1))
        fig.text(0.1, 0.5, "tiny", fontsize=5)
        fig.savefig(tmp_path / "bad.pdf")
    data = (tmp_path / "bad.pdf").read_bytes()
    assert "Type3" in font_subtypes(data)
    assert min(font_sizes(data)) == 5
    assert page_size(data) == (144.0, 72.0)


def spoke_labels_over_the_ring(fig: Figure) -> list[str]:
    """Labels of a polar plot that reach inside its outer ring (where the markers of a full score sit)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    margin = 3 * fig.dpi / 72  # a marker's half size (3 pt) and a point of air
    problems = []
    for ax in (a for a in fig.axes if a.name == "polar"):
        cx, cy = ax.transAxes.transform((0.5, 0.5))
        ring = float(np.hypot(*(ax.transData.transform((0, ax.get_ylim()[1])) - (cx, cy))))
        labels = [*ax.texts, *(t for t in ax.get_xticklabels() if t.get_text())]
        for text in labels:
            box = text.get_window_extent(renderer)
            near = np.hypot(cx - min(max(cx, box.x0), box.x1), cy - min(max(cy, box.y0), box.y1))
            if near < ring + margin:
                problems.append(f"{text.get_text()!r} reaches {ring + margin - near:.1f} px over the ring")
    return problems


@pytest.mark.parametrize("span", ["column", "text"])
def test_radar_labels_stay_outside_the_ring(figures, span):
    drawn = {"persona": persona_radar().at(span), "radar": figures["radar"] if span == "column"
             else figures["radar_text"]}
    for name, fig in drawn.items():
        assert spoke_labels_over_the_ring(fig) == [], name
        assert overlaps_and_overflows(fig) == [], name


FIGURE_NAMES = ["figure3", "figure4", "figure5", "radar", "figure4_20_domains", "radar_20_domains"]


@pytest.mark.parametrize("name", [*FIGURE_NAMES, "figure3_column", "figure4_column", "figure5_text",
                                  "radar_text", "figure4_20_domains_column", "radar_20_domains_text"])
def test_no_text_overlaps_or_leaves_the_figure(figures, name):
    fig = figures[name]
    assert round(fig.get_figwidth(), 2) in {round(w, 2) for w in plots.current_style().widths}
    assert overlaps_and_overflows(fig) == []
    texts = [" ".join(t.get_text().split()) for t in fig.texts]
    extra = [t for t in texts if t and t != plots.OFFLINE_NOTE]
    assert extra == [], "titles belong in the caption file; only the offline note is printed in the figure"


def test_the_overlap_check_sees_overlapping_labels():
    fig, ax = plots.new_figure("column", 1.5)
    ax.text(0.5, 0.5, "Middle Eastern / Arab")
    ax.text(0.52, 0.5, "25.0%")
    fig.text(0.98, 0.5, "runs off the page")
    problems = overlaps_and_overflows(fig)
    assert "'Middle Eastern / Arab' overlaps '25.0%'" in problems
    assert "'runs off the page' leaves the page" in problems


def test_style_widths_and_font_are_settable_and_checked():
    before = plots.current_style()
    try:
        style = plots.apply_style(column_width=3.3, text_width=6.8, serif=True)
        fig, _ = plots.new_figure("column", 2.0)
        assert fig.get_figwidth() == 3.3 and style.width("text") == 6.8
        assert matplotlib.rcParams["font.family"] == ["serif"]
        assert matplotlib.rcParams["font.serif"][0] == "STIXGeneral"
        with pytest.raises(ValueError, match="font_size=6"):
            plots.apply_style(font_size=6)
        with pytest.raises(ValueError, match=r"column_width=7\.0 is wider than text_width"):
            plots.apply_style(column_width=7.0)
        with pytest.raises(ValueError, match="figure span 'page'"):
            plots.new_figure("page", 2.0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="unknown figure style field"):
            plots.apply_style(colour="red")
    finally:
        plots.apply_style(**{f: getattr(before, f) for f in before.__dataclass_fields__})
    assert plots.current_style() == before
