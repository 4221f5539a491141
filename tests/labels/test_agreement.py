"""Agreement measures against hand-computed values, scikit-learn and the krippendorff package."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from personalens_utils.labels.agreement import (
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    mean_pairwise_cohen,
)

NAN = float("nan")


def test_cohen_by_hand():
    # p_o = 3/4; marginals a: (1/2, 1/2), b: (3/4, 1/4) -> p_e = 1/2; kappa = (3/4 - 1/2) / (1/2)
    assert cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    assert cohen_kappa([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_matches_sklearn(weights):
    from sklearn.metrics import cohen_kappa_score  # here: only two tests need scikit-learn

    rng = np.random.default_rng(0)
    truth = rng.integers(1, 6, size=200)
    noisy = np.clip(truth + rng.integers(-1, 2, size=200), 1, 5)
    ours = cohen_kappa(truth, noisy, weights=weights, categories=[1, 2, 3, 4, 5])
    ref = cohen_kappa_score(truth, noisy, weights=weights, labels=[1, 2, 3, 4, 5])
    assert ours == pytest.approx(ref)


def test_cohen_skips_items_either_rater_left_blank():
    from sklearn.metrics import cohen_kappa_score

    a = [1, 2, NAN, 4, 3, 3]
    b = [1, 3, 2, NAN, 3, 3]
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score([1, 2, 3, 3], [1, 3, 3, 3]))


def test_cohen_undefined_and_bad_input():
    assert np.isnan(cohen_kappa([2, 2, 2], [2, 2, 2]))
    assert np.isnan(cohen_kappa([NAN], [1]))
    with pytest.raises(ValueError, match="different numbers"):
        cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError, match="outside the categories"):
        cohen_kappa([1, 7], [1, 2], categories=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa([1, 2], [1, 2], weights="cubic")  # type: ignore[arg-type]


def test_mean_pairwise_cohen_averages_over_annotators():
    judge = [1, 1, 0, 0]
    annotators = [[1, 0, 0, 0], [1, 1, 0, 0]]  # kappas 0.5 and 1.0
    assert mean_pairwise_cohen(judge, annotators) == pytest.approx(0.75)


def test_fleiss_small_example_by_hand():
    # items x raters: (1,1,1), (1,1,2), (2,2,2), (2,1,2)
    # P_i = 1, 1/3, 1, 1/3 -> P_bar = 2/3; p_1 = p_2 = 1/2 -> P_e = 1/2; kappa = 1/3
    ratings = np.array([[1, 1, 1], [1, 1, 2], [2, 2, 2], [2, 1, 2]]).T
    assert fleiss_kappa(ratings) == pytest.approx(1 / 3)


def test_fleiss_classic_fourteen_rater_example():
    # Fleiss (1971) as tabulated on Wikipedia: 10 subjects, 14 raters, 5 categories;
    # P_bar = 0.378, P_e = 0.213, kappa = 0.210.
    counts = np.array(
        [
            [0, 0, 0, 0, 14],
            [0, 2, 6, 4, 2],
            [0, 0, 3, 5, 6],
            [0, 3, 9, 2, 0],
            [2, 2, 8, 1, 1],
            [7, 7, 0, 0, 0],
            [3, 2, 6, 3, 0],
            [2, 5, 3, 2, 2],
            [6, 5, 2, 1, 0],
            [0, 2, 2, 3, 7],
        ]
    )
    ratings = np.array([np.repeat(np.arange(1, 6), row) for row in counts]).T  # raters x items
    assert fleiss_kappa(ratings) == pytest.approx(0.2099, abs=5e-4)


def test_fleiss_leaves_out_incomplete_items_and_handles_degenerate_cases():
    items = [[1, 1, 1], [1, 1, 2], [1, 2, NAN], [2, 2, 2], [2, 1, 2]]
    ratings = np.array(items).T  # raters x items
    # the third item has a blank: left out, leaving the hand example above
    assert fleiss_kappa(ratings) == pytest.approx(1 / 3)
    assert np.isnan(fleiss_kappa([[1, 2, 3]]))  # one rater
    assert np.isnan(fleiss_kappa([[2, 2], [2, 2]]))  # one category only


def test_fleiss_with_two_raters_equals_scotts_pi():
    a = np.array([1, 1, 2, 2, 3, 3, 1, 2])
    b = np.array([1, 2, 2, 2, 3, 1, 1, 3])
    p_o = np.mean(a == b)
    pooled = np.concatenate([a, b])
    p_e = sum(np.mean(pooled == c) ** 2 for c in (1, 2, 3))
    assert fleiss_kappa([a, b]) == pytest.approx((p_o - p_e) / (1 - p_e))


def test_krippendorff_nominal_by_hand():
    # units (1,1), (1,2), (2,2), (2,2): coincidences o11=2, o12=o21=1, o22=4; n1=3, n2=5, n=8
    # D_o = 2/8, D_e = 2*3*5/(8*7); alpha = 1 - (2/8)/(30/56) = 8/15
    ratings = [[1, 1, 2, 2], [1, 2, 2, 2]]
    assert krippendorff_alpha(ratings, level="nominal") == pytest.approx(8 / 15)


def test_krippendorff_ordinal_by_hand():
    # units (1,2), (2,3), (3,3), (1,1): n1=3, n2=2, n3=3, n=8
    # delta^2(1,2) = (5/2)^2, delta^2(2,3) = (5/2)^2, delta^2(1,3) = (8 - 3)^2
    # D_o = (2*6.25 + 2*6.25)/8; D_e = 2*(6*6.25 + 6*6.25 + 9*25)/56; alpha = 17/24
    ratings = [[1, 2, 3, 1], [2, 3, 3, 1]]
    assert krippendorff_alpha(ratings, level="ordinal", categories=[1, 2, 3]) == pytest.approx(17 / 24)


def test_krippendorff_matches_package_with_missing_values():
    rng = np.random.default_rng(5)
    data = rng.integers(1, 5, size=(3, 40)).astype(float)
    data[rng.random(data.shape) < 0.2] = np.nan
    for level in ("nominal", "ordinal"):
        ours = krippendorff_alpha(data, level=level, categories=[1, 2, 3, 4])
        ref = krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=[1, 2, 3, 4])
        assert ours == pytest.approx(ref)


def test_krippendorff_nominal_two_raters_close_to_cohen_on_large_samples():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2, size=2000)
    b = np.where(rng.random(2000) < 0.85, a, 1 - a)
    assert krippendorff_alpha([a, b]) == pytest.approx(cohen_kappa(a, b), abs=0.01)


def test_krippendorff_undefined_and_bad_input():
    assert np.isnan(krippendorff_alpha([[3, 3, 3], [3, 3, 3]], level="ordinal", categories=[1, 2, 3, 4]))
    assert np.isnan(krippendorff_alpha([[1, NAN], [NAN, 2]]))  # no unit rated twice
    with pytest.raises(ValueError, match="outside the categories"):
        krippendorff_alpha([[1, 5], [1, 2]], categories=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="numbers"):
        krippendorff_alpha([["a", "b"], ["a", "c"]])
