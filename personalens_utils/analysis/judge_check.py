"""Judge sanity check: does a judge rank assistants of known quality in their known order?

The offline backend's reference assistants (`assistants.reference_assistants.DESIGNED_ORDER`) are built so
that each uses strictly more about the user than the one before it. Their dialogues can be judged by
any judge, offline or a real model; a judge worth trusting on real dialogues must score them in that
order. Per dimension this reports Kendall's tau-b between the designed rank and the dialogue's
score, with a bootstrap interval (dialogues resampled within each assistant), each assistant's mean
with its interval, and a verdict: the order is recovered when tau's interval lies above zero, the
lowest and highest assistants' intervals do not overlap, and no neighbouring pair is confidently
reversed.

Scores take few distinct values, so tau-b is computed from the rank x score contingency table, and
a stratified bootstrap resample is a multinomial draw of each assistant's score counts: exact and
fast for any number of dialogues.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from personalens_utils.measures.display import fmt_ci, provenance_note, score_source
from personalens_utils.measures.scores import PERSONALIZATION, SHORT_NAMES, TASK_COMPLETION, provenance
from personalens_utils.measures.stats import DEFAULT_RESAMPLES, bootstrap_ci
from personalens_utils.outputs.tables import TableResult

CHECK_DIMENSIONS = (PERSONALIZATION, TASK_COMPLETION)
"""The dimensions the reference assistants are designed to be ordered on."""


def kendall_tau_b(table: np.ndarray) -> float:
    """Kendall's tau-b of a contingency table (rows and columns both in increasing order).

    NaN when either variable is constant, since no ordering can then be measured.
    """
    table = np.asarray(table, dtype=float)
    # below_right[i, j]: count in rows > i and columns > j; below_left: rows > i and columns < j
    tail_rows = np.cumsum(table[::-1], axis=0)[::-1]
    after = np.vstack([tail_rows[1:], np.zeros((1, table.shape[1]))])
    right = np.cumsum(after[:, ::-1], axis=1)[:, ::-1]
    below_right = np.hstack([right[:, 1:], np.zeros((table.shape[0], 1))])
    left = np.cumsum(after, axis=1)
    below_left = np.hstack([np.zeros((table.shape[0], 1)), left[:, :-1]])
    concordant = float((table * below_right).sum())
    discordant = float((table * below_left).sum())
    n = table.sum()
    pairs = n * (n - 1) / 2
    tied_rows = float((table.sum(axis=1) * (table.sum(axis=1) - 1) / 2).sum())
    tied_cols = float((table.sum(axis=0) * (table.sum(axis=0) - 1) / 2).sum())
    denominator = np.sqrt((pairs - tied_rows) * (pairs - tied_cols))
    return float("nan") if denominator == 0 else (concordant - discordant) / denominator


def _tau_interval(
    table: np.ndarray, confidence: float, n_resamples: int, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile interval of tau-b over stratified resamples (each assistant's dialogues redrawn)."""
    totals = table.sum(axis=1).astype(int)
    shares = table / np.maximum(totals, 1)[:, None]
    draws = np.empty(n_resamples)
    for b in range(n_resamples):
        resample = np.vstack([rng.multinomial(t, share) for t, share in zip(totals, shares, strict=True)])
        draws[b] = kendall_tau_b(resample)
    tail = (1 - confidence) / 2
    low, high = np.nanquantile(draws, [tail, 1 - tail])
    return float(low), float(high)


def _scores_of(tidy: pd.DataFrame, dimension: str, setting: str, order: Sequence[str]) -> pd.DataFrame:
    rows = tidy[
        (tidy["dimension"] == dimension)
        & (tidy["assistant_setting"] == setting)
        & tidy["assistant_model"].isin(order)
    ].dropna(subset=["score"])
    absent = [m for m in order if m not in set(rows["assistant_model"])]
    if absent:
        present = sorted(tidy.loc[tidy["dimension"] == dimension, "assistant_model"].unique())
        raise ValueError(
            f"judge_sanity: no scored {dimension!r} judgments in setting {setting!r} for {absent}; "
            f"the scores hold assistants {present}"
        )
    return rows


def judge_sanity(
    tidy: pd.DataFrame,
    designed_order: Sequence[str],
    *,
    dimensions: Sequence[str] = CHECK_DIMENSIONS,
    setting: str = "base",
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> TableResult:
    """Whether the judge in `tidy` (one judge: `scores.load_scores`) recovers `designed_order`.

    `designed_order` names assistant models from worst to best. One row per dimension: Kendall's
    tau-b between designed rank and score with its interval, each assistant's mean with its
    interval, and the verdict; `data` holds the numbers in long form.
    """
    order = list(designed_order)
    if len(order) < 2 or len(set(order)) != len(order):
        raise ValueError(f"judge_sanity: designed_order needs two or more distinct assistants, got {order}")
    rng = np.random.default_rng(seed)
    rows, long = [], []
    for dimension in dimensions:
        scored = _scores_of(tidy, dimension, setting, order)
        levels = np.sort(scored["score"].unique())
        table = np.vstack([
            [(scored.loc[scored["assistant_model"] == m, "score"] == v).sum() for v in levels] for m in order
        ])
        tau = kendall_tau_b(table)
        tau_low, tau_high = _tau_interval(table, confidence, n_resamples, rng)
        intervals = [
            bootstrap_ci(scored.loc[scored["assistant_model"] == m, "score"].to_numpy(),
                         confidence=confidence, n_resamples=n_resamples, seed=seed)
            for m in order
        ]
        reversed_pairs = [
            f"{order[i]} > {order[i + 1]}"
            for i in range(len(order) - 1)
            if intervals[i].low > intervals[i + 1].high
        ]
        ends_apart = intervals[0].high < intervals[-1].low
        recovered = bool(tau_low > 0 and ends_apart and not reversed_pairs)
        row: dict[str, object] = {
            "Dimension": SHORT_NAMES.get(dimension, dimension),
            "N": len(scored),
            "Kendall tau-b": fmt_ci(tau, tau_low, tau_high),
        }
        row.update({m: fmt_ci(iv.estimate, iv.low, iv.high) for m, iv in zip(order, intervals, strict=True)})
        row.update({
            "Ends apart": "yes" if ends_apart else "no",
            "Reversed": "; ".join(reversed_pairs) or "none",
            "Recovered": "yes" if recovered else "no",
        })
        rows.append(row)
        long.append({"dimension": dimension, "assistant_model": "(all)", "rank": -1,
                     "statistic": "kendall_tau_b", "estimate": tau, "ci_low": tau_low, "ci_high": tau_high,
                     "n": len(scored), "recovered": recovered})
        long += [
            {"dimension": dimension, "assistant_model": m, "rank": rank, "statistic": "mean",
             "estimate": iv.estimate, "ci_low": iv.low, "ci_high": iv.high, "n": iv.n, "recovered": recovered}
            for rank, (m, iv) in enumerate(zip(order, intervals, strict=True))
        ]
    level = round(confidence * 100)
    caption = (
        f"Judge sanity check: does the judge rank the assistants in their designed order "
        f"({' < '.join(order)}), setting {setting}? Kendall's tau-b between designed rank and score and "
        f"each assistant's mean, with {level}% bootstrap intervals; recovered when tau's interval is above "
        f"zero, the lowest and highest do not overlap and no neighbours are confidently reversed."
        + provenance_note(provenance(tidy))
    )
    return TableResult(pd.DataFrame(rows), caption, score_source(tidy), pd.DataFrame(long))
