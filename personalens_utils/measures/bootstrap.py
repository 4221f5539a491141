"""Intervals that resample users: the cluster bootstrap, and paired differences on shared scenarios.

A run's judgments are nested (tasks within users, repeats within scenarios), and judgments of one
user move together: a user whose preferences are hard to meet pulls down every score of theirs.
Resampling judgments as if independent then gives intervals that are too narrow. Here the unit drawn
is the user: each resample draws users with replacement, and a drawn user brings all their tasks,
simulation samples and judge samples. The statistic is the mean over the drawn judgments (the same
mean the tables print), so users with more scored judgments weigh more, as in the point estimate.
Tasks are not resampled again inside a drawn user: the spread between a user's tasks is already in
the spread of user totals, and drawing it a second time would count it twice (intervals too wide).

With fewer than `MIN_CLUSTERS` users, or when every resample gives the same mean, the interval is
withheld (`stats.shown_interval`): the estimate with NaN bounds and the reason, never a zero-width or
far too narrow "95%" interval. A paired difference then gives only the sign-flip p-value, which is
exact at any number of users; the bootstrap p-value is drawn from the same resamples as the interval
and is given only where the interval is.

Vectorised: per-user sums and counts are computed once, then each resample is an index draw over
users, so a call costs resamples x users, not resamples x judgments. Seeded, and sorted before
drawing, so the same scores give the same interval in any order.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from personalens_utils.measures.design import ARM, SCORE, TASK, USER, DesignError, check_design
from personalens_utils.measures.stats import (
    DEFAULT_RESAMPLES,
    MIN_CLUSTERS,
    Interval,
    PairedComparison,
    holm_adjust,
    shown_interval,
    sign_flip_pvalue,
)

MAX_DRAWS = 4_000_000
"""Resampled indices held in memory at once (32 MB); resamples are drawn in chunks below it."""


def method_note(confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES) -> str:
    """The caption sentence that states how a table's intervals were made."""
    return (f"{confidence:.0%} intervals from a cluster bootstrap over users ({n_resamples} resamples, "
            "percentile; each drawn user brings all their tasks and repeats)")


def cluster_totals(values: ArrayLike, clusters: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums and counts of `values`, clusters in sorted order, summed in a fixed order."""
    vals = np.asarray(values, dtype=float).ravel()
    if np.isnan(vals).any():
        raise ValueError("values contain NaN: drop missing scores first (a missing judgment is excluded, "
                         "never counted)")
    keys = np.asarray(clusters).ravel()
    if keys.shape != vals.shape:
        raise ValueError(f"{len(keys)} cluster labels for {len(vals)} values")
    _, codes = np.unique(keys, return_inverse=True)
    order = np.lexsort((vals, codes))
    codes, vals = codes[order], vals[order]
    groups = int(codes.max()) + 1 if len(codes) else 0
    return np.bincount(codes, weights=vals, minlength=groups), np.bincount(codes, minlength=groups)


def cluster_bootstrap_means(sums: np.ndarray, counts: np.ndarray, n_resamples: int,
                            rng: np.random.Generator) -> np.ndarray:
    """Means of `n_resamples` cluster resamples: draw clusters with replacement, pool their values."""
    groups = len(sums)
    out = np.empty(n_resamples)
    chunk = max(1, min(n_resamples, MAX_DRAWS // max(groups, 1)))
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        idx = rng.integers(0, groups, size=(stop - start, groups))
        out[start:stop] = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    return out


def _bounds(means: np.ndarray, confidence: float) -> tuple[float, float]:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def cluster_ci(values: ArrayLike, clusters: ArrayLike, *, confidence: float = 0.95,
               n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """Cluster-bootstrap percentile interval for the mean of `values` (n: values). Empty: NaN bounds;
    under `MIN_CLUSTERS` clusters or zero width: the mean with NaN bounds and the reason."""
    sums, counts = cluster_totals(values, clusters)
    if not len(sums):
        nan = float("nan")
        return Interval(nan, nan, nan, 0, confidence)
    mean, n = float(sums.sum() / counts.sum()), int(counts.sum())
    if len(sums) < MIN_CLUSTERS:
        return shown_interval(mean, np.nan, np.nan, n, confidence, len(sums))
    means = cluster_bootstrap_means(sums, counts, n_resamples, np.random.default_rng(seed))
    return shown_interval(mean, *_bounds(means, confidence), n, confidence, len(sums))


def scenario_differences(frame: pd.DataFrame, treatment: str, control: str) -> pd.DataFrame:
    """Per scenario both arms hold: `user`, `task`, each arm's mean over its repeats, `difference`.

    Repeats of the two arms are independent runs, not pairs, so each arm is averaged over its own
    simulation and judge samples before the scenario's two means are subtracted.
    """
    check_design(frame, (USER, TASK, ARM, SCORE))
    part = frame[frame[ARM].isin([treatment, control])]
    means = part.groupby([USER, TASK, ARM], sort=True)[SCORE].mean().unstack(ARM)
    missing = [a for a in (treatment, control) if a not in means.columns]
    if missing:
        raise DesignError(f"no scores for {missing} in the design; it holds {sorted(frame[ARM].unique())}")
    wide = means[[treatment, control]].dropna().reset_index()
    wide.columns = [USER, TASK, "treatment", "control"]
    return wide.assign(difference=wide["treatment"] - wide["control"])


def paired_difference(frame: pd.DataFrame, treatment: str, control: str, *, confidence: float = 0.95,
                      n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> PairedComparison:
    """`treatment - control` on the scenarios both hold: the mean per-scenario difference, its
    cluster-bootstrap interval (users resampled), and two p-values.

    `p_permutation` flips the sign of each user's summed difference (a user is exchangeable under
    no difference, a scenario of that user is not); `p_bootstrap` is the share of recentred resample
    means at least as far from zero as the observed one, NaN where the interval is withheld (a
    degenerate bootstrap would call one user's difference certain). n: scenarios paired.
    """
    diffs = scenario_differences(frame, treatment, control)
    sums, counts = cluster_totals(diffs["difference"], diffs[USER])
    nan = float("nan")
    if not len(sums):
        return PairedComparison(Interval(nan, nan, nan, 0, confidence), nan, nan)
    observed, n = float(sums.sum() / counts.sum()), int(counts.sum())
    p_perm = sign_flip_pvalue(sums, n_resamples=n_resamples, seed=seed)
    if len(sums) < MIN_CLUSTERS:
        return PairedComparison(shown_interval(observed, nan, nan, n, confidence, len(sums)), p_perm, nan)
    means = cluster_bootstrap_means(sums, counts, n_resamples, np.random.default_rng(seed))
    interval = shown_interval(observed, *_bounds(means, confidence), n, confidence, len(sums))
    tol = 1e-12 * max(1.0, abs(observed))
    p_boot = (1 + int(np.sum(np.abs(means - observed) >= abs(observed) - tol))) / (1 + n_resamples)
    return PairedComparison(interval, p_perm, nan if interval.withheld else p_boot)


def pairwise_differences(frame: pd.DataFrame, arms: Sequence[str] | None = None, *,
                         confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES,
                         seed: int = 0) -> pd.DataFrame:
    """Every pair of arms (assistants or settings, in `arms` order, default sorted), each later one
    minus each earlier one on their shared scenarios, with cluster intervals and Holm-adjusted p;
    `attrs["withheld"]`: each row's reason for a withheld interval (`withheld_note`), "" where shown."""
    check_design(frame, (USER, TASK, ARM, SCORE))
    arms = sorted(frame[ARM].unique()) if arms is None else list(arms)
    rows, withheld = [], []
    for control, treatment in combinations(arms, 2):
        result = paired_difference(frame, treatment, control, confidence=confidence,
                                   n_resamples=n_resamples, seed=seed)
        withheld.append(result.difference.withheld)
        rows.append({"treatment": treatment, "control": control, "difference": result.difference.estimate,
                     "ci_low": result.difference.low, "ci_high": result.difference.high,
                     "n_scenarios": result.difference.n, "p_permutation": result.p_permutation,
                     "p_bootstrap": result.p_bootstrap})
    out = pd.DataFrame(rows, columns=["treatment", "control", "difference", "ci_low", "ci_high",
                                      "n_scenarios", "p_permutation", "p_bootstrap"])
    out["p_holm"] = holm_adjust(out["p_permutation"].tolist()) if len(out) else []
    out.attrs["withheld"] = withheld
    return out
