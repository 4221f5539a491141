"""R2: whether the assistants' order survives a change of user agent or judge, pair by pair, and how
far the rankings of all conditions agree (Kendall's W)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from personalens_utils.assistants.python import row_label
from personalens_utils.measures.bootstrap import method_note, paired_difference
from personalens_utils.measures.design import ARM, SCORE, TASK, USER
from personalens_utils.measures.display import CLUSTER, score_source
from personalens_utils.measures.scores import SCALES
from personalens_utils.measures.stats import DEFAULT_RESAMPLES, Interval, shown_interval, withheld_note
from personalens_utils.outputs.tables import TableResult
from personalens_utils.prompt_templates.user_styles import COOPERATIVE
from personalens_utils.robustness.conditions import (
    ASSISTANT,
    LABEL,
    SCENARIO,
    conditions_in,
    roles_note,
    scenario_scores,
    with_conditions,
)
from personalens_utils.runstore.identity import USER_STYLE


def _design(scores: pd.DataFrame) -> pd.DataFrame:
    """Scenario scores as the design frame `measures.bootstrap` pairs and resamples."""
    return pd.DataFrame({USER: scores[CLUSTER], TASK: scores[SCENARIO].astype(str),
                         ARM: scores[ASSISTANT].astype(str), SCORE: scores["score"]})


def _reference(frame: pd.DataFrame, conditions: list[str]) -> str:
    """The condition an order is compared with: the first with the paper's cooperative user agent."""
    cooperative = set(frame.loc[frame[USER_STYLE] == COOPERATIVE, LABEL])
    return next((c for c in conditions if c in cooperative), conditions[0])


def pairwise_order_table(tidy: pd.DataFrame, dimension: str, *, seed: int = 0,
                         n_resamples: int = DEFAULT_RESAMPLES) -> TableResult:
    """For each pair of assistants: in how many conditions the first scores above the second, in how
    many the paired difference's interval excludes 0, and the conditions whose order differs from the
    reference condition's (the first cooperative one). Kendall's W of all rankings is in the caption."""
    frame = with_conditions(tidy)
    scores = scenario_scores(frame, dimension)
    conditions = conditions_in(frame)
    reference = _reference(frame, conditions)
    assistants = sorted(scores[ASSISTANT].astype(str).unique())
    rows, long, withheld = [], [], []
    for first, second in combinations(assistants, 2):
        signs: dict[str, float] = {}
        excluded = 0
        for condition in conditions:
            design = _design(scores[scores[LABEL] == condition])
            if not {first, second} <= set(design[ARM]):
                continue
            found = paired_difference(design, first, second, n_resamples=n_resamples, seed=seed)
            diff = found.difference
            withheld.append(diff.withheld)
            signs[condition] = float(np.sign(diff.estimate))
            excluded += int(not np.isnan(diff.low) and (diff.low > 0 or diff.high < 0))
            long.append({"first": first, "second": second, "condition": condition, **diff.as_dict("diff_"),
                         "p_permutation": found.p_permutation})
        flips = [c for c, sign in signs.items() if reference in signs and sign != signs[reference]]
        rows.append({"Pair": f"{row_label(first)} vs {row_label(second)}",
                     "First higher": f"{sum(s > 0 for s in signs.values())}/{len(signs)}",
                     "Interval excludes 0": f"{excluded}/{len(signs)}",
                     "Order differs from reference in": "; ".join(flips) or "none"})
    w = kendalls_w(tidy, dimension, seed=seed, n_resamples=n_resamples)
    caption = (
        f"How often each pair of assistants keeps its order in {SCALES[dimension].short} across "
        f"{len(conditions)} conditions (user agent model and style / judge): conditions where the first "
        "scores higher (mean difference over the scenarios both were run on), where the difference's "
        f"interval excludes 0 ({method_note()}), and those whose order differs from the reference, "
        f"{reference}. "
        f"Kendall's W of the assistants' rankings over conditions (tie-corrected; 1: every condition ranks "
        f"them alike): {w_text(w)}."
        + withheld_note(withheld) + roles_note(frame)
    )
    return TableResult(pd.DataFrame(rows), caption, score_source(frame), pd.DataFrame(long))


def w_text(w: Interval) -> str:
    """Kendall's W as a caption or a notebook prints it: with its interval over users, or alone with the
    reason the interval is withheld (never a bare estimate that reads as certain)."""
    if np.isnan(w.estimate):
        return "n/a (it needs two conditions and two assistants scored under each, and not every tie)"
    if w.withheld or np.isnan(w.low):
        return f"{w.estimate:.2f} (no interval: {w.withheld or 'the resamples gave none'})"
    return f"{w.estimate:.2f} [{w.low:.2f}, {w.high:.2f}] ({w.confidence:.0%}, resampling users)"


def kendall_w_of_ranks(means: np.ndarray) -> float:
    """Kendall's W of a conditions x assistants matrix of scores, ranks averaged over ties and the
    denominator corrected for them; NaN when fewer than two of either or every condition ties all."""
    m, n = means.shape
    if m < 2 or n < 2:
        return float("nan")
    ranks = rankdata(means, axis=1)
    spread = float(np.sum((ranks.sum(axis=0) - m * (n + 1) / 2) ** 2))
    ties = sum(float(np.sum(counts**3 - counts)) for counts in
               (np.unique(row, return_counts=True)[1] for row in ranks))
    denominator = m**2 * (n**3 - n) - m * ties
    return 12 * spread / denominator if denominator > 0 else float("nan")


def kendalls_w(tidy: pd.DataFrame, dimension: str, *, confidence: float = 0.95,
               n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """Kendall's W of the assistants' rankings over conditions (conditions rate, assistants are rated),
    with a percentile interval from resampling users: each resample recomputes every condition's
    means over the drawn users' scenarios, then W. n: users; withheld below `MIN_CLUSTERS` users."""
    scores = scenario_scores(with_conditions(tidy), dimension)
    grouped = scores.groupby([LABEL, ASSISTANT, CLUSTER], sort=True, observed=True)["score"]
    cells = grouped.agg(["sum", "count"])
    sums = cells["sum"].unstack(CLUSTER, fill_value=0.0)
    counts = cells["count"].unstack(CLUSTER, fill_value=0)
    shape = (len(sums.index.levels[0]), len(sums.index.levels[1]), sums.shape[1])
    full = pd.MultiIndex.from_product(sums.index.levels)
    s = sums.reindex(full, fill_value=0.0).to_numpy().reshape(shape)
    c = counts.reindex(full, fill_value=0).to_numpy().reshape(shape)
    held = (c.sum(axis=2) > 0).all(axis=0)  # assistants scored under every condition
    s, c = s[:, held], c[:, held]
    users = shape[2]
    estimate = kendall_w_of_ranks(s.sum(axis=2) / c.sum(axis=2))
    if np.isnan(estimate):
        return Interval(estimate, float("nan"), float("nan"), users, confidence)
    rng = np.random.default_rng(seed)
    draws = np.empty(n_resamples)
    for i in range(n_resamples):
        drawn = rng.integers(0, users, size=users)
        with np.errstate(invalid="ignore", divide="ignore"):
            draws[i] = kendall_w_of_ranks(s[:, :, drawn].sum(axis=2) / c[:, :, drawn].sum(axis=2))
    draws = draws[~np.isnan(draws)]
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail]) if len(draws) else (np.nan, np.nan)
    return shown_interval(estimate, float(low), float(high), users, confidence, users)
