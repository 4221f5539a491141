"""Bootstrap intervals, paired tests and p-value adjustment against hand-computed values and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from personalens_utils.measures.stats import bootstrap_ci, holm_adjust, paired_comparison, sign_flip_pvalue


def test_constant_sample_has_zero_width_interval():
    ci = bootstrap_ci([3.0] * 40)
    assert (ci.estimate, ci.low, ci.high, ci.n) == (3.0, 3.0, 3.0, 40)


def test_two_point_sample_interval_spans_both_points():
    # resampled means of [0, 1] are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4,
    # so the 2.5% and 97.5% quantiles are 0 and 1.
    ci = bootstrap_ci([0.0, 1.0], n_resamples=4000)
    assert ci.estimate == 0.5
    assert (ci.low, ci.high) == (0.0, 1.0)


def test_binary_interval_matches_binomial_quantiles():
    # The bootstrap mean of 90 ones and 10 zeros is Binomial(100, 0.9) / 100.
    values = np.array([1.0] * 90 + [0.0] * 10)
    ci = bootstrap_ci(values, n_resamples=40_000, seed=3)
    assert ci.low == pytest.approx(sps.binom.ppf(0.025, 100, 0.9) / 100, abs=0.011)
    assert ci.high == pytest.approx(sps.binom.ppf(0.975, 100, 0.9) / 100, abs=0.011)


def test_interval_agrees_with_scipy_percentile_bootstrap():
    rng = np.random.default_rng(7)
    values = rng.integers(1, 5, size=300).astype(float)
    ours = bootstrap_ci(values, n_resamples=20_000, seed=1)
    ref = sps.bootstrap(
        (values,), np.mean, n_resamples=20_000, method="percentile", rng=np.random.default_rng(2)
    ).confidence_interval
    assert ours.low == pytest.approx(ref.low, abs=0.015)
    assert ours.high == pytest.approx(ref.high, abs=0.015)


def test_interval_covers_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(11)
    covered = 0
    trials = 300
    for i in range(trials):
        sample = rng.binomial(1, 0.7, size=80).astype(float)
        ci = bootstrap_ci(sample, n_resamples=800, seed=i)
        covered += ci.low <= 0.7 <= ci.high
    # Binomial(300, 0.95) lies in [272, 295] with probability > 0.999; percentile intervals
    # undercover slightly at n = 80, hence the lower bound a little below.
    assert 265 <= covered <= 296


def test_interval_is_reproducible_and_seed_dependent():
    values = np.arange(50, dtype=float) % 4
    assert bootstrap_ci(values, seed=5) == bootstrap_ci(values, seed=5)
    assert bootstrap_ci(values, seed=5) != bootstrap_ci(values, seed=6)


def test_empty_sample_gives_nan_interval_and_nan_is_refused():
    empty = bootstrap_ci([])
    assert empty.n == 0 and np.isnan(empty.estimate) and np.isnan(empty.low)
    with pytest.raises(ValueError, match="missing"):
        bootstrap_ci([1.0, np.nan])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0, 2.0], confidence=95)


@pytest.mark.parametrize(
    ("differences", "expected"),
    [
        ([1, 2, 3], 2 / 8),  # sums over sign patterns: 6,4,2,0,0,-2,-4,-6; only +++ and --- reach 6
        ([1, 1, 1, 1], 2 / 16),
        ([2, 1, 1], 2 / 8),  # sums: 4,2,2,0,0,-2,-2,-4
        ([3, 1], 2 / 4),  # sums: 4,2,-2,-4
        ([3, -1], 1.0),  # sums: 2,4,-4,-2; all reach the observed |2|
        ([1, -1], 1.0),  # observed mean 0: every pattern is at least as extreme
        ([0, 0, 0], 1.0),
    ],
)
def test_exact_sign_flip_pvalues_by_hand(differences, expected):
    assert sign_flip_pvalue(differences) == pytest.approx(expected)


def test_sign_flip_matches_scipy_exact_paired_permutation():
    rng = np.random.default_rng(4)
    a = rng.integers(1, 5, size=12).astype(float)
    b = rng.integers(1, 5, size=12).astype(float)
    ref = sps.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        n_resamples=np.inf,
        vectorized=True,
    )
    assert sign_flip_pvalue(a - b) == pytest.approx(ref.pvalue)


def test_monte_carlo_sign_flip_agrees_with_scipy():
    rng = np.random.default_rng(9)
    a = rng.binomial(1, 0.8, size=200).astype(float)
    b = rng.binomial(1, 0.72, size=200).astype(float)
    ours = sign_flip_pvalue(a - b, n_resamples=20_000, seed=1)
    ref = sps.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        n_resamples=20_000,
        vectorized=True,
        rng=np.random.default_rng(3),
    )
    assert ours == pytest.approx(ref.pvalue, abs=0.01)
    assert ours > 0


def test_paired_comparison_of_a_constant_shift():
    control = np.array([1, 2, 3, 4, 2, 3, 1, 4, 2, 3] * 5, dtype=float)
    result = paired_comparison(control + 1, control)
    assert result.difference.estimate == 1.0
    assert (result.difference.low, result.difference.high) == (1.0, 1.0)
    assert result.p_permutation < 0.001
    assert result.p_bootstrap < 0.001


def test_paired_comparison_ignores_between_scenario_variance():
    # Large scenario-to-scenario spread, small consistent gain: paired test finds it,
    # while the two marginal intervals overlap heavily.
    rng = np.random.default_rng(0)
    base = rng.normal(0, 10, size=60)
    treated = base + 0.5 + rng.normal(0, 0.2, size=60)
    result = paired_comparison(treated, base)
    assert result.difference.low > 0
    assert result.p_permutation < 0.01
    marginal_t, marginal_b = bootstrap_ci(treated), bootstrap_ci(base)
    assert marginal_t.low < marginal_b.high


def test_paired_comparison_without_effect_is_not_significant():
    rng = np.random.default_rng(1)
    a = rng.integers(1, 5, size=150).astype(float)
    b = a.copy()
    rng.shuffle(b[:75])
    result = paired_comparison(a, b)
    assert result.difference.low <= 0 <= result.difference.high
    assert result.p_permutation > 0.05 and result.p_bootstrap > 0.05


def test_paired_comparison_refuses_unmatched_lengths():
    with pytest.raises(ValueError, match="same length"):
        paired_comparison([1.0, 2.0], [1.0])


def test_holm_by_hand():
    # sorted: 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> monotone 0.06
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    adjusted = holm_adjust([0.2, float("nan"), 0.6])
    assert adjusted[0] == pytest.approx(0.4) and adjusted[2] == pytest.approx(0.6)
    assert np.isnan(adjusted[1])
    assert holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])
