"""Every figure the analysis and validation code writes is ready for a paper (issue 12, item 2).

The PDFs are read as a printer would: the page is one of the two configured widths, fonts are
embedded as TrueType (no Type 3 bitmaps-as-glyphs), and no text is set below `MIN_FONT_PT` at that
size. The figures themselves are checked for text that overlaps other text or leaves the page.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import zlib
from itertools import combinations
from pathlib import Path
from unittest import mock

import matplotlib

matplotlib.use("Agg")

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from test_analysis_support import JUDGE, build_store
from test_determinism import write_outputs

from personalens_utils import analysis, plots
from personalens_utils.analysis import scores
from personalens_utils.data.demographics import sample_demographics
from personalens_utils.reference.schema import load_schema
from personalens_utils.validation.figures import figure3

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("determinism")]
POINTS_PER_INCH = 72.0
FIGURES = ("figure3_demographics", "figure4_domains", "figure5_turns", "figure_radar_personalization")


@pytest.fixture(scope="module")
def figure_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("figure_export")
    build_store(root / "store")
    write_outputs(root / "store", root / "out")
    return root / "out" / "figures"


def page_size(pdf: bytes) -> tuple[float, float]:
    """Width and height in points of a one-page PDF, from its MediaBox."""
    boxes = re.findall(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]", pdf)
    assert len(boxes) == 1, f"expected one page, found {len(boxes)} MediaBox entries"
    x0, y0, x1, y1 = (float(v) for v in boxes[0])
    return x1 - x0, y1 - y0


def content_streams(pdf: bytes) -> list[bytes]:
    """Every stream of the PDF, inflated where it is Flate-compressed."""
    streams = []
    for head, body in re.findall(rb"<<(.*?)>>\s*stream\r?\n(.*?)\r?\nendstream", pdf, flags=re.S):
        streams.append(zlib.decompress(body) if b"/FlateDecode" in head else body)
    return streams


def font_sizes(pdf: bytes) -> list[float]:
    """The size of every `Tf` (set font) operator in the page's content."""
    sizes = []
    for stream in content_streams(pdf):
        sizes += [float(v) for v in re.findall(rb"/\S+\s+([\d.]+)\s+Tf\b", stream)]
    return sizes


def font_subtypes(pdf: bytes) -> set[str]:
    """Subtypes of the font dictionaries (`/Type /Font`) the PDF holds."""
    found = set()
    for obj in re.findall(rb"<<(.*?)>>", pdf, flags=re.S):
        if re.search(rb"/Type\s*/Font\b", obj):
            match = re.search(rb"/Subtype\s*/(\w+)", obj)
            found.add(match.group(1).decode() if match else "?")
    return found


def test_every_figure_is_written_with_pdf_png_and_caption(figure_dir):
    for stem in FIGURES:
        for ext in ("pdf", "png", "txt"):
            assert (figure_dir / f"{stem}.{ext}").is_file(), f"{stem}.{ext} not written"
        caption = (figure_dir / f"{stem}.txt").read_text(encoding="utf-8")
        assert re.search(r"Source: .+, \d+ ", caption), f"{stem}.txt names no source and N: {caption!r}"


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


def overlaps_and_overflows(fig: Figure) -> list[str]:
    """Pairs of texts whose boxes overlap, and texts reaching outside the figure."""
    drawn: list[Text] = []
    original = Text.draw

    def record(text: Text, renderer) -> None:  # tick labels outside the view exist but are not drawn
        original(text, renderer)
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)

    canvas = FigureCanvasAgg(fig)
    with mock.patch.object(Text, "draw", record):
        canvas.draw()
    renderer = canvas.get_renderer()
    page = fig.bbox
    texts = list(dict.fromkeys(drawn))
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    problems = [
        f"{text!r} leaves the page"
        for text, box in boxes
        if box.x0 < page.x0 - 1 or box.y0 < page.y0 - 1 or box.x1 > page.x1 + 1 or box.y1 > page.y1 + 1
    ]
    for (a, box_a), (b, box_b) in combinations(boxes, 2):
        inter_w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
        inter_h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
        if inter_w > 1 and inter_h > 1:
            problems.append(f"{a!r} overlaps {b!r}")
    return problems


@pytest.fixture(scope="module")
def figures(tmp_path_factory) -> dict[str, Figure]:
    store = build_store(tmp_path_factory.mktemp("figure_text") / "store")
    tidy = scores.load_scores(store, judge_model=JUDGE)
    turns = scores.turn_frame(tidy)
    names = load_schema().domain_names  # the official benchmark's 20 domains, as on a full run
    every_domain = tidy.assign(
        domains=[
            [names[zlib.crc32(scenario.encode()) % len(names)]] if kind == "SD" else list(domains)
            for scenario, kind, domains in zip(
                tidy["scenario_id"], tidy["task_type"], tidy["domains"], strict=True
            )
        ]
    )
    return {
        "figure3": figure3(sample_demographics(300, seed=2)).figure,
        "figure4": analysis.figure4(tidy, assistant_model="model-a").figure,
        "figure5": analysis.figure5(turns, assistant_model="model-a", backend_names={"offline"}).figure,
        "radar": analysis.radar_chart(tidy).figure,
        "figure4_20_domains": analysis.figure4(every_domain, assistant_model="model-a").figure,
        "radar_20_domains": analysis.radar_chart(every_domain).figure,
    }


@pytest.mark.parametrize(
    "name", ["figure3", "figure4", "figure5", "radar", "figure4_20_domains", "radar_20_domains"]
)
def test_no_text_overlaps_or_leaves_the_figure(figures, name):
    fig = figures[name]
    assert round(fig.get_figwidth(), 2) in {round(w, 2) for w in plots.current_style().widths}
    assert overlaps_and_overflows(fig) == []
    assert not fig.texts or all(t.get_text() == "" for t in fig.texts), "titles belong in the caption file"


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
