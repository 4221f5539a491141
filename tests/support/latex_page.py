"""ACL's page for compiling the kit's tables, and what pdflatex says about each.

The page has the geometry of an ACL paper and of `../shared/latex/acl_page.tex` beside the checkout
(`SHARED_PAGE`): 11 pt Times, two columns of 7.7 cm, a text 16.0 cm wide and 24.7 cm tall, so
`\\small` is 10 pt and `\\footnotesize` 9 pt. It loads only the packages a table says it requires
(nothing that could scale it) and leaves the PDF uncompressed, so the sizes its text is set at can be
read back (`support.pdf.font_sizes`). Every float's height is written to the log, so a float taller
than the text (which LaTeX only warns about, then prints over the page foot) is a problem like an
overfull box.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from personalens_utils.outputs.latex import PACKAGES
from support.pdf import font_sizes

PDFLATEX = shutil.which("pdflatex")
needs_tex = pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex not found: install TeX Live (apt-get install texlive-latex-extra); .ci/run does this",
)
SHARED_PAGE = Path(__file__).resolve().parents[3] / "shared" / "latex" / "acl_page.tex"
"""The ACL page the project's tables are checked on, beside the checkout (not part of the repository)."""
DOCUMENT_CLASS = "\\documentclass[11pt,twocolumn]{article}"
GEOMETRY = "\\usepackage[a4paper,textwidth=16cm,textheight=24.7cm,columnsep=0.6cm,top=2.5cm]{geometry}"
"""ACL's page, as `SHARED_PAGE` writes it."""
MIN_TEXT_PT = 9.0
"""The smallest text a table may print: `\\footnotesize` of an 11 pt paper (`\\scriptsize` is 8 pt)."""
TEX_PT_IN_BP = 72 / 72.27
"""A TeX point in PDF points (big points): pdflatex writes sizes in these."""
FLOAT_HEIGHT = "PL float height"
"""The log line each float writes: its box's height and depth (pt) and the text height."""
SCALING = re.compile(r"\\(?:adjustbox|resizebox|scalebox)|\\(?:tiny|scriptsize)\b")
"""What a table at its natural size never uses."""
_MEASURE_FLOATS = (
    "\\makeatletter\\let\\pl@largefloatcheck\\@largefloatcheck"
    f"\\def\\@largefloatcheck{{\\typeout{{{FLOAT_HEIGHT}: \\the\\ht\\@currbox\\space"
    "\\the\\dp\\@currbox\\space\\the\\textheight}\\pl@largefloatcheck}\\makeatother"
)


def acl_document(tables: Sequence[str]) -> str:
    """The tables on ACL's pages, with no package that could scale them."""
    return "\n".join([
        "\\pdfcompresslevel=0",
        "\\pdfobjcompresslevel=0",
        DOCUMENT_CLASS,
        GEOMETRY,
        "\\usepackage{times}",
        "\\usepackage[T1]{fontenc}",
        "\\usepackage[utf8]{inputenc}",
        f"\\usepackage{{{','.join(PACKAGES)}}}",
        _MEASURE_FLOATS,
        "\\begin{document}",
        *tables,
        "\\clearpage",
        "\\end{document}",
        "",
    ])


def compile_table(pdflatex: str, tex: Path, out_dir: Path) -> tuple[list[str], float]:
    """Compile one table on ACL's page: the problems (errors, boxes more than 1 pt too wide,
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
    """pdflatex problems of one table on ACL's page: errors, boxes more than 1 pt too wide, floats
    taller than the text (LaTeX's "Float too large"), and text smaller than `\\footnotesize`."""
    problems, smallest = compile_table(PDFLATEX, tex, tex.parent / "acl_pages")
    if smallest < MIN_TEXT_PT - 0.05:
        problems.append(f"text at {smallest:.2f} pt")
    return problems


def unfit_tables(tables: Iterable[Path], work: Path) -> dict[str, list[str]]:
    """The problems of each table that does not print at its natural size on ACL's page (scaling
    commands, then `compile_problems`), by its path; each is compiled from a copy under `work`."""
    failed = {}
    work.mkdir(parents=True, exist_ok=True)
    for n, tex in enumerate(tables):
        text = tex.read_text(encoding="utf-8")
        copy = work / f"t{n}_{tex.name}"  # tables of several folders share names
        copy.write_text(text, encoding="utf-8")
        problems = [f"uses {m.group()}" for m in SCALING.finditer(text)] + compile_problems(copy)
        if problems:
            failed[str(tex)] = problems
    return failed
