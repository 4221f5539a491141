"""Exported LaTeX tables: escaping, labels, bold best values, layouts, and that every table the
analysis and validation code writes prints on ACL's page (11 pt Times, columns 7.7 cm) at its natural
size: no scaling, no box more than 1 pt too wide, no text under `\\footnotesize`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from support.latex_page import (
    DOCUMENT_CLASS,
    GEOMETRY,
    MIN_TEXT_PT,
    PDFLATEX,
    SHARED_PAGE,
    compile_problems,
    compile_table,
    needs_tex,
)
from support.synthetic_store import JUDGE, build_benchmark

from personalens_utils import analysis
from personalens_utils.labels.sheets import export_sheet
from personalens_utils.labels.synthetic import synthetic_sheets
from personalens_utils.measures import scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.latex import (
    MISSING,
    Block,
    Printed,
    escape,
    label_for,
    split_caption,
    table_latex,
)
from personalens_utils.outputs.tables import save_table
from personalens_utils.runstore.store import RunStore
from personalens_utils.validity import anchored


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
    columns = {"model": [f"model {i}" for i in range(6)]}
    columns |= {f"column {i}": ["99.94 [99.85, 100.00]"] * 6 for i in range(4)}
    wide = table_latex(pd.DataFrame(columns), "C.", "tab:w")
    assert "\\begin{table}" in narrow and "\\begin{table*}" in wide
    assert "adjustbox" not in wide and "scriptsize" not in wide and "resizebox" not in wide


def test_quotes_print_as_quotes():
    assert escape("the 'base' setting") == "the {\\textquoteleft}base{\\textquoteright} setting"
    assert escape('a "quoted" word') == "a {\\textquotedblleft}quoted{\\textquotedblright} word"
    assert escape("Cohen's κ").startswith("Cohen")  # an apostrophe stays one


def test_caption_above_the_table_and_the_note_below():
    latex = table_latex(pd.DataFrame({"x": [1]}), "Scores. Made offline.", "tab:c")
    assert latex.index("\\caption{Scores.}") < latex.index("\\begin{tabular}") < latex.index("Made offline.")
    assert "\\label{tab:c}\n\\smallskip\n" in latex  # the caption's last line clear of the top rule


def test_a_tie_bolds_nothing_and_the_note_says_where():
    frame = pd.DataFrame({"model": ["a", "b", "c"], "TCR": [90.0, 90.0, 80.0], "P": [2.0, 3.0, 1.0]})
    latex = table_latex(frame, "C.", "tab:t", best={"TCR": "max", "P": "max"})
    assert "\\textbf{3.0}" in latex and "\\textbf{90.0}" not in latex
    assert "none in TCR (the best value is tied)" in latex


def test_intervals_print_on_lines_below_their_value_at_the_same_size():
    cells = ["+0.12 [+0.01, +0.25], p=0.030", "2.53 [2.31, 2.75] (official 2.61)"]
    frame = pd.DataFrame({"model": ["a", "b"], "ΔP": cells})
    latex = table_latex(frame, "C.", "tab:i")
    assert "+0.12\\\\{}[+0.01, +0.25]\\\\{}p=0.030" in latex
    assert "2.53\\\\{}[2.31, 2.75]\\\\{}(official 2.61)" in latex


def test_a_table_with_a_few_rows_and_many_columns_is_turned_on_its_side():
    assistants = {f"assistant {i}": ["2.00 [1.50, 2.50]"] * 2 for i in range(5)}
    frame = pd.DataFrame({"Dimension": ["P", "TC"], **assistants})
    latex = table_latex(frame, "C.", "tab:s")
    assert "\\begin{table}" in latex
    assert " & P & TC \\\\" in latex and "assistant 4 & " in latex


def test_a_table_too_wide_for_the_page_is_split_repeating_its_row_labels():
    columns = {"model": ["model-a", "model-b", "model-c", "model-d", "model-e"]}
    columns |= {f"{kind} {dim}": ["99.94 [99.85, 100.00]"] * 5
                for kind in ("SD", "MD") for dim in ("TCR", "P", "Nat", "Coh", "X")}
    latex = table_latex(pd.DataFrame(columns), "C.", "tab:split")
    assert "\\begin{table*}" in latex
    assert latex.count("\\begin{tabular}{l") == 2 and latex.count("model-e") == 2
    assert "\\multicolumn{5}{c}{SD}" in latex and "\\cmidrule(lr){2-6}" in latex


def test_blocks_with_group_headings_and_a_legend():
    frame = pd.DataFrame({"model": ["A", "A", "B"], "backend": ["x", "y", "x"], "id": ["a1", "a2", "b1"]})
    latex = table_latex(Printed((Block(frame, group="model"),), legend="x: the x backend."), "C.", "tab:g")
    assert latex.count("\\textit{A}") == 1 and latex.count("\\textit{B}") == 1
    assert "x: the x backend." in latex


def test_a_column_too_wide_for_the_text_is_named():
    frame = pd.DataFrame({"name": ["a"], "text": ["word" * 60], "n": [1]})
    with pytest.raises(ValueError, match=r"table tab:long: column 'text' \(\d+ pt\) is too wide"):
        table_latex(frame.assign(other=[2.5] * 1, more=["x" * 10]), "C.", "tab:long")


def test_the_page_tables_are_checked_on_is_the_shared_acl_page():
    if not SHARED_PAGE.is_file():
        pytest.skip(f"no shared ACL page beside the checkout ({SHARED_PAGE}): the support's copy of its "
                    "geometry is checked against nothing")
    shared = SHARED_PAGE.read_text(encoding="utf-8").splitlines()
    assert DOCUMENT_CLASS in shared and GEOMETRY in shared and "\\usepackage{times}" in shared


PAPER_SHAPES = {
    "comparisons": pd.DataFrame({  # Table P3: a comparison named in words beside its interval
        "task": ["3.1", "3.2"], "metric": ["Accuracy", "RMSE"],
        "comparison": ["P-Conv - P-NonConv", "P-Conv - NP-Conv"],
        "claude-3-5-sonnet": ["+0.308 [+0.085, +0.532]", "-64.643 [-79.144, -41.159]"]}),
    "checks": pd.DataFrame({  # Table T1: long names of checks and verdicts beside numbers
        "judge": ["Claude 3.5 Sonnet (offline)"] * 2,
        "check": ["human agreement (Cohen's kappa, P, pooled over settings)", "known order (TCR)"],
        "verdict": ["not measured (missing material)", "pass"],
        **{name: ["0.698", "0.926"] for name in ("estimate", "ci_low", "ci_high")},
        "n": ["808", "808"], "n_needed": ["1200", ""]}),
    "preferences": pd.DataFrame({  # Table 9: long preference types beside six columns of counts
        "Domain": ["Messaging", "Messaging", "Services", "Services", "Rental Cars"],
        "Preference Type": ["Preferred Communication Style", "Frequent Contact", "Preferred Service Provider "
                            "Types", "Service Provider Gender Preference", "Additional Feature Preference"],
        "Is Categorical": ["yes", "no", "yes", "yes", "yes"],
        **{name: ["21", "--", "5", "3", "9"] for name in ("# Poss.", "# Gen.", "Evenness", "# Distinct",
                                                           "# Off-list")}}),
}
"""Frames shaped like the paper's tables with long text (the 10 pt page let them print too wide on ACL's);
Table 3's shape is `all_exported_tables`' own Table 3."""


@needs_tex
@pytest.mark.parametrize("shape", sorted(PAPER_SHAPES))
def test_tables_shaped_like_the_papers_fit_acls_page_at_small_size(shape, tmp_path):
    tex = tmp_path / f"{shape}.tex"
    tex.write_text(table_latex(PAPER_SHAPES[shape], "Caption. A note.", f"tab:{shape}"), encoding="utf-8")
    assert compile_problems(tex) == []
    assert "\n\\small\n" in tex.read_text(encoding="utf-8")  # fitted by layout, not by a smaller size


def test_a_long_text_column_wraps_across_the_page_rather_than_shrinking():
    latex = table_latex(PAPER_SHAPES["preferences"], "C.", "tab:wrap")
    assert "\\begin{table*}" in latex and "\n\\small\n" in latex
    wrapped = "\\begin{tabular}[t]{@{}l@{}}Preferred Communication\\\\{}Style\\end{tabular}"
    assert f"Messaging & {wrapped} & yes" in latex
    assert "Messaging & Frequent Contact & no" in latex  # a cell that fits stays on one line


def all_exported_tables(paper_outputs: Path, out: Path) -> None:
    """Every table of notebooks 02-06 (`write_outputs`, copied from `paper_outputs`), Table 11, J3, a table
    of symbols and the human-anchored tables (V1, synthetic annotators), under `out`."""
    shutil.copytree(paper_outputs / "out", out)
    store = RunStore(paper_outputs / "store")
    tidy = scores.load_scores(store, judge_model=JUDGE)
    analysis.table11().save(out, OutputId("table", 11, "models"))
    sanity = analysis.judge_sanity(tidy, ["model-a", "model-b", "model-c"], n_resamples=200)
    sanity.save(out, OutputId("table", "J3", "judge_sanity"))
    save_table(pd.DataFrame({"κ": [0.5], "95% CI": ["[0.1, 0.9]"], "n_items": [None]}), out, 99,
               "symbols", "Symbols: κ, Δ, ≥, 95%, # and _ in the 'base' setting. Second sentence.")
    sample = export_sheet(store, build_benchmark(), out.parent / "anchored", n=30, seed=1,
                                     where={"assistant_setting": "base"}, stratify_by="assistant_model")
    synthetic_sheets(sample, tidy)
    options = anchored.AnchorOptions(n_resamples=200)
    result = anchored.human_anchored(tidy, str(sample["sheet"].parent / "synthetic_*.csv"),
                                     manifest=sample["manifest"], options=options)
    result.table().save(out, OutputId("table", "V1", "human_anchored"))
    result.differences_table().save(out, OutputId("table", "V1", "anchored_differences"))
    result.plan(0.5).save(out, OutputId("table", "V1", "label_plan"))


@needs_tex
@pytest.mark.slow
def test_every_written_table_prints_at_its_natural_size_on_an_acl_page(paper_outputs, tmp_path):
    all_exported_tables(paper_outputs, tmp_path / "out")
    tables = sorted((tmp_path / "out" / "tables").glob("*.tex"))
    assert len(tables) >= 17
    failed, placed = {}, {}
    for tex in tables:
        text = tex.read_text(encoding="utf-8")
        assert "adjustbox" not in text and "resizebox" not in text and "scalebox" not in text, tex.name
        placed[tex.name] = re.search(r"\\begin\{(table\*?)\}", text).group(1)
        if problems := compile_problems(tex):
            failed[tex.name] = problems
    print("\n".join(f"{name}: {env}" for name, env in placed.items()))
    assert failed == {}
    assert "table" in placed.values() and "table*" in placed.values()


def test_the_page_check_sees_a_table_too_wide_and_text_too_small(tmp_path):
    if PDFLATEX is None:
        pytest.skip("pdflatex not found: install TeX Live (apt-get install texlive-latex-extra)")
    tex = tmp_path / "bad.tex"
    tex.write_text("\\begin{table}\\tiny\\begin{tabular}{l}" + "wide " * 80 + "\\end{tabular}\\end{table}\n")
    problems, smallest = compile_table(PDFLATEX, tex, tmp_path / "pages")
    assert any("overfull box" in p for p in problems) and smallest < MIN_TEXT_PT




def test_the_page_check_sees_a_float_taller_than_the_page(tmp_path):
    if PDFLATEX is None:
        pytest.skip("pdflatex not found: install TeX Live (apt-get install texlive-latex-extra)")
    tex = tmp_path / "tall.tex"
    rows = "".join(f"row {i} & {i} \\\\\n" for i in range(90))
    tex.write_text(f"\\begin{{table}}\\begin{{tabular}}{{lr}}\n{rows}\\end{{tabular}}\\end{{table}}\n")
    problems, _ = compile_table(PDFLATEX, tex, tmp_path / "pages")
    assert any("float too large for the page" in p for p in problems)
    assert any(re.fullmatch(r"float [\d.]+ pt tall, the text 702.8 pt", p) for p in problems)  # 24.7 cm


def long_frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame({
        "Assistant model": [f"model-{i // 8}" for i in range(rows)],
        "Dimension": [f"dimension {i % 8}" for i in range(rows)],
        "Mean": [f"{i / 7:.4f}" for i in range(rows)],
        "P": ["2.53 [2.31, 2.75]"] * rows,
    })


def test_a_table_taller_than_a_page_is_cut_into_floats_that_continue_it():
    latex = table_latex(long_frame(150), "Long. A note under it.", "tab:long-rows", best={"Mean": "max"})
    floats = latex.split("\\end{table")[:-1]
    assert len(floats) >= 3 and latex.count("\\caption{") == 1 and latex.count("\\label{") == 1
    assert all("Table~\\ref{tab:long-rows}, continued." in part for part in floats[1:])
    assert all(part.count("\\toprule") == 1 and "Assistant" in part for part in floats)
    assert "A note under it." in floats[-1] and "A note under it." not in floats[0]
    assert latex.count("dimension ") == 150 and latex.count("model-18 ") == 6  # every row once
    assert latex.count("\\textbf{") == 1
    sizes = [part.count(" \\\\\n") for part in floats]
    assert max(sizes) - min(sizes) <= 2  # the rows are shared out evenly
    assert "\\caption" not in table_latex(long_frame(12), "Short.", "tab:short").split("\\end{table")[1]


@needs_tex
def test_the_floats_of_a_long_table_each_fit_the_page(tmp_path):
    for rows, env in ((150, "table"), (400, "table")):
        tex = tmp_path / f"rows{rows}.tex"
        tex.write_text(table_latex(long_frame(rows), "Long.", f"tab:rows{rows}"), encoding="utf-8")
        assert f"\\begin{{{env}}}" in tex.read_text()
        assert compile_problems(tex) == []


def test_a_split_repeats_every_leading_column_that_names_a_row():
    keys = {"Assistant model": ["model-a", "model-a"], "Task type": ["SD", "SD"],
            "Dimension": ["Coherence (A)", "Naturalness (A)"]}
    numbers = {f"Number {i}": ["100.0000", "4.2653"] for i in range(14)}
    latex = table_latex(pd.DataFrame({**keys, **numbers}), "C.", "tab:keys")
    parts = re.findall(r"\\begin\{tabular\}\{(\w+)\}", latex)
    assert len(parts) >= 2 and all(spec.startswith("lll") for spec in parts)
    assert latex.count("Naturalness (A)") == len(parts)
