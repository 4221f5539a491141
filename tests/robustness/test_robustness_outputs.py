"""The robustness tables print at their natural size on ACL's page, and the ranking figure is drawn at
the column width, marked offline when the offline backend made its numbers."""

from __future__ import annotations

import pytest
from support.figures import overlaps_and_overflows
from support.latex_page import needs_tex, unfit_tables

from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.plots import COLUMN_WIDTH_IN, OFFLINE_NOTE
from personalens_utils.robustness import (
    condition_table,
    pairwise_order_table,
    pass_k_table,
    ranking_figure,
    stress_gap_table,
    variance_split,
)

P = "personalization"


@needs_tex
@pytest.mark.slow
def test_every_robustness_table_fits_an_acl_page(grid, tmp_path):
    tidy = grid(repeats=2)
    tables = {"r1": condition_table(tidy), "r2": pairwise_order_table(tidy, P, n_resamples=200),
              "r3": variance_split(tidy), "r4": stress_gap_table(tidy), "r5": pass_k_table(tidy)}
    written = [table.save(tmp_path, OutputId("table", 41, slug))["tex"] for slug, table in tables.items()]
    assert unfit_tables(written, tmp_path / "pages") == {}


def test_the_ranking_figure_is_column_wide_and_crosses_where_planted(grid):
    result = ranking_figure(grid(), P)
    assert result.figure.get_figwidth() == pytest.approx(COLUMN_WIDTH_IN)
    assert overlaps_and_overflows(result.figure) == []
    ranks = result.data.set_index(["condition", "assistant_model"])["rank"]
    assert ranks["sim (cooperative) / judge-a", "ref-all"] == 1
    assert ranks["sim (reticent) / judge-a", "ref-all"] == 2
    assert not result.figure.get_suptitle()


def test_the_ranking_figure_says_offline(grid):
    tidy = grid().assign(user_backend="offline", user_model_id="sim", judge_backend="offline",
                         judge_model_id="j", assistant_backend="offline", assistant_model_id="a")
    result = ranking_figure(tidy, P)
    assert result.figure.get_suptitle() == OFFLINE_NOTE
    assert "demonstration" in result.caption
