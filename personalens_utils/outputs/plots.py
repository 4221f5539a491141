"""One figure style for the whole kit, figures sized for the page, and their export (PDF, PNG, caption).

A paper's figure is included at one of two widths, the column or the full text width, so every
figure of the kit is drawn at one of them (`new_figure`) and saved at exactly that width (no tight
bounding box): the fonts then print at the size set here, never below `MIN_FONT_PT`. Titles stay out
of the figure; the caption, with the provenance and N, goes in a text file beside it.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from personalens_utils.base.safe_names import inside
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.tables import Source

PALETTE = "colorblind"
COLUMN_WIDTH_IN = 3.03
TEXT_WIDTH_IN = 6.30
"""ACL's one-column and two-column text widths, in inches."""
MIN_FONT_PT = 7.0
"""The smallest text a figure may print at its width."""
SERIF_FONTS = ("STIXGeneral", "DejaVu Serif")
"""Shipped with matplotlib; STIX is drawn after Times, so it matches a Times body."""
PDF_METADATA = {"CreationDate": None}
"""PDF document info without the timestamp matplotlib would otherwise write."""
CAPTION_SUFFIX = ".txt"
OFFLINE_NOTE = "Offline backend: rule-based, not a language model"
GIVEN_NOTE = "Given data: no model of this run made these numbers"
"""The note of a figure drawn from data the benchmark ships (e.g. the official users' demographics):
inside a run of the offline backend, it says why the figure carries no `OFFLINE_NOTE`."""
"""Printed in the corner of a figure made from offline results, so it cannot be pasted without it."""

Span = Literal["column", "text"]


@dataclass(frozen=True)
class FigureStyle:
    """The page the figures are made for: its two widths (inches), the body font size (pt), serif or not."""

    column_width: float = COLUMN_WIDTH_IN
    text_width: float = TEXT_WIDTH_IN
    font_size: float = 8.0
    serif: bool = False

    def __post_init__(self) -> None:
        for name in ("column_width", "text_width"):
            if not 0 < getattr(self, name) <= 20:
                raise ValueError(f"figure style: {name}={getattr(self, name)!r} inches is not a page width")
        if self.column_width > self.text_width:
            raise ValueError(
                f"figure style: column_width={self.column_width} is wider than text_width={self.text_width}"
            )
        if self.font_size - 1 < MIN_FONT_PT:
            raise ValueError(
                f"figure style: font_size={self.font_size} pt prints tick labels below {MIN_FONT_PT} pt; "
                f"use at least {MIN_FONT_PT + 1}"
            )

    @property
    def small(self) -> float:
        """Tick labels, legends and bar labels: one point below the body size."""
        return self.font_size - 1

    def width(self, span: Span) -> float:
        if span == "column":
            return self.column_width
        if span == "text":
            return self.text_width
        raise ValueError(f"figure span {span!r}: expected 'column' or 'text'")

    @property
    def widths(self) -> tuple[float, float]:
        return (self.column_width, self.text_width)


_style = FigureStyle()
_applied = False
"""Whether matplotlib's settings hold `_style` yet: they are set when the first figure is made (or the
style is changed), never by importing this module."""


def current_style() -> FigureStyle:
    """The style the next figure is drawn with."""
    return _style


def apply_style(**changes: Any) -> FigureStyle:
    """Set the figure style (any `FigureStyle` field, e.g. `serif=True`, `column_width=3.3`) and rcParams.

    Fields not given keep their current value; fonts are embedded in PDFs as TrueType (fonttype 42).
    """
    global _style, _applied
    unknown = set(changes) - set(FigureStyle.__dataclass_fields__)
    if unknown:
        raise TypeError(f"apply_style: unknown figure style field(s) {sorted(unknown)}")
    _style = replace(_style, **changes)
    _applied = True
    import seaborn as sns  # here, not at the top: seaborn and scipy.stats cost a kernel 0.7 s to import

    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE)
    family = "serif" if _style.serif else "sans-serif"
    mpl.rcParams.update(
        {
            "font.family": family,
            "font.serif": [*SERIF_FONTS, *mpl.rcParamsDefault["font.serif"]],
            "mathtext.fontset": "stix" if _style.serif else "dejavusans",
            "font.size": _style.font_size,
            "axes.titlesize": _style.font_size,
            "axes.labelsize": _style.font_size,
            "legend.fontsize": _style.small,
            "legend.title_fontsize": _style.small,
            "xtick.labelsize": _style.small,
            "ytick.labelsize": _style.small,
            "figure.titlesize": _style.font_size,
            "axes.linewidth": 0.6,
            "grid.linewidth": 0.4,
            "lines.linewidth": 1.2,
            "lines.markersize": 3.5,
            "figure.dpi": 110,
            "savefig.dpi": 300,
            "savefig.bbox": None,
            "pdf.fonttype": 42,
        }
    )
    return _style


def styled() -> FigureStyle:
    """The style, with matplotlib's settings made to hold it first if nothing has set them yet: what
    reads those settings (a new figure, a legend measured before its figure) calls this."""
    return _style if _applied else apply_style()


def new_figure(span: Span, height: float, **subplots: Any) -> tuple[Figure, Any]:
    """A figure `span` wide (column or text width of the current style) and `height` inches tall.

    Laid out by matplotlib's constrained layout so nothing is clipped at that size, and not
    registered with pyplot: a notebook shows it once, when it displays it.
    """
    if height <= 0:
        raise ValueError(f"figure height {height!r}: expected a positive number of inches")
    styled()
    fig = Figure(figsize=(_style.width(span), height), layout="constrained")
    return fig, fig.subplots(**subplots)


def mark_offline(fig: Figure, backend_names: Iterable[str], offline_roles: Sequence[str] = ()) -> None:
    """Print `OFFLINE_NOTE` small in the figure's top right corner when any number in it came from the
    offline backend, on one line (short enough for a column at `MIN_FONT_PT`); `offline_roles`, when
    the offline backend played only those (e.g. the user agent and the judge of a real assistant), are
    named instead, so the note does not call a real model offline. It is the figure's suptitle, so
    constrained layout keeps room for it."""
    if "offline" not in set(backend_names):
        return
    _corner_note(fig, f"Offline {', '.join(offline_roles)}: rule-based" if offline_roles else OFFLINE_NOTE)


def mark_given(fig: Figure) -> None:
    """Print `GIVEN_NOTE` where `mark_offline` prints its note: every figure of a run says inside the
    image where its numbers came from, and a figure of given data must not claim the offline note."""
    _corner_note(fig, GIVEN_NOTE)


def _corner_note(fig: Figure, note: str) -> None:
    fig.suptitle(note, x=0.995, ha="right", fontsize=MIN_FONT_PT, color="0.35", fontstyle="italic")


SPOKE_LABEL_GAP = 0.1
"""Distance of a radar chart's spoke label beyond the outer ring, as a share of the radius' range."""


def label_spokes(ax: Any, angles: Iterable[float], labels: Iterable[str]) -> None:
    """Name each spoke of a polar plot just beyond its outer ring, aligned away from the centre, so no
    label reaches back over the ring or the markers drawn on it (tick labels would, centred on it)."""
    low, high = ax.get_ylim()
    ax.set_xticks(list(angles), [])
    for angle, label in zip(angles, labels, strict=True):
        cos, sin = np.cos(angle), np.sin(angle)
        ax.text(angle, high + SPOKE_LABEL_GAP * (high - low), label, fontsize=current_style().small,
                ha="left" if cos > 0.1 else "right" if cos < -0.1 else "center",
                va="bottom" if sin > 0.1 else "top" if sin < -0.1 else "center")


@dataclass(frozen=True)
class LegendFit:
    """Legend labels (a long one wrapped onto more lines) and a column count that fit a width, and the
    height, in inches, that legend takes."""

    labels: list[str]
    columns: int
    height: float


def fit_legend(labels: Sequence[str], width: float, *, max_columns: int, handlelength: float) -> LegendFit:
    """The most columns, up to `max_columns`, in which a frameless legend of `labels` at the style's small
    font fits `width` inches of a `new_figure` (less the layout's padding on both sides); when even one
    column is too narrow, labels are wrapped at the fewest characters a line that still fit.

    Figures have a fixed width, so a legend wider than it is cut off on both sides, not shrunk. The
    legend is measured as matplotlib lays it out (`legend_size`), so what fits here fits in the figure.
    """
    styled()
    room = width - 2 * mpl.rcParams["figure.constrained_layout.w_pad"]
    for columns in range(min(max_columns, len(labels)), 0, -1):
        wide, high = legend_size(labels, columns, handlelength)
        if wide <= room:
            return LegendFit(list(labels), columns, high)
    longest = max(len(label) for label in labels)
    low, high_chars = 1, longest  # the most characters a line may hold, found by bisection
    while low < high_chars:
        chars = (low + high_chars + 1) // 2
        if legend_size(_wrapped(labels, chars), 1, handlelength)[0] <= room:
            low = chars
        else:
            high_chars = chars - 1
    shown = _wrapped(labels, low)
    return LegendFit(shown, 1, legend_size(shown, 1, handlelength)[1])


def _wrapped(labels: Sequence[str], chars: int) -> list[str]:
    """Each label in lines of at most `chars` characters: broken at spaces and hyphens where it can,
    else inside a word (a path or a model id may have neither)."""
    return ["\n".join(textwrap.wrap(label, chars)) or label for label in labels]


def legend_size(labels: Sequence[str], columns: int, handlelength: float) -> tuple[float, float]:
    """Width and height, in inches, of a frameless legend of `labels` at the style's small font, laid out
    by matplotlib at the screen's and the saved file's resolution, whichever is larger (hinting makes
    text a few percent wider at one or the other)."""
    styled()
    sizes = []
    for dpi in sorted({mpl.rcParams["figure.dpi"], mpl.rcParams["savefig.dpi"]}):
        scratch = Figure(dpi=dpi)
        handles = [Line2D([], [], marker="o") for _ in labels]
        legend = scratch.legend(handles, list(labels), ncol=columns, frameon=False, handlelength=handlelength,
                                fontsize=_style.small)
        box = legend.get_window_extent(FigureCanvasAgg(scratch).get_renderer())
        sizes.append((box.width / dpi, box.height / dpi))
    return max(w for w, _ in sizes), max(h for _, h in sizes)


def span_of(fig: Figure) -> Span:
    """Which of the style's widths a figure was drawn at."""
    return "column" if abs(fig.get_figwidth() - _style.column_width) < 1e-6 else "text"


@dataclass(frozen=True)
class FigureResult:
    """A figure, its caption (what it shows, with the offline label where it applies), where its
    numbers come from, and optionally the numbers drawn."""

    figure: Figure
    caption: str
    source: Source
    data: pd.DataFrame | None = None
    at: Callable[[Span], Figure] | None = None
    """Draws the same figure at the other width, so a paper can place it in a column or across both."""

    def describe(self) -> str:
        """The caption file's text: caption, then the source sentence (provenance and N)."""
        return f"{self.caption} {self.source.describe()}"

    def save(self, output_dir: str | os.PathLike[str], output: OutputId, part: str = "") -> dict[str, Path]:
        """`save_figure` with this figure's caption as the figure `output` (its file `part`, if any); with
        `at`, also the figure at the other width as `figure<number>_<slug>_<column|text>.{pdf,png}`."""
        number, slug = output.of_kind("figure").number, output.file_slug(part)
        paths = save_figure(self.figure, output_dir, number, slug, caption=self.describe())
        if self.at is not None:
            other: Span = "text" if span_of(self.figure) == "column" else "column"
            drawn = save_figure(self.at(other), output_dir, number, f"{slug}_{other}")
            paths |= {f"{ext}_{other}": path for ext, path in drawn.items()}
        return paths


def figure_paths(output_dir: str | os.PathLike[str], number: int | str, slug: str) -> dict[str, Path]:
    """Where a figure's files go; the slug may come from data, so each name goes through
    `safe_names.inside`."""
    folder = Path(output_dir) / "figures"
    return {ext: inside(folder, f"figure{number}_{slug}", suffix=f".{ext}")
            for ext in ("pdf", "png", CAPTION_SUFFIX.lstrip("."))}


def save_figure(
    fig: Figure,
    output_dir: str | os.PathLike[str],
    number: int | str,
    slug: str,
    *,
    caption: str | None = None,
) -> dict[str, Path]:
    """Write `fig` as `<output_dir>/figures/figure<number>_<slug>.{pdf,png}` at its own size, and the
    caption (when given) as `figure<number>_<slug>.txt` beside them.

    The page is the figure's size, so a figure drawn at a column or text width keeps it. The PDF
    carries no creation date, so the same figure gives the same bytes on every run.
    """
    paths = figure_paths(output_dir, number, slug)
    paths["pdf"].parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(paths["pdf"], metadata=PDF_METADATA)
    fig.savefig(paths["png"])
    text = paths.pop(CAPTION_SUFFIX.lstrip("."))
    if caption is not None:
        text.write_text(caption.strip() + "\n", encoding="utf-8")
        paths["caption"] = text
    return paths


def greyscale_styles(n: int) -> list[dict[str, Any]]:
    """`n` line styles that differ in colour, dash pattern and marker, so they stay apart in greyscale."""
    import seaborn as sns

    colors = sns.color_palette(PALETTE, max(n, 1))
    dashes = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)))
    markers = ("o", "s", "^", "D", "v", "P", "X")
    return [
        {"color": colors[i], "ls": dashes[i % len(dashes)], "marker": markers[i % len(markers)]}
        for i in range(n)
    ]


def scale_limits(low: float, high: float, margin: float = 0.04) -> tuple[float, float]:
    """Axis limits covering a score scale, with a little room so values at its ends stay visible."""
    pad = (high - low) * margin
    return (low - pad, high + pad)
