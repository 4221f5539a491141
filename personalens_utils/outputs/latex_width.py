"""How wide a table's text prints in an ACL paper, measured with the metrics of its Times font.

The kit decides between a one-column `table`, a two-column `table*` and splitting a table before
LaTeX ever sees it, so it measures cells with the Adobe metrics of Times Roman and Times Bold that
matplotlib ships. A character the font lacks (κ, Δ, ≥, set in math mode) is
measured in the Computer Modern math fonts LaTeX sets it in, whose metrics matplotlib ships too.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import matplotlib
from fontTools import agl

POINTS_PER_INCH = 72.27
"""TeX points per inch."""
POINTS_PER_CM = POINTS_PER_INCH / 2.54
COLUMN_WIDTH_PT = 7.7 * POINTS_PER_CM
TEXT_WIDTH_PT = 16.0 * POINTS_PER_CM
TEXT_HEIGHT_PT = 24.7 * POINTS_PER_CM
"""ACL's column width, text width and text height (the same on A4 and US letter)."""
MATH_FONTS = ("cmmi10.afm", "cmr10.afm", "cmsy10.afm")
"""Where LaTeX finds a symbol Times lacks: math italic (κ, α), upright Greek (Δ), symbols (≥)."""
FALLBACK_EM = 0.8
"""Width, in em, of a character no font here has a glyph for."""


_GLYPH = re.compile(r"^C\s+-?\d+\s*;\s*WX\s+([\d.]+)\s*;\s*N\s+(\S+)\s*;", re.M)
"""A glyph's line in an AFM file: its code, width (thousandths of an em) and name."""


@cache
def _widths(font: str) -> dict[str, float]:
    """The width of each named glyph of an AFM file matplotlib ships (fontTools' reader refuses the
    Computer Modern files' fractional widths)."""
    text = Path(matplotlib.get_data_path(), "fonts", "afm", font).read_text(encoding="latin-1")
    return {name: float(width) for width, name in _GLYPH.findall(text)}


def _units(char: str, bold: bool) -> float:
    """The width of one character in thousandths of an em."""
    name = agl.UV2AGL.get(ord(char), "")
    for font in ("ptmb8a.afm" if bold else "ptmr8a.afm", *MATH_FONTS):
        if name in _widths(font):
            return _widths(font)[name]
    return FALLBACK_EM * 1000


def text_width(text: str, size_pt: float, *, bold: bool = False) -> float:
    """Printed width in points of one line of plain text in Times at `size_pt`."""
    return sum(_units(char, bold) for char in text) * size_pt / 1000
