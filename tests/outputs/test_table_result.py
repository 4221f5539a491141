"""The one result type of every table-making function: frame, caption, source, long data."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from support.synthetic_store import JUDGE, build_store

from personalens_utils import analysis
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.measures import scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.tables import Source, TableResult, read_caption, read_table


def test_source_sorts_its_names_and_says_where_from():
    source = Source.of("run store store/", 12, "judged dialogues", {"offline", "anthropic"}, ["m2", "m1"])
    assert source.backends == ("anthropic", "offline") and source.models == ("m1", "m2")
    assert source.describe() == (
        "Source: run store store/, 12 judged dialogues; models m1, m2; backend anthropic, offline; "
        "run card store/run_card.json."
    )
    offline = Source.of("store/", 3, "judged dialogues", {"offline"}, ["claude-3-5-sonnet-20241022"])
    assert offline.describe() == ("Source: store/, 3 judged dialogues; offline rules in the roles of "
                                  "claude-3-5-sonnet-20241022; backend offline.")


def test_markdown_and_latex_exports_leave_undefined_cells_blank(tmp_path):
    frame = pd.DataFrame({"Model": ["a", None], "n": pd.array([1, None], dtype="Int64"), "P": [1.5, None]})
    result = TableResult(frame, "Caption.", Source.of("x/", 2, "dialogues"))
    paths = result.save(tmp_path, OutputId("table", 9, "blank"))
    for ext in ("md", "tex"):
        text = paths[ext].read_text(encoding="utf-8")
        assert "<NA>" not in text and "nan" not in text.lower() and "None" not in text, ext


def test_save_writes_the_frame_and_save_data_the_long_form(tmp_path):
    result = TableResult(
        pd.DataFrame({"Model": ["a"], "TCR": ["90.00 [80.00, 95.00]"]}),
        "Caption.",
        Source.of("x/", 1, "dialogues"),
        pd.DataFrame({"model": ["a"], "mean": [90.0]}),
    )
    shown = result.save(tmp_path, OutputId("table", 3, "t"))
    long = result.save_data(tmp_path, OutputId("table", 3, "t_data"), note=" Every number.")
    assert read_table(shown["csv"]).columns.tolist() == ["Model", "TCR"]
    assert read_table(long["csv"])["mean"].tolist() == [90.0]
    assert pd.read_csv(long["csv"]).columns.tolist() == ["model", "mean"]  # plain: the header comes first
    assert read_caption(long["csv"]) == "Caption. Every number."
    assert result.describe() == "Caption. Source: x/, 1 dialogues."


@pytest.fixture(scope="module")
def tidy(tmp_path_factory) -> pd.DataFrame:
    return scores.load_scores(build_store(tmp_path_factory.mktemp("run") / "my-store"), judge_model=JUDGE)


def test_score_tables_name_their_store_models_and_the_offline_backend(tidy):
    for result in (
        analysis.table3(tidy),
        analysis.table12(tidy),
        analysis.table4(tidy, assistant_model="model-a"),
        analysis.judge_scores(tidy),
    ):
        assert isinstance(result, TableResult)
        assert result.source.origin == "run store my-store/"
        assert result.source.backends == ("offline",) and OFFLINE_LABEL in result.caption
        assert JUDGE in result.source.models and result.source.unit == "judged dialogues"
    base = tidy[tidy["assistant_setting"] == "base"]
    assert analysis.table3(tidy).source.n == base["dialogue_id"].nunique()
    assert analysis.table3(tidy).source.models == ("judge-1", "model-a", "model-b", "model-c", "user-sim")


WRAPPED = re.compile(r"\\begin\{tabular\}\[t\]\{@\{\}l@\{\}\}(.*?)\\end\{tabular\}")
"""A text cell the LaTeX writer wrapped onto stacked lines (to fit ACL's page)."""


def _as_read(printed: str) -> str:
    """A table's text with each wrapped cell on one line again, as a reader reads it."""
    return WRAPPED.sub(lambda cell: cell.group(1).replace("\\\\{}", " "), printed)


def test_long_score_tables_print_names_and_their_csv_keeps_ids(tidy, tmp_path):
    table3, table4 = analysis.table3(tidy), analysis.table4(tidy, assistant_model="model-a")
    written = [table3.save_data(tmp_path, OutputId("table", 3, "data")),
               table4.save_data(tmp_path, OutputId("table", 4, "data")),
               analysis.judge_scores(tidy).save(tmp_path, OutputId("table", "J2", "judge_scores"))]
    for paths in written:
        csv = paths["csv"].read_text(encoding="utf-8")
        assert "task_completion" in csv and "mean,ci_low,ci_high" in csv, paths["csv"].name
        for ext in ("tex", "md"):
            printed = _as_read(paths[ext].read_text(encoding="utf-8"))
            assert "Task Completion" in printed and "CI low" in printed, paths[ext].name
            ids = re.findall(r"task.?.?_completion|coherence.?.?_assistant|ci.?.?_low|n.?.?_missing|"
                             r"assistant.?.?_model", printed)
            assert ids == [], paths[ext].name
    assert "Coherence (A)" in written[0]["md"].read_text(encoding="utf-8")
    assert "(Holm)" in written[1]["tex"].read_text(encoding="utf-8")


def test_table4_long_form_prints_its_pair_counts_as_whole_numbers(tidy, tmp_path):
    paths = analysis.table4(tidy, assistant_model="model-a").save_data(tmp_path, OutputId("table", 4, "data"))
    pairs = read_table(paths["csv"])["n_pairs"].dropna()
    assert len(pairs) and (pairs == pairs.round()).all()
    lines = [line.split("|") for line in paths["md"].read_text(encoding="utf-8").splitlines()
             if line.startswith("|")]
    column = [cell.strip() for cell in lines[0]].index("Pairs")
    counts = [line[column].strip() for line in lines[2:] if line[column].strip()]
    assert counts and all(c.isdigit() for c in counts), counts
