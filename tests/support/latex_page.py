"""An ACL-like page for compiling the kit's tables, and what pdflatex says about each.

10 pt Times, two 3.03 in columns, 6.3 in text width, as an ACL paper; the PDF is left uncompressed so
the sizes its text is set at can be read back (`support.pdf.font_sizes`).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from personalens_utils.latex import PACKAGES
from support.pdf import font_sizes

TEX_PT_IN_BP = 72 / 72.27
"""A TeX point in PDF points (big points): pdflatex writes sizes in these."""


def acl_document(tables: Sequence[str]) -> str:
    """The tables on ACL-like pages, with no package that could scale them."""
    return "\n".join([
        "\\pdfcompresslevel=0",
        "\\pdfobjcompresslevel=0",
        "\\documentclass[10pt,twocolumn]{article}",
        "\\usepackage[T1]{fontenc}",
        "\\usepackage{times}",
        "\\usepackage[textwidth=6.3in,columnsep=0.24in,textheight=9in]{geometry}",
        f"\\usepackage{{{','.join(PACKAGES)}}}",
        "\\begin{document}",
        *tables,
        "\\clearpage",
        "\\end{document}",
        "",
    ])


def compile_table(pdflatex: str, tex: Path, out_dir: Path) -> tuple[list[str], float]:
    """Compile one table on an ACL-like page: the problems (errors, boxes more than 1 pt too wide)
    and the smallest text size (pt) in the PDF."""
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
    if run.returncode and not problems:
        problems.append(f"pdflatex exited with {run.returncode}")
    pdf = doc.with_suffix(".pdf")
    sizes = font_sizes(pdf.read_bytes()) if pdf.exists() else []
    return problems, min(sizes, default=0.0) / TEX_PT_IN_BP
