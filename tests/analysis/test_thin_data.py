"""Honest intervals on thin data (issue 29, part 3).

A table that promises 95% cluster-bootstrap intervals prints none where fewer than `MIN_CLUSTERS`
users stand behind a cell, or where every resample gave the same value, and its caption says why; a
paired difference over too few users gives the sign-flip p-value only; the judge report card's probe
checks say pass, fail or inconclusive against the smallest change that matters.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer
from support.synthetic_store import JUDGE, build_store, dialogue_record, judgment_record
from support.trust_design import Truth, simulate

from personalens_utils import analysis
from personalens_utils.measures import bootstrap, scores
from personalens_utils.measures.stats import ALL_EQUAL, FEW_CLUSTERS, MIN_CLUSTERS
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.records import Dialogue, Judgment, ProbeJudgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.trust import differences
from personalens_utils.trust.power import Design, PairedComponents, users_needed
from personalens_utils.trust.probes import ProfileSwap
from personalens_utils.trust.report_card import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    SMALLEST_EFFECT,
    CardError,
    CardSettings,
    JudgeRef,
    export_card,
    report_card,
)

INTERVAL = re.compile(r"\[\s*[-+]?\d+(?:\.\d+)?,\s*[-+]?\d+(?:\.\d+)?\s*\]")
"""A printed interval, "[1.37, 1.37]" or "[+0.10, +0.50]"."""


def _printed(result, tmp_path, slug) -> str:
    """The shown frame and the three exported files of a table, as one text."""
    paths = result.save(tmp_path, OutputId("table", 99, slug))
    files = "".join(paths[ext].read_text(encoding="utf-8") for ext in ("csv", "tex", "md"))
    return result.frame.to_csv() + files


@pytest.fixture(scope="module")
def one_user(tmp_path_factory):
    store = build_store(tmp_path_factory.mktemp("one") / "store", users=1)
    return scores.load_scores(store, judge_model=JUDGE)


def test_one_user_tables_print_means_without_intervals_and_say_why(one_user, tmp_path):
    tables = {"t3": analysis.table3(one_user), "t12": analysis.table12(one_user),
              "t4": analysis.table4(one_user, assistant_model="model-a"),
              "diff": differences.differences_table(one_user)}
    for slug, result in tables.items():
        printed = _printed(result, tmp_path, slug)
        assert not INTERVAL.search(printed), (slug, INTERVAL.search(printed))
        assert f"rest on {FEW_CLUSTERS}" in result.caption, slug
    data = tables["t3"].data
    assert data["mean"].notna().all() and data["ci_low"].isna().all() and data["ci_high"].isna().all()
    row = data.query("assistant_model == 'model-a' and task_type == 'SD' and dimension == 'personalization'")
    assert f"{row['mean'].item():.2f}" in set(tables["t3"].frame["SD P"])


def test_a_one_user_paired_difference_gives_no_contradictory_p_values(one_user):
    frame = simulate(Truth(), users=1, tasks=8, repeats=1, judge_samples=1, effects={"A": 0.0, "B": 1.0},
                     seed=3)
    result = bootstrap.paired_difference(frame, "B", "A")
    assert result.difference.estimate > 0 and result.p_permutation == 1.0
    assert np.isnan(result.p_bootstrap)  # it was 0.0005: "certain" beside a permutation p of 1
    assert np.isnan(result.difference.low) and result.difference.withheld == FEW_CLUSTERS
    pairs = bootstrap.pairwise_differences(frame)
    assert pairs["p_bootstrap"].isna().all() and (pairs["p_permutation"] == 1.0).all()
    t4 = analysis.table4(one_user, assistant_model="model-a").data
    compared = t4[t4["p_permutation"].notna()]
    assert len(compared) and compared["p_bootstrap"].isna().all()


def test_all_equal_scores_give_no_zero_width_interval(tmp_path):
    tidy = scores.load_scores(build_store(tmp_path / "store", users=MIN_CLUSTERS + 2), judge_model=JUDGE)
    user_dims = tidy["dimension"].isin(["naturalness_user", "coherence_user"])
    tidy.loc[user_dims, ["score", "strict_score", "official_score"]] = 5.0
    result = analysis.table12(tidy)
    printed = _printed(result, tmp_path, "equal")
    assert not INTERVAL.search(printed) and set(result.frame["SD Nat. (U)"]) == {"5.00"}
    assert ALL_EQUAL in result.caption and FEW_CLUSTERS not in result.caption
    spread = analysis.table3(tidy)  # enough users, scores that differ: every interval stands
    assert spread.data["ci_low"].notna().all() and "estimate alone" not in spread.caption
    interval = bootstrap.cluster_ci([3.0] * 40, np.arange(40) % 20)
    assert interval.estimate == 3.0 and np.isnan(interval.low) and interval.withheld == ALL_EQUAL
    frame = simulate(Truth(), users=MIN_CLUSTERS + 2, tasks=2, repeats=1, judge_samples=1)
    same = pd.concat([frame, frame.assign(assistant="B", score=frame["score"] + 0.5)])
    shifted = bootstrap.paired_difference(same, "B", "A")
    assert shifted.difference.estimate == pytest.approx(0.5) and shifted.difference.withheld == ALL_EQUAL
    assert np.isnan(shifted.p_bootstrap) and shifted.p_permutation < 0.01



def test_figures_draw_no_interval_where_table3_prints_none(one_user, tmp_path):
    """Figures 4 and 5 drew dialogue-bootstrap error bars and bands at any number of users; they follow
    Table 3's rule now: below MIN_CLUSTERS users the means alone, NaN bounds and a caption saying why."""
    thin = {"figure4": analysis.figure4(one_user, assistant_model="model-a"),
            "figure5": analysis.figure5(scores.turn_frame(one_user), assistant_model="model-a")}
    for name, result in thin.items():
        data = result.data
        assert len(data) and data["mean"].notna().all(), name
        assert data["ci_low"].isna().all() and data["ci_high"].isna().all(), name
        assert f"would rest on {FEW_CLUSTERS} (1)" in result.caption and "95% bootstrap" not in result.caption
    assert not _error_bars(thin["figure4"].figure)
    assert not thin["figure5"].figure.axes[0].collections  # no band around any curve
    enough = scores.load_scores(build_store(tmp_path / "store", users=MIN_CLUSTERS), judge_model=JUDGE)
    figure4 = analysis.figure4(enough, assistant_model="model-a")
    assert figure4.data["ci_low"].notna().all() and "with 95% bootstrap intervals" in figure4.caption
    assert FEW_CLUSTERS not in figure4.caption and _error_bars(figure4.figure)


def _error_bars(figure) -> list[ErrorbarContainer]:
    return [c for ax in figure.axes for c in ax.containers if isinstance(c, ErrorbarContainer)]


# -- the report card's three verdicts ---------------------------------------------------------------------

CHANGES = {
    "pass": [-1] * 30 + [0] * 10,  # P drops under the swap: interval below 0
    "fail": [-1, 0, 1, 0] * 50,  # 200 dialogues, no drop: the interval rules out a drop of 0.25
    "inconclusive": [2] * 5 + [-2] * 4 + [0] * 7,  # 16 dialogues, +0.125: holds 0 and -0.25 alike
}


def _designed_store(root, changes: list[int]) -> RunStore:
    """One dialogue a change: its P judged 2 (3 where the change is negative), and judged again under
    the profile swap with the change added; TC judged 1 both times."""
    store = RunStore(root)
    dialogues, judgments, probes = [], [], []
    swap = SimpleNamespace(name=ProfileSwap.name)
    for i, change in enumerate(changes):
        dlg = dialogue_record(i + 1, "SD-Alarm-task-1", ["Alarm"], "model-a", "base", 2)
        dialogues.append(Dialogue.from_json(dlg))
        base = 3.0 if change < 0 else 2.0
        for dimension, before, after in (("personalization", base, base + change),
                                         ("task_completion", 1.0, 1.0)):
            judgments.append(Judgment.from_json(judgment_record(dlg["id"], dimension, before)))
            probed = Judgment.from_json(judgment_record(dlg["id"], dimension, after))
            probes.append(ProbeJudgment.of(probed, swap.name, f"profile_swap/v1/donor={i + 2}"))
    store.extend(dialogues)
    store.extend(judgments)
    store.extend(probes)
    return store


def test_the_card_passes_fails_or_is_inconclusive_with_the_dialogues_needed(tmp_path):
    judge = JudgeRef(JUDGE, "offline")
    rows = {}
    for name, changes in CHANGES.items():
        card = report_card(_designed_store(tmp_path / name, changes), [judge],
                           settings=CardSettings(n_resamples=1000))
        rows[name] = card.data.set_index("check").loc["profile counterfactual (P drops)"]
        assert card.data.set_index("check").loc["profile counterfactual (TCR holds)", "verdict"] == PASS
    assert {name: row["verdict"] for name, row in rows.items()} == {
        "pass": PASS, "fail": FAIL, "inconclusive": INCONCLUSIVE}
    assert f"drop of {SMALLEST_EFFECT:g}" in rows["fail"]["note"] and INCONCLUSIVE in card.caption
    thin = rows["inconclusive"]
    assert thin["estimate"] == pytest.approx(0.125) and thin["n"] == 16
    assert thin["ci_low"] < -SMALLEST_EFFECT and thin["ci_high"] > 0
    spread = float(np.var(CHANGES["inconclusive"], ddof=1))
    assert thin["n_needed"] == users_needed(PairedComponents(spread, 0, 0, 0), SMALLEST_EFFECT, Design(2, 1))
    normal_n = (1.959964 + 0.841621) ** 2 * spread / SMALLEST_EFFECT**2  # the z approximation, a bit below
    assert normal_n < thin["n_needed"] < 1.1 * normal_n
    assert f"about {thin['n_needed']} dialogues" in thin["note"]
    assert pd.isna(rows["pass"]["n_needed"]) and pd.isna(rows["fail"]["n_needed"])
    paths = export_card(card, tmp_path, OutputId("table", "T1", "judge_report_card"))
    assert "n_needed" in pd.read_csv(paths["csv"]).columns


@pytest.mark.parametrize("field", ["smallest_effect", "tc_margin"])
def test_a_smallest_change_that_is_not_positive_is_refused(field):
    with pytest.raises(CardError, match=f"{field}.*must be positive"):
        CardSettings(**{field: 0.0})
