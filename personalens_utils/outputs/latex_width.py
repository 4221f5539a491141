"""How wide a table's text prints in an ACL paper, measured with the metrics of its Times font.

The kit decides between a one-column `table`, a two-column `table*` and splitting a table before
LaTeX ever sees it, so it measures cells with the Adobe metrics of Times Roman and Times Bold that
matplotlib ships (read by fontTools). A character the font lacks (κ, Δ, set in math mode) counts
as wide as a math symbol.
"""

from __future__ import annotations

import os
from functools import cache

import matplotlib
from fontTools import afmLib, agl

POINTS_PER_INCH = 72.27
"""TeX points per inch."""
COLUMN_WIDTH_PT = 3.03 * POINTS_PER_INCH
TEXT_WIDTH_PT = 6.30 * POINTS_PER_INCH
"""ACL's column and text widths."""
TEXT_HEIGHT_PT = 9.0 * POINTS_PER_INCH
"""A page's text height: a little less than ACL's (A4 and US letter), so a float that fits it fits both."""
FALLBACK_EM = 0.8
"""Width, in em, of a character Times has no glyph for (math symbols)."""


@cache
def _metrics(bold: bool) -> afmLib.AFM:
    name = "ptmb8a.afm" if bold else "ptmr8a.afm"
    return afmLib.AFM(os.path.join(matplotlib.get_data_path(), "fonts", "afm", name))


def text_width(text: str, size_pt: float, *, bold: bool = False) -> float:
    """Printed width in points of one line of plain text in Times at `size_pt`."""
    font = _metrics(bold)
    units = 0.0
    for char in text:
        name = agl.UV2AGL.get(ord(char), "")
        units += font[name][1] if name and font.has_char(name) else FALLBACK_EM * 1000
    return units * size_pt / 1000
