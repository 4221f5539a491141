"""The one result type of every table-making function: frame, caption, source, long data."""

from __future__ import annotations

import pandas as pd
import pytest
from test_analysis_support import JUDGE, build_store

from personalens_utils import analysis
from personalens_utils.analysis import scores
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.tables import Source, TableResult, read_table


def test_source_sorts_its_names_and_says_where_from():
    source = Source.of("run store store/", 12, "judged dialogues", {"offline", "anthropic"}, ["m2", "m1"])
    assert source.backends == ("anthropic", "offline") and source.models == ("m1", "m2")
    assert source.describe() == (
        "Source: run store store/, 12 judged dialogues; models m1, m2; backend anthropic, offline."
    )


def test_save_writes_the_frame_and_save_data_the_long_form(tmp_path):
    result = TableResult(
        pd.DataFrame({"Model": ["a"], "TCR": ["90.00 [80.00, 95.00]"]}),
        "Caption.",
        Source.of("x/", 1, "dialogues"),
        pd.DataFrame({"model": ["a"], "mean": [90.0]}),
    )
    shown = result.save(tmp_path, 3, "t")
    long = result.save_data(tmp_path, 3, "t_data", note=" Every number.")
    assert read_table(shown["csv"]).columns.tolist() == ["Model", "TCR"]
    assert read_table(long["csv"])["mean"].tolist() == [90.0]
    assert long["csv"].read_text().splitlines()[0] == "# Caption. Every number."
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
