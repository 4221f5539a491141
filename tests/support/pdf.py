"""Reading a PDF as a printer would, without a PDF library: its page size, the sizes its text is set
at (`Tf` operators of its content streams) and the kinds of font it embeds; and its text through
poppler's `pdftotext`, where installed. Used by the figure and the LaTeX table checks."""

from __future__ import annotations

import re
import subprocess
import zlib
from pathlib import Path

POINTS_PER_INCH = 72.0


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


def pdf_text(pdf: Path) -> str:
    """The PDF's text as `pdftotext` lays it out (poppler-utils must be installed)."""
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
