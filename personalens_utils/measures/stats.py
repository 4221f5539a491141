"""Confidence intervals and paired tests for benchmark scores.

Scores per dialogue are binary (task completion) or small ordinal scales, and the samples are a
few hundred to a few thousand dialogues, so resampling methods fit better than normal theory.
Every function is seeded and sorts its sample before resampling, so the same values give the same
interval on every run whatever order they arrive in (records are stored in completion order).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

DEFAULT_RESAMPLES = 2000
EXACT_PERMUTATION_MAX_N = 16
_CHUNK = 256
MAX_DRAWS = 4_000_000
"""Resampled indices held at once (32 MB, and as much again for the values they pick): a sample of a
whole run (100,000 scores) is drawn a few dozen resamples at a time, not 256 (400 MB)."""


MIN_CLUSTERS = 10
"""The fewest users (clusters) behind a cluster-bootstrap interval that a table prints as a 95% interval.

Resampling G users lets the interval see only what those G users hold, so it is too narrow: for normal
scores a nominal 95% percentile interval covers about 78% at 2 users, 89% at 4, 92% at 6 and 93% at 10
(less still for 0/1 task completion), and below 6 users the exact sign-flip test cannot reach p < 0.05
at all. From 10 users on the shortfall is about two points, which the method note can carry; below,
a table shows the mean alone and says why (docs/trust.md, "Thin data: the mean alone")."""
FEW_CLUSTERS = f"fewer than {MIN_CLUSTERS} users"
ALL_EQUAL = "every resample equal (a zero-width interval)"
"""Why an interval is withheld (`Interval.withheld`); `withheld_note` counts them for a caption."""


REMEMBERED_INTERVALS = 1024
"""Bootstrap intervals kept per process. An interval depends only on the sorted sample, the confidence,
the resamples and the seed, and a table and a figure often ask for the same one (Figure 4 and the radar
chart draw the same per-dimension scores): it is drawn once and given again."""


@dataclass(frozen=True)
class Interval:
    """A point estimate with its two-sided confidence interval over `n` observations."""

    estimate: float
    low: float
    high: float
    n: int
    confidence: float
    withheld: str = ""
    """Why the bounds are NaN though the estimate is not (`FEW_CLUSTERS`, `ALL_EQUAL`); empty otherwise."""

    def as_dict(self, prefix: str = "") -> dict[str, float | int]:
        return {
            f"{prefix}mean": self.estimate,
            f"{prefix}ci_low": self.low,
            f"{prefix}ci_high": self.high,
            f"{prefix}n": self.n,
        }


@dataclass(frozen=True)
class PairedComparison:
    """`treatment - control` on matched observations: mean difference, its interval, two p-values."""

    difference: Interval
    p_permutation: float
    p_bootstrap: float


def _clean(values: ArrayLike, name: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    if np.isnan(arr).any():
        raise ValueError(
            f"{name} contains NaN: drop missing scores before computing statistics "
            "(a missing judgment is excluded, never counted)"
        )
    return arr


def _sample(values: ArrayLike, name: str = "values") -> np.ndarray:
    """The values sorted: resampling picks by position, so it must not see the order they came in."""
    return np.sort(_clean(values, name))


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def bootstrap_means(values: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `n_resamples` resamples (with replacement) of `values`, drawn in memory-bounded chunks."""
    n = len(values)
    out = np.empty(n_resamples)
    chunk = max(1, min(_CHUNK, MAX_DRAWS // max(n, 1)))  # the draws do not depend on the chunking
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = values[idx].mean(axis=1)
    return out


_INTERVALS: dict[tuple[bytes, int, float, int, int], Interval] = {}


def bootstrap_ci(
    values: ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval for the mean. An empty sample gives NaN bounds and n=0."""
    _check_confidence(confidence)
    arr = _sample(values)
    if len(arr) == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, confidence)
    key = (hashlib.blake2b(arr.tobytes(), digest_size=16).digest(), len(arr), confidence, n_resamples, seed)
    known = _INTERVALS.get(key)
    if known is not None:
        return known
    means = bootstrap_means(arr, n_resamples, np.random.default_rng(seed))
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    found = Interval(float(arr.mean()), float(low), float(high), len(arr), confidence)
    if len(_INTERVALS) >= REMEMBERED_INTERVALS:
        _INTERVALS.pop(next(iter(_INTERVALS)))
    _INTERVALS[key] = found
    return found


def _paired(treatment: ArrayLike, control: ArrayLike) -> np.ndarray:
    """Per-pair differences, sorted: the pairing lives in each difference, so their order is free."""
    a = _clean(treatment, "treatment")
    b = _clean(control, "control")
    if a.shape != b.shape:
        raise ValueError(
            f"paired samples must have the same length (treatment {len(a)}, control {len(b)}); "
            "match them on the scenario first"
        )
    return np.sort(a - b)


def sign_flip_pvalue(differences: ArrayLike, *, n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided p-value of a paired permutation (sign-flip) test that the mean difference is zero.

    Exact (all 2^n sign patterns) when n <= EXACT_PERMUTATION_MAX_N; otherwise Monte Carlo with
    the observed pattern counted, p = (1 + hits) / (1 + n_resamples), so p is never 0.
    """
    d = _sample(differences, "differences")
    n = len(d)
    if n == 0:
        return float("nan")
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= EXACT_PERMUTATION_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        stats = np.abs(signs @ d) / n
        return float(np.mean(stats >= observed - tol))
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        signs = rng.choice((1.0, -1.0), size=(size, n))
        hits += int(np.sum(np.abs(signs @ d) / n >= observed - tol))
    return (1 + hits) / (1 + n_resamples)


def paired_comparison(
    treatment: ArrayLike,
    control: ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> PairedComparison:
    """Compare two conditions on the same scenarios (element i of each array is one scenario).

    The interval resamples scenarios (pairs), keeping the pairing. `p_bootstrap` is the share of
    recentred bootstrap means at least as far from zero as the observed one; `p_permutation` is
    the sign-flip test. They answer the same question by different routes and usually agree.
    """
    _check_confidence(confidence)
    d = _paired(treatment, control)
    n = len(d)
    if n == 0:
        nan = float("nan")
        return PairedComparison(Interval(nan, nan, nan, 0, confidence), nan, nan)
    means = bootstrap_means(d, n_resamples, np.random.default_rng(seed))
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    observed = float(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    hits = int(np.sum(np.abs(means - observed) >= abs(observed) - tol))
    p_boot = (1 + hits) / (1 + n_resamples)
    return PairedComparison(
        Interval(observed, float(low), float(high), n, confidence),
        sign_flip_pvalue(d, n_resamples=n_resamples, seed=seed),
        p_boot,
    )


def too_few_clusters(clusters: int) -> bool:
    """Whether an interval over `clusters` users is withheld (`MIN_CLUSTERS`): one rule for the tables'
    cells and the figures' error bars, so a figure never draws an interval its table declines."""
    return clusters < MIN_CLUSTERS


def no_intervals_note(users: int, confidence: float = 0.95) -> str:
    """Caption sentence of a figure drawn without intervals because `too_few_clusters(users)`."""
    return (f" No {confidence:.0%} intervals are drawn: they would rest on {FEW_CLUSTERS} ({users}), over "
            f"whom a bootstrap covers well under {confidence:.0%}.")


def shown_interval(estimate: float, low: float, high: float, n: int, confidence: float,
                   clusters: int) -> Interval:
    """The interval a table may print as a confidence interval, or the estimate with NaN bounds and the
    reason: fewer than `MIN_CLUSTERS` units drawn, or a zero-width interval (every resample the same)."""
    why = FEW_CLUSTERS if too_few_clusters(clusters) else ALL_EQUAL if low == high else ""
    if why:
        return Interval(estimate, float("nan"), float("nan"), n, confidence, why)
    return Interval(estimate, low, high, n, confidence)


def withheld_note(reasons: Sequence[str], confidence: float = 0.95) -> str:
    """Caption sentence for the cells shown without an interval, by reason; empty when there are none."""
    few, equal = (sum(1 for r in reasons if r == why) for why in (FEW_CLUSTERS, ALL_EQUAL))
    if not few + equal:
        return ""
    parts = ([f"{few} rest on {FEW_CLUSTERS}, over whom a bootstrap covers well under {confidence:.0%}"]
             if few else [])
    parts += ([f"{equal} have {ALL_EQUAL}, which shows no spread to draw from, not certainty"]
              if equal else [])
    return (f" {few + equal} cell(s) show the estimate alone, without a {confidence:.0%} interval: "
            f"{'; '.join(parts)}.")


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order as given); NaN entries stay NaN and are not counted."""
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full_like(p, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = len(valid)
    order = valid[np.argsort(p[valid], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()
