"""Exported LaTeX tables: escaping, labels, bold best values, and that every table the analysis and
validation code writes compiles with pdflatex without a box wider than the text."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from test_analysis_support import build_store
from test_determinism import write_outputs

from personalens_utils.latex import (
    MISSING,
    escape,
    label_for,
    split_caption,
    standalone_document,
    table_latex,
)
from personalens_utils.tables import save_table

PDFLATEX = shutil.which("pdflatex")
needs_tex = pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex not found: install TeX Live (apt-get install texlive-latex-extra); .ci/run does this",
)


def test_special_characters_and_symbols_are_escaped():
    assert escape("TCR, %") == "TCR, {\\%}"
    assert escape("# Dial") == "{\\#} Dial"
    assert escape("a_b") == "a{\\_}b"
    assert "\\kappa" in escape("Cohen's κ") and "\\Delta" in escape("ΔP")
    assert escape("-0.25") == "{\\ensuremath{-}}0.25"
    assert escape("Llama-3.1") == "Llama-3.1"


def test_missing_and_boolean_cells_print_as_a_reader_expects():
    frame = pd.DataFrame(
        {"name": ["a", "b", "c"], "value": [1.5, None, float("nan")], "ok": [True, False, True]}
    )
    latex = table_latex(frame, "Caption.", "tab:x")
    assert "<NA>" not in latex and "nan" not in latex and "True" not in latex
    assert f"b & {MISSING} & no" in latex


def test_labels_are_unique_per_number_and_slug():
    assert label_for(6, "demographics") != label_for(7, "demographics")
    assert label_for("J2", "judge_scores") == "tab:j2-judge-scores"


def test_the_caption_is_the_first_sentence_and_the_rest_a_note():
    head, note = split_caption("Scores per model. Made with the offline backend (rule-based).")
    assert head == "Scores per model."
    assert note == "Made with the offline backend (rule-based)."
    latex = table_latex(pd.DataFrame({"x": [1]}), "Scores per model. Made with the offline backend.", "tab:y")
    assert "\\caption{Scores per model.}" in latex and "offline backend" in latex


def test_best_values_are_bold_and_a_wrong_column_is_named():
    frame = pd.DataFrame(
        {"model": ["a", "b"], "P": ["2.10 [2.0, 2.2]", "3.40 [3.3, 3.5]"], "err": [0.3, 0.1]}
    )
    latex = table_latex(frame, "C.", "tab:z", best={"P": "max", "err": "min"})
    assert "\\textbf{\\begin{tabular}[t]{@{}r@{}}3.40" in latex
    assert "\\textbf{0.1}" in latex and "\\textbf{0.3}" not in latex
    with pytest.raises(ValueError, match="no column named \\['Q'\\]"):
        table_latex(frame, "C.", "tab:z", best={"Q": "max"})


def test_a_wide_table_spans_both_columns_and_a_narrow_one_does_not():
    narrow = table_latex(pd.DataFrame({"a": [1], "b": [2]}), "C.", "tab:n")
    columns = {f"column {i}": ["99.94 [99.85, 100.00]"] for i in range(8)}
    wide = table_latex(pd.DataFrame(columns), "C.", "tab:w")
    assert "\\begin{table}" in narrow and "\\begin{table*}" in wide


def compile_problems(tex: Path) -> list[str]:
    """pdflatex problems of one table in a minimal article: errors and boxes wider than the text."""
    doc = tex.with_name(tex.stem + "_doc.tex")
    doc.write_text(standalone_document([tex.read_text(encoding="utf-8")]), encoding="utf-8")
    run = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=doc.parent, capture_output=True, text=True, timeout=120,
    )
    log = doc.with_suffix(".log").read_text(errors="replace")
    problems = [line for line in log.splitlines() if line.startswith("!")]
    problems += re.findall(r"Overfull \\hbox \([\d.]+pt too wide\)", log)
    if run.returncode and not problems:
        problems.append(f"pdflatex exited with {run.returncode}")
    return problems


@needs_tex
@pytest.mark.slow
@pytest.mark.xdist_group("determinism")
def test_every_written_table_compiles_without_overfull_boxes(tmp_path):
    build_store(tmp_path / "store")
    write_outputs(tmp_path / "store", tmp_path / "out")
    save_table(pd.DataFrame({"κ": [0.5], "95% CI": ["[0.1, 0.9]"], "n_items": [None]}), tmp_path / "out", 99,
               "symbols", "Symbols: κ, Δ, ≥, 95%, # and _. Second sentence.")
    tables = sorted((tmp_path / "out" / "tables").glob("*.tex"))
    assert len(tables) >= 15
    failed = {tex.name: problems for tex in tables if (problems := compile_problems(tex))}
    assert failed == {}
