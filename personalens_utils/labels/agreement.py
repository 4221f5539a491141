"""Agreement between raters: Cohen's kappa, Fleiss' kappa and Krippendorff's alpha, and the agreement
of a reference (a judge) with other raters per dimension, as Table 5 and the judge report card read it.

Raters are the judge model(s) and human annotators; items are dialogues. Missing ratings are NaN
and are left out of each measure the way that measure prescribes (pairwise deletion for Cohen,
complete items for Fleiss, Krippendorff's own handling), never filled in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import krippendorff
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from personalens_utils.labels.sheets import RATED
from personalens_utils.measures.display import DIMENSION_NAMES
from personalens_utils.measures.scores import SCALES

Weights = Literal["linear", "quadratic"] | None
Level = Literal["nominal", "ordinal", "interval", "ratio"]
AGREEMENT_DIMENSIONS = RATED
AGREEMENT_NAMES = {dim: DIMENSION_NAMES[dim] for dim in AGREEMENT_DIMENSIONS}


def _as_float(values: ArrayLike, name: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: ratings must be numbers or NaN ({exc})") from exc


def cohen_kappa(
    rater_a: ArrayLike,
    rater_b: ArrayLike,
    *,
    weights: Weights = None,
    categories: Sequence[float] | None = None,
) -> float:
    """Cohen's kappa of two raters over the items both rated.

    `categories` fixes the scale (needed for weighted kappa to know the distance between levels);
    by default it is the set of values seen. Returns NaN when agreement by chance is already
    certain (both raters used a single, identical category) or no item was rated by both.
    """
    a = _as_float(rater_a, "rater_a").ravel()
    b = _as_float(rater_b, "rater_b").ravel()
    if a.shape != b.shape:
        raise ValueError(f"the two raters rated different numbers of items ({len(a)} vs {len(b)})")
    both = ~(np.isnan(a) | np.isnan(b))
    a, b = a[both], b[both]
    if len(a) == 0:
        return float("nan")
    cats = np.unique(np.concatenate([a, b])) if categories is None else np.asarray(categories, dtype=float)
    unknown = np.setdiff1d(np.concatenate([a, b]), cats)
    if len(unknown):
        raise ValueError(f"ratings {unknown.tolist()} are outside the categories {cats.tolist()}")
    k = len(cats)
    index = {float(c): i for i, c in enumerate(cats)}
    ia = np.array([index[v] for v in a])
    ib = np.array([index[v] for v in b])
    observed = np.zeros((k, k))
    np.add.at(observed, (ia, ib), 1)
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    grid = np.subtract.outer(np.arange(k), np.arange(k))
    if weights is None:
        disagreement = (grid != 0).astype(float)
    elif weights == "linear":
        disagreement = np.abs(grid).astype(float)
    elif weights == "quadratic":
        disagreement = (grid**2).astype(float)
    else:
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    chance = float((disagreement * expected).sum())
    if chance == 0:
        return float("nan")
    return 1.0 - float((disagreement * observed).sum()) / chance


def mean_pairwise_cohen(
    reference: ArrayLike,
    raters: ArrayLike,
    *,
    weights: Weights = None,
    categories: Sequence[float] | None = None,
) -> float:
    """Average Cohen's kappa of `reference` (e.g. the judge) against each row of `raters`, NaNs skipped."""
    rows = np.atleast_2d(_as_float(raters, "raters"))
    kappas = [cohen_kappa(reference, row, weights=weights, categories=categories) for row in rows]
    kappas = [k for k in kappas if not np.isnan(k)]
    return float(np.mean(kappas)) if kappas else float("nan")


def fleiss_kappa(ratings: ArrayLike, *, categories: Sequence[float] | None = None) -> float:
    """Fleiss' kappa for a (raters x items) matrix; items not rated by every rater are left out.

    Returns NaN with fewer than two raters or two complete items, or when every rating is the
    same category (chance agreement is then certain and kappa is undefined).
    """
    matrix = np.atleast_2d(_as_float(ratings, "ratings"))
    n_raters = matrix.shape[0]
    complete = matrix[:, ~np.isnan(matrix).any(axis=0)]
    if n_raters < 2 or complete.shape[1] < 2:
        return float("nan")
    cats = np.unique(complete) if categories is None else np.asarray(categories, dtype=float)
    unknown = np.setdiff1d(complete, cats)
    if len(unknown):
        raise ValueError(f"ratings {unknown.tolist()} are outside the categories {cats.tolist()}")
    counts = np.stack([(complete == c).sum(axis=0) for c in cats], axis=1)  # items x categories
    n_items = counts.shape[0]
    p_cat = counts.sum(axis=0) / (n_items * n_raters)
    p_item = ((counts * (counts - 1)).sum(axis=1)) / (n_raters * (n_raters - 1))
    p_bar, p_e = p_item.mean(), float((p_cat**2).sum())
    if p_e == 1:
        return float("nan")
    return float((p_bar - p_e) / (1 - p_e))


def krippendorff_alpha(
    ratings: ArrayLike, *, level: Level = "nominal", categories: Sequence[float] | None = None
) -> float:
    """Krippendorff's alpha for a (raters x items) matrix with NaN for missing ratings.

    Computed by the `krippendorff` package. `categories` gives the full ordered scale, so an
    ordinal alpha knows levels nobody used. NaN when fewer than two values occur (undefined).
    """
    matrix = np.atleast_2d(_as_float(ratings, "ratings"))
    seen = np.unique(matrix[~np.isnan(matrix)])
    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    if len(seen) < 2 or pairable.sum() == 0:
        return float("nan")
    domain = seen if categories is None else np.asarray(categories, dtype=float)
    unknown = np.setdiff1d(seen, domain)
    if len(unknown):
        raise ValueError(f"ratings {unknown.tolist()} are outside the categories {domain.tolist()}")
    return float(krippendorff.alpha(reliability_data=matrix, value_domain=domain, level_of_measurement=level))


def ratings_matrix(ratings: pd.DataFrame, items: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Long ratings (rater, dialogue_id, score) -> rater names and a raters x items matrix (NaN: unrated)."""
    wide = ratings.pivot_table(index="rater", columns="dialogue_id", values="score", aggfunc="first")
    wide = wide.reindex(columns=list(items))
    return list(wide.index), wide.to_numpy(dtype=float)


def shared_matrices(reference: pd.DataFrame,
                    raters: pd.DataFrame) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """The dialogues both a reference and other raters rated (long frames of one dimension), the raters'
    names, and the reference's and the raters' matrices over those dialogues."""
    items = sorted(set(raters["dialogue_id"]) & set(reference["dialogue_id"]))
    _, ref_matrix = ratings_matrix(reference, items)
    names, matrix = ratings_matrix(raters, items)
    return items, names, ref_matrix, matrix


def agreement_table(
    reference: pd.DataFrame,
    raters: pd.DataFrame,
    *,
    pool_reference: bool,
    dimensions: Sequence[str] = AGREEMENT_DIMENSIONS,
) -> pd.DataFrame:
    """Agreement per dimension between a reference (the judge) and other raters.

    Inputs are long frames with columns rater, dialogue_id, dimension, score. Cohen's kappa is the
    reference against each rater, averaged. Fleiss' kappa and Krippendorff's alpha are computed among
    the raters, or among raters and reference together when `pool_reference` (used when the only
    other rater is a second judge). Alpha is ordinal for the rating scales and nominal for TC.
    """
    rows = []
    for dim in dimensions:
        items, names, ref_matrix, matrix = shared_matrices(reference[reference["dimension"] == dim],
                                                          raters[raters["dimension"] == dim])
        scale = SCALES[dim]
        pooled = np.vstack([ref_matrix, matrix]) if pool_reference else matrix
        rows.append(
            {
                "Metric": AGREEMENT_NAMES.get(dim, dim),
                "Cohen's κ": mean_pairwise_cohen(ref_matrix[0], matrix, categories=scale.categories)
                if len(names) and len(ref_matrix)
                else float("nan"),
                "Fleiss' κ": fleiss_kappa(pooled, categories=scale.categories),
                "Krippendorff's α": krippendorff_alpha(
                    pooled,
                    level=scale.level,
                    categories=scale.categories,  # type: ignore[arg-type]
                ),
                "α level": scale.level,
                "items": len(items),
                "raters": len(names),
            }
        )
    return pd.DataFrame(rows)

