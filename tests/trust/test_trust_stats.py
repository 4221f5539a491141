"""How far to trust a number (issue 22, parts 2-4): cluster-bootstrap intervals, the variance
decomposition and the power planner, checked against simulated designs whose variance components
are known (`support.trust_design`)."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from support.figures import overlaps_and_overflows
from support.latex_page import PDFLATEX, compile_problems
from support.pdf import POINTS_PER_INCH, font_sizes, font_subtypes, page_size, pdf_text
from support.synthetic_store import JUDGE, build_store
from support.trust_design import KNOWN, PRICED, Truth, simulate, usage_table

from personalens_utils import analysis
from personalens_utils.llm import registry
from personalens_utils.llm.types import Usage
from personalens_utils.measures import bootstrap, scores
from personalens_utils.measures.design import ARM, SCORE, USER, DesignError, design_frame
from personalens_utils.measures.stats import bootstrap_ci
from personalens_utils.outputs import plots
from personalens_utils.trust import differences, power, variance


def width(interval) -> float:
    return interval.high - interval.low


# -- cluster bootstrap --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_cluster_intervals_are_wider_than_naive_ones_when_users_differ(seed):
    frame = simulate(Truth(user=1.0, task=0.3, sample=0.0, judge=0.2), users=40, tasks=12, repeats=1,
                     judge_samples=1, seed=seed)
    clustered = bootstrap.cluster_ci(frame[SCORE], frame[USER], seed=seed)
    naive = bootstrap_ci(frame[SCORE], seed=seed)
    assert clustered.estimate == pytest.approx(naive.estimate)
    # design effect 1 + (T - 1) ICC = 1 + 11 * 1/1.5: intervals about 2.9 times as wide
    assert width(clustered) > 2 * width(naive)
    true_se = np.sqrt(1.0 / 40 + 0.5 / (40 * 12))
    assert width(clustered) == pytest.approx(2 * 1.96 * true_se, rel=0.3)


def test_cluster_intervals_equal_naive_ones_within_noise_when_users_do_not_differ():
    ratios = []
    for seed in range(6):
        frame = simulate(Truth(user=0.0, task=1.0, sample=0.0, judge=0.0), users=40, tasks=12, repeats=1,
                         judge_samples=1, seed=seed)
        ratios.append(width(bootstrap.cluster_ci(frame[SCORE], frame[USER], seed=seed))
                      / width(bootstrap_ci(frame[SCORE], seed=seed)))
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.08)
    assert all(0.75 < r < 1.3 for r in ratios), ratios


def test_cluster_intervals_are_seeded_and_ignore_row_order():
    frame = simulate(Truth(), users=15, tasks=4, repeats=2, judge_samples=2, seed=1)
    shuffled = frame.sample(frac=1.0, random_state=3)
    first = bootstrap.cluster_ci(frame[SCORE], frame[USER], seed=5)
    assert bootstrap.cluster_ci(shuffled[SCORE], shuffled[USER], seed=5) == first
    assert bootstrap.cluster_ci(frame[SCORE], frame[USER], seed=6) != first
    with pytest.raises(ValueError, match="NaN"):
        bootstrap.cluster_ci([1.0, np.nan], [1, 2])


def test_paired_differences_average_repeats_and_resample_users():
    frame = simulate(Truth(user=1.0, task=0.5, sample=0.3, judge=0.2, user_arm=0.1, task_arm=0.1), users=30,
                     tasks=6, repeats=2, judge_samples=2, effects={"A": 0.0, "B": 0.5}, seed=2)
    means = frame.groupby([ARM, USER, "task"])[SCORE].mean().unstack(ARM)
    result = bootstrap.paired_difference(frame, "B", "A")
    assert result.difference.estimate == pytest.approx((means["B"] - means["A"]).mean())
    assert result.difference.n == len(means)
    assert result.difference.low > 0 and result.p_permutation < 0.01
    pairs = bootstrap.pairwise_differences(frame.assign(**{ARM: frame[ARM].map({"A": "A", "B": "B"})}))
    assert pairs[["treatment", "control"]].values.tolist() == [["B", "A"]]
    assert pairs["difference"].iloc[0] == pytest.approx(result.difference.estimate)
    null = bootstrap.paired_difference(frame.assign(**{ARM: "A"}).pipe(
        lambda f: pd.concat([f, f.assign(**{ARM: "C"})])), "C", "A")
    assert null.difference.estimate == 0 and null.p_permutation == 1.0


@pytest.fixture(scope="module")
def tidy(tmp_path_factory):
    return scores.load_scores(build_store(tmp_path_factory.mktemp("trust") / "store"), judge_model=JUDGE)


def test_tables_3_4_12_resample_users_and_say_so(tidy):
    t3 = analysis.table3(tidy)
    assert "cluster bootstrap over users" in t3.caption
    part = tidy[(tidy["assistant_model"] == "model-b") & (tidy["assistant_setting"] == "base")
                & (tidy["task_type"] == "SD") & (tidy["dimension"] == "personalization")]
    part = part.dropna(subset=["score"])
    row = t3.data.query("assistant_model == 'model-b' and task_type == 'SD' "
                        "and dimension == 'personalization'")
    expected = bootstrap.cluster_ci(part["score"], part["user_id"])
    assert (row["ci_low"].item(), row["ci_high"].item()) == (expected.low, expected.high)
    assert "cluster bootstrap over users" in analysis.table12(tidy).caption
    t4 = analysis.table4(tidy, assistant_model="model-a")
    assert "flipping each user's sign" in t4.caption
    data = t4.data.set_index(["assistant_setting", "task_type", "dimension"])
    frame = design_frame(tidy[(tidy["assistant_model"] == "model-a") & (tidy["task_type"] == "SD")],
                         "personalization", arm="assistant_setting")
    paired = bootstrap.paired_difference(frame, "base+I", "base")
    assert data.loc[("base+I", "SD", "personalization"), "diff_ci_low"] == paired.difference.low


# -- variance decomposition -----------------------------------------------------------------------

TRUTH = Truth(user=1.0, task=0.5, sample=0.3, judge=0.2)
TRUE = {"user": TRUTH.user, "task": TRUTH.task, "simulation sample": TRUTH.sample,
        "judge sample": TRUTH.judge}
TOLERANCE = {"user": 0.1, "task": 0.05, "simulation sample": 0.05, "judge sample": 0.05}
"""Relative error allowed per component, on the mean of five simulated runs of 300 users x 8 tasks x 3
samples x 3 judge samples. The user variance rests on 299 degrees of freedom per run (standard error
about 9% in one run, 4% over five); the inner ones on thousands. Each single run must be within 2.5
times these."""


def test_the_decomposition_recovers_known_components():
    runs = []
    for seed in range(5):
        frame = simulate(TRUTH, users=300, tasks=8, repeats=3, judge_samples=3, seed=seed)
        found = variance.decompose_design(frame).set_index("component")
        assert found["share"].sum() == pytest.approx(1.0)
        assert found.loc["user", "share"] == pytest.approx(found.loc["user", "variance"]
                                                           / found["variance"].sum())
        for name, value in TRUE.items():
            assert found.loc[name, "variance"] == pytest.approx(value, rel=2.5 * TOLERANCE[name]), name
        runs.append(found["variance"])
    mean = pd.concat(runs, axis=1).mean(axis=1)
    for name, value in TRUE.items():
        assert mean[name] == pytest.approx(value, rel=TOLERANCE[name]), name


def test_an_unbalanced_design_is_recovered_too():
    frame = simulate(TRUTH, users=300, tasks=8, repeats=3, judge_samples=3, seed=12)
    rng = np.random.default_rng(0)
    frame = frame[rng.random(len(frame)) > 0.3]  # a third of the judgments lost at random
    found = variance.decompose_design(frame).set_index("component")["variance"]
    assert found["task"] == pytest.approx(TRUTH.task, rel=0.15)
    assert found["simulation sample"] == pytest.approx(TRUTH.sample, rel=0.15)
    assert found["judge sample"] == pytest.approx(TRUTH.judge, rel=0.15)


def test_a_level_without_repeats_is_counted_in_the_level_above():
    frame = simulate(TRUTH, users=300, tasks=8, repeats=1, judge_samples=2, seed=13)
    found = variance.decompose_design(frame).set_index("component")
    assert found.loc["simulation sample", "merged_into"] == "task"
    assert np.isnan(found.loc["simulation sample", "variance"])
    assert found.loc["task", "variance"] == pytest.approx(TRUTH.task + TRUTH.sample, rel=0.1)


def test_the_mixed_model_agrees_with_anova_on_a_balanced_design():
    frame = simulate(TRUTH, users=25, tasks=4, repeats=2, judge_samples=2, seed=14)
    anova = variance.decompose_design(frame)["variance"].to_numpy()
    reml = variance.decompose_design(frame, method="mixedlm")["variance"].to_numpy()
    assert (anova > 0).all()  # balanced and nothing truncated: REML and ANOVA coincide
    assert reml == pytest.approx(anova, rel=1e-3)
    with pytest.raises(DesignError, match="unknown variance method"):
        variance.decompose_design(frame, method="guess")


# -- power planner ------------------------------------------------------------------------------

PAIRED = power.PairedComponents(user=2 * KNOWN.user_arm, task=2 * KNOWN.task_arm, sample=2 * KNOWN.sample,
                                judge=2 * KNOWN.judge)
"""The components of the difference between two arms drawn from `KNOWN`: the shared user and task
effects cancel, each arm's own part and its noise add."""


def resampled_detectable(design: power.Design, truth: Truth, *, alpha: float, target_power: float,
                         reps: int = 3000, seed: int = 0) -> float:
    """The difference found with `target_power` by the users' paired t-test on `reps` studies simulated
    from `truth` (common random numbers: each candidate difference shifts the same null studies)."""
    rng = np.random.default_rng(seed)
    n, t, k, m = design.users, design.tasks, design.repeats, design.judge_samples

    def arm() -> np.ndarray:  # per scenario: arm-specific user and task parts plus mean noise
        user = rng.normal(0, np.sqrt(truth.user_arm), (reps, n, 1))
        task = rng.normal(0, np.sqrt(truth.task_arm), (reps, n, t))
        sample = rng.normal(0, np.sqrt(truth.sample), (reps, n, t, k))
        judge = rng.normal(0, np.sqrt(truth.judge), (reps, n, t, k, m)).mean(axis=-1)
        return user + task + (sample + judge).mean(axis=-1)

    per_user = (arm() - arm()).mean(axis=-1)
    mean, se = per_user.mean(axis=1), per_user.std(axis=1, ddof=1) / np.sqrt(n)
    crit = scipy_stats.t.ppf(1 - alpha / 2, n - 1)
    low, high = 0.0, 20 * float(np.median(se))
    for _ in range(60):
        mid = (low + high) / 2
        found = np.mean(np.abs(mid + mean) / se > crit)
        low, high = (mid, high) if found < target_power else (low, mid)
    return (low + high) / 2


@pytest.mark.parametrize(("design", "alpha", "target_power"), [
    (power.Design(30, 8, 2, 2), 0.05, 0.8),
    (power.Design(12, 5, 1, 3), 0.05, 0.9),
    (power.Design(60, 4, 3, 1), 0.01, 0.8),
])
def test_the_planner_detectable_difference_matches_resampling_within_ten_percent(design, alpha, target_power):
    planned = power.detectable_difference(PAIRED, design, alpha=alpha, power=target_power)
    resampled = resampled_detectable(design, KNOWN, alpha=alpha, target_power=target_power)
    assert planned == pytest.approx(resampled, rel=0.10)


def test_the_users_needed_are_the_fewest_that_reach_the_target():
    design = power.Design(2, 8, 2, 2)
    target = 0.3
    n = power.users_needed(PAIRED, target, design)
    assert power.detectable_difference(PAIRED, power.Design(n, 8, 2, 2)) <= target
    assert power.detectable_difference(PAIRED, power.Design(n - 1, 8, 2, 2)) > target
    more_judging = power.users_needed(PAIRED, target, power.Design(2, 8, 2, 6))
    assert more_judging <= n  # judging more often can only help, and only a little


def test_components_estimated_from_a_pilot_recover_the_paired_truth():
    """Four pilots of 200 users x 8 tasks x 2 x 2: their mean components near the truth (user 25%: the
    difference's user variance rests on 199 degrees of freedom and sits under larger noise; task 10%;
    sample and judge 5%), and each pilot's plan within 15% of the plan made with the truth."""
    found = []
    truth_plan = power.detectable_difference(PAIRED, power.Design(30, 8, 2, 2))
    for seed in range(21, 25):
        pilot = simulate(KNOWN, users=200, tasks=8, repeats=2, judge_samples=2, effects={"A": 0.0, "B": 0.2},
                         seed=seed)
        components = power.paired_components(pilot, "B", "A")
        found.append(components.as_dict())
        planned = power.detectable_difference(components, power.Design(30, 8, 2, 2))
        assert planned == pytest.approx(truth_plan, rel=0.15), seed
    mean = pd.DataFrame(found).mean()
    for name, rel in {"user": 0.25, "task": 0.1, "sample": 0.05, "judge": 0.05}.items():
        assert mean[name] == pytest.approx(PAIRED.as_dict()[name], rel=rel), name


def test_design_costs_come_from_the_kits_cost_estimate():
    costs = power.UnitCosts.from_usage(usage_table(), dialogues=40, judge_samples=80)
    design = power.Design(10, 5, 2, 3)
    estimate = power.design_cost(costs, design)
    dialogues, judged = 2 * 10 * 5 * 2, 2 * 10 * 5 * 2 * 3
    assistant = Usage(round(120_000 / 40 * dialogues), round(24_000 / 40 * dialogues))
    judge = Usage(round(480_000 / 80 * judged), round(48_000 / 80 * judged))
    called = registry.resolve(PRICED, "anthropic")  # the kit prices a retired model's successor
    expected = registry.cost_usd(called, assistant) + registry.cost_usd(called, judge)
    assert estimate.total_cost_usd == pytest.approx(expected)
    assert estimate.calls == 240 / 40 * dialogues * 2 + 480 / 80 * judged
    doubled = power.design_cost(costs, power.Design(20, 5, 2, 3)).total_cost_usd
    assert doubled == pytest.approx(2 * estimate.total_cost_usd)
    with pytest.raises(DesignError, match="usage_frame"):
        power.UnitCosts.from_usage(usage_table().drop(columns="calls"), dialogues=1, judge_samples=1)


# -- table, figure, notebook function -------------------------------------------------------------


def test_the_plan_is_one_call_with_a_table_a_figure_and_the_users_needed(exports):
    _, plan = exports
    grid = plan.table.data
    assert len(grid) == 4 * 2 * 2
    by_design = grid.groupby(["repeats", "judge_samples"])["detectable"]
    falling = by_design.apply(lambda s: s.is_monotonic_decreasing)
    assert falling.all()
    assert grid["cost_usd"].gt(0).all() and "Detectable Δ" in plan.table.frame.columns
    needed = plan.needed.data
    for row in needed.itertuples():
        design = power.Design(row.users_needed, row.tasks, row.repeats, row.judge_samples)
        assert power.detectable_difference(plan.components, design) <= 0.25
    assert "Pilot: 40 users" in plan.table.caption and "offline" in plan.table.caption.lower()


def test_the_variance_table_names_its_method_and_shares(pilot_tidy):
    result = variance.variance_table(pilot_tidy)
    assert "hierarchical ANOVA" in result.caption and "40 users" in result.caption
    assert list(result.frame.columns) == ["Assistant", "Metric", "User", "Task", "Simulation sample",
                                          "Judge sample"]
    assert all(re.fullmatch(r"[0-9.e-]+\*? \(\d+%\)", cell) for cell in result.frame["Task"])
    data = result.data
    assert data.groupby(["assistant", "dimension"])["share"].sum().round(6).eq(1.0).all()


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not found: install TeX Live (.ci/run does this)")
def test_the_trust_tables_compile_at_their_natural_size(exports):
    out, _ = exports
    tables = sorted((out / "tables").glob("*.tex"))
    assert len(tables) == 4
    for tex in tables:
        text = tex.read_text(encoding="utf-8")
        assert "adjustbox" not in text and "resizebox" not in text and "scalebox" not in text, tex.name
        assert compile_problems(tex) == [], tex.name


def test_the_trust_figures_meet_the_print_rules(exports, pilot_tidy):
    out, plan = exports
    widths = {round(w * POINTS_PER_INCH, 1) for w in plots.current_style().widths}
    for stem in ("figureV1_variance", "figureP1_power"):
        pdfs = sorted((out / "figures").glob(f"{stem}*.pdf"))
        assert len(pdfs) == 2, pdfs
        assert {round(page_size(p.read_bytes())[0], 1) for p in pdfs} == widths
        for pdf in pdfs:
            data = pdf.read_bytes()
            assert "Type3" not in font_subtypes(data)
            assert min(font_sizes(data)) >= plots.MIN_FONT_PT, pdf.name
            if shutil.which("pdftotext"):
                assert plots.OFFLINE_NOTE in " ".join(pdf_text(pdf).split()), pdf.name
        assert re.search(r"Source: .+, \d+ ", (out / "figures" / f"{stem}.txt").read_text(encoding="utf-8"))
    figures = [variance.variance_figure(pilot_tidy), plan.figure]
    for result in figures:
        for drawn in (result.figure, result.at("text")):
            assert overlaps_and_overflows(drawn) == []


def test_every_assistant_difference_has_a_paired_cluster_interval(tidy):
    result = differences.differences_table(tidy)
    data = result.data
    assert set(zip(data["treatment"], data["control"], strict=True)) == {
        ("model-b", "model-a"), ("model-c", "model-a"), ("model-c", "model-b")}
    row = data[(data["treatment"] == "model-a") | (data["control"] == "model-a")]
    row = row[(row["treatment"] == "model-c") & (row["task_type"] == "SD")
              & (row["dimension"] == "task_completion")].iloc[0]
    frame = design_frame(tidy[(tidy["assistant_setting"] == "base") & (tidy["task_type"] == "SD")],
                         "task_completion")
    expected = bootstrap.paired_difference(frame, "model-c", "model-a")
    assert (row["difference"], row["ci_low"], row["ci_high"]) == (
        expected.difference.estimate, expected.difference.low, expected.difference.high)
    assert row["difference"] < 0  # the synthetic store's model effect: model-c completes fewer tasks
    assert (data["p_holm"] >= data["p_permutation"]).all()
    assert "cluster bootstrap over users" in result.caption


def test_repeats_without_their_numbers_are_refused(tidy):
    with pytest.raises(DesignError, match="select one setting"):
        design_frame(tidy, "personalization")  # model-a's six settings would pool as one sample
    tidy = tidy[tidy["assistant_setting"] == "base"]
    assert len(design_frame(tidy, "personalization")) == tidy.loc[tidy["dimension"] == "personalization",
                                                                   "score"].notna().sum()
    doubled = pd.concat([tidy, tidy.assign(dialogue_id=tidy["dialogue_id"] + "-again")])
    with pytest.raises(DesignError, match="'sample' column"):
        design_frame(doubled, "personalization")
    judged_twice = pd.concat([tidy, tidy])
    with pytest.raises(DesignError, match="'judge_sample' column"):
        design_frame(judged_twice, "personalization")
