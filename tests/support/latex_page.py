"""An ACL-like page for compiling the kit's tables, and what pdflatex says about each.

10 pt Times, two 3.03 in columns, 6.3 in text width, as an ACL paper; the PDF is left uncompressed so
the sizes its text is set at can be read back (`support.pdf.font_sizes`). Every float's height is
written to the log, so a float taller than the text (which LaTeX only warns about, then prints over the
page foot) is a problem like an overfull box.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from personalens_utils.outputs.latex import PACKAGES
from support.pdf import font_sizes

PDFLATEX = shutil.which("pdflatex")
needs_tex = pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex not found: install TeX Live (apt-get install texlive-latex-extra); .ci/run does this",
)
MIN_TEXT_PT = 7.0
TEX_PT_IN_BP = 72 / 72.27
"""A TeX point in PDF points (big points): pdflatex writes sizes in these."""
TEXT_HEIGHT = "9in"
FLOAT_HEIGHT = "PL float height"
"""The log line each float writes: its box's height and depth (pt) and the text height."""
_MEASURE_FLOATS = (
    "\\makeatletter\\let\\pl@largefloatcheck\\@largefloatcheck"
    f"\\def\\@largefloatcheck{{\\typeout{{{FLOAT_HEIGHT}: \\the\\ht\\@currbox\\space"
    "\\the\\dp\\@currbox\\space\\the\\textheight}\\pl@largefloatcheck}\\makeatother"
)


def acl_document(tables: Sequence[str]) -> str:
    """The tables on ACL-like pages, with no package that could scale them."""
    return "\n".join([
        "\\pdfcompresslevel=0",
        "\\pdfobjcompresslevel=0",
        "\\documentclass[10pt,twocolumn]{article}",
        "\\usepackage[T1]{fontenc}",
        "\\usepackage{times}",
        f"\\usepackage[textwidth=6.3in,columnsep=0.24in,textheight={TEXT_HEIGHT}]{{geometry}}",
        f"\\usepackage{{{','.join(PACKAGES)}}}",
        _MEASURE_FLOATS,
        "\\begin{document}",
        *tables,
        "\\clearpage",
        "\\end{document}",
        "",
    ])


def compile_table(pdflatex: str, tex: Path, out_dir: Path) -> tuple[list[str], float]:
    """Compile one table on an ACL-like page: the problems (errors, boxes more than 1 pt too wide,
    floats taller than the text) and the smallest text size (pt) in the PDF."""
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = out_dir / f"{tex.stem}_page.tex"
    doc.write_text(acl_document([tex.read_text(encoding="utf-8")]), encoding="utf-8")
    run = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=out_dir, capture_output=True, text=True, timeout=120,
    )
    log = doc.with_suffix(".log").read_text(errors="replace")
    problems = [line for line in log.splitlines() if line.startswith("!")]
    problems += [f"overfull box, {m.group(1)} pt too wide"
                 for m in re.finditer(r"Overfull \\[hv]box \(([\d.]+)pt too (?:wide|high)\)", log)
                 if float(m.group(1)) > 1.0]
    problems += [f"float too large for the page by {m.group(1)}" for m in
                 re.finditer(r"Float too large for page by ([\d.]+pt)", log)]
    problems += float_heights(log)
    if run.returncode and not problems:
        problems.append(f"pdflatex exited with {run.returncode}")
    pdf = doc.with_suffix(".pdf")
    sizes = font_sizes(pdf.read_bytes()) if pdf.exists() else []
    return problems, min(sizes, default=0.0) / TEX_PT_IN_BP


def float_heights(log: str) -> list[str]:
    """A problem for each float (as measured in the log) taller than the text height."""
    found = re.findall(rf"{FLOAT_HEIGHT}: ([\d.]+)pt ([\d.]+)pt ([\d.]+)pt", log)
    return [f"float {float(h) + float(d):.1f} pt tall, the text {float(t):.1f} pt"
            for h, d, t in found if float(h) + float(d) > float(t)]


def compile_problems(tex: Path) -> list[str]:
    """pdflatex problems of one table on an ACL-like page: errors, boxes more than 1 pt too wide, floats
    taller than the text (LaTeX's "Float too large"), and text under 7 pt."""
    problems, smallest = compile_table(PDFLATEX, tex, tex.parent / "acl_pages")
    if smallest < MIN_TEXT_PT - 0.05:
        problems.append(f"text at {smallest:.2f} pt")
    return problems
