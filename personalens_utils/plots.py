"""One figure style for the whole kit, and export of figures as PDF and PNG."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns

PALETTE = "colorblind"
FONT_SIZE = 9
PDF_METADATA = {"CreationDate": None}
"""PDF document info without the timestamp matplotlib would otherwise write."""


def apply_style() -> None:
    """Paper-ready defaults: white grid, colour-blind palette, small serif-free fonts, tight layout."""
    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE)
    plt.rcParams.update(
        {
            "font.size": FONT_SIZE,
            "axes.titlesize": FONT_SIZE + 1,
            "axes.labelsize": FONT_SIZE,
            "legend.fontsize": FONT_SIZE - 1,
            "xtick.labelsize": FONT_SIZE - 1,
            "ytick.labelsize": FONT_SIZE - 1,
            "figure.dpi": 110,
            "savefig.dpi": 200,
            "savefig.bbox": "tight",
            "pdf.fonttype": 42,
        }
    )


def figure_paths(output_dir: str | os.PathLike[str], number: int | str, slug: str) -> dict[str, Path]:
    stem = Path(output_dir) / "figures" / f"figure{number}_{slug}"
    return {ext: stem.with_suffix(f".{ext}") for ext in ("pdf", "png")}


def save_figure(
    fig: plt.Figure, output_dir: str | os.PathLike[str], number: int | str, slug: str
) -> dict[str, Path]:
    """Write `fig` as `<output_dir>/figures/figure<number>_<slug>.{pdf,png}` with a tight bounding box.

    The PDF carries no creation date, so the same figure gives the same bytes on every run.
    """
    paths = figure_paths(output_dir, number, slug)
    paths["pdf"].parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(paths["pdf"], bbox_inches="tight", metadata=PDF_METADATA)
    fig.savefig(paths["png"], bbox_inches="tight")
    return paths


apply_style()
