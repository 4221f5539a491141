"""The robustness tables (issue 41, R1-R5) recover what a synthetic grid plants."""

from __future__ import annotations

import numpy as np
import pytest

from personalens_utils.measures.stats import FEW_CLUSTERS, Interval
from personalens_utils.robustness import (
    condition_table,
    kendalls_w,
    pairwise_order_table,
    pass_k_table,
    stress_gap_table,
    variance_split,
    w_text,
)
from personalens_utils.robustness.ordering import kendall_w_of_ranks
from personalens_utils.robustness.reliability import NEEDS_REPEATS, pass_hat_k
from personalens_utils.robustness.stress import stress_gaps

P = "personalization"


def test_r1_has_a_row_per_condition_and_assistant_naming_roles(grid):
    table = condition_table(grid())
    assert len(table.frame) == 4 * 3  # 2 styles x 2 judges, 3 assistants
    assert {"SD TCR", "SD P"} <= set(table.frame.columns)
    assert "sim (cooperative, reticent)" in table.caption and "judge-a, judge-b" in table.caption
    assert "cluster bootstrap over users" in table.caption
    assert table.frame["SD P"].str.contains(r"\[").all()


def test_r4_recovers_the_planted_gap_and_spares_the_others(grid):
    gaps = stress_gaps(grid(), n_resamples=500)
    p = gaps[(gaps["dimension"] == P) & (gaps["judge_model"] == "judge-a")].set_index("assistant_model")
    hit, spared = p.loc["ref-all"], p.loc["ref-mid"]
    assert hit["gap_mean"] == pytest.approx(-0.5, abs=0.1) and hit["gap_ci_high"] < 0
    assert spared["gap_ci_low"] <= 0 <= spared["gap_ci_high"]
    assert "Δ P" in stress_gap_table(grid()).frame.columns


def test_r2_lists_every_pair_and_counts_the_planted_flip(grid):
    table = pairwise_order_table(grid(), P, n_resamples=300)
    assert len(table.frame) == 3
    row = table.frame.set_index("Pair").loc["ref-all vs ref-mid"]
    assert row["First higher"] == "2/4"
    assert row["Order differs from reference in"].count("reticent") == 2
    flips = table.frame.set_index("Pair")["Order differs from reference in"]
    assert flips["ref-dialogue vs ref-mid"] == "none"
    assert "Kendall's W" in table.caption


def test_kendalls_w_is_one_when_conditions_agree_and_lower_when_one_flips(grid):
    agree = kendalls_w(grid(styles=("cooperative",)), P, n_resamples=300)
    flipped = kendalls_w(grid(), P, n_resamples=300)
    assert agree.estimate == pytest.approx(1.0)
    assert flipped.estimate < 1.0
    assert flipped.n == 12


def test_kendalls_w_matches_the_textbook_formula_with_ties():
    means = np.array([[3.0, 2.0, 1.0], [3.0, 1.0, 1.0], [1.0, 2.0, 3.0]])
    # ranks: [3,2,1], [3,1.5,1.5], [1,2,3]; sums 7, 5.5, 5.5; S = 1.5; ties: one pair, T = 6
    assert kendall_w_of_ranks(means) == pytest.approx(12 * 1.5 / (9 * 24 - 3 * 6))


def test_r3_parts_sum_to_the_total_and_the_judge_offset_shows(grid):
    long = variance_split(grid()).data
    for _, one in long.groupby("dimension"):
        parts = one[one["component"] != "total"]
        total = one.set_index("component").loc["total"]
        assert parts["variance"].sum() == pytest.approx(total["variance"])
        assert parts["share"].sum() == pytest.approx(1.0)
    p = long[long["dimension"] == P].set_index("component")["share"]
    assert p["judge"] > 0.05 and p["judge"] > p["assistant × judge"]
    tc = long[long["dimension"] == "task_completion"].set_index("component")["share"]
    assert tc["judge"] == pytest.approx(0.0, abs=1e-9)  # the judges agree on completion


def test_pass_hat_k_is_the_unbiased_estimate():
    got = pass_hat_k(np.array([3, 3, 3, 2]), np.array([2, 2, 2, 2]), 1)
    assert got[:3] == pytest.approx([2 / 3] * 3)
    assert pass_hat_k(np.array([3]), np.array([2]), 2)[0] == pytest.approx(1 / 3)
    assert pass_hat_k(np.array([3]), np.array([2]), 3)[0] == 0.0
    assert np.isnan(pass_hat_k(np.array([2]), np.array([2]), 3)[0])


def test_r5_averages_scenarios_and_needs_repeats(grid):
    tidy = grid(repeats=3)
    table = pass_k_table(tidy)
    assert {"pass^1", "pass^2", "pass^3"} <= set(table.frame.columns)
    data = table.data
    one = data[(data["assistant_model"] == "ref-all") & (data["condition"] == data["condition"].iloc[0])]
    assert list(one["mean"]) == sorted(one["mean"], reverse=True)  # pass^k falls with k
    assert NEEDS_REPEATS in pass_k_table(grid()).caption


def test_r5_matches_hand_counts_on_one_scenario(grid):
    tidy = grid(users=1, scenarios=1, repeats=3, styles=("cooperative",))
    tidy = tidy[(tidy["assistant_model"] == "ref-all") & (tidy["judge_model"] == "judge-a")].copy()
    completion = tidy["dimension"] == "task_completion"
    tidy.loc[completion, "score"] = np.array([1.0, 1.0, 0.0])  # samples 0, 1, 2: two of three succeed
    data = pass_k_table(tidy).data
    assert list(data["mean"]) == pytest.approx([100 * 2 / 3, 100 / 3, 0.0])


def test_intervals_are_withheld_below_ten_users(grid):
    few = grid(users=6)
    table = condition_table(few)
    assert not table.frame["SD P"].str.contains(r"\[").any()
    assert FEW_CLUSTERS in table.caption
    assert stress_gaps(few, n_resamples=200)["gap_ci_low"].isna().all()
    assert np.isnan(kendalls_w(few, P, n_resamples=200).low)
    assert w_text(kendalls_w(few, P, n_resamples=200)).endswith(f"(no interval: {FEW_CLUSTERS})")
    assert f"(no interval: {FEW_CLUSTERS})" in pairwise_order_table(few, P, n_resamples=200).caption
    assert w_text(Interval(0.8, 0.7, 0.9, 12, 0.95)) == "0.80 [0.70, 0.90] (95%, resampling users)"
    assert FEW_CLUSTERS in pass_k_table(grid(users=6, repeats=2)).caption


def test_a_frame_without_styles_is_the_cooperative_user(grid):
    tidy = grid(styles=("cooperative",)).drop(columns="user_style")
    conditions = condition_table(tidy).frame["Condition"]
    assert conditions.str.contains("(cooperative)", regex=False).all()
