"""R5: reliability over repeats. A mean task completion rate hides whether an assistant succeeds on a
scenario every time or half the time; pass^k (tau-bench) is the chance that all k tries of a scenario
succeed, and it falls with k the faster the less reliable the assistant is."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import comb

from personalens_utils.assistants.python import row_label
from personalens_utils.measures.bootstrap import cluster_ci, method_note
from personalens_utils.measures.display import CLUSTER, fmt_ci, score_source
from personalens_utils.measures.scores import TASK_COMPLETION
from personalens_utils.measures.stats import withheld_note
from personalens_utils.outputs.tables import TableResult
from personalens_utils.robustness.conditions import (
    ASSISTANT,
    LABEL,
    SCENARIO,
    conditions_in,
    roles_note,
    with_conditions,
)

NEEDS_REPEATS = "needs repeats ≥ 2"
TRY = "sample"
"""The column numbering a scenario's tries (its simulation samples)."""


def pass_hat_k(tries: np.ndarray, successes: np.ndarray, k: int) -> np.ndarray:
    """tau-bench's unbiased pass^k of each scenario from its n tries and c successes: C(c, k) / C(n, k),
    the chance that k tries drawn without replacement all succeeded; NaN where n < k."""
    with np.errstate(invalid="ignore", divide="ignore"):
        found = comb(successes, k, exact=False) / comb(tries, k, exact=False)
    return np.where(tries >= k, found, np.nan)


def scenario_tries(tidy: pd.DataFrame) -> pd.DataFrame:
    """Per condition, assistant and scenario: its tries and successes. A try is a simulation sample; it
    succeeded when its task-completion judgments (over judge samples) mostly say so."""
    frame = with_conditions(tidy)
    part = frame[(frame["dimension"] == TASK_COMPLETION) & frame["score"].notna()]
    if TRY not in part.columns:
        part = part.assign(**{TRY: 0})
    keys = [LABEL, ASSISTANT, CLUSTER, SCENARIO]
    per_try = part.groupby([*keys, TRY], sort=True, observed=True)["score"].mean()
    succeeded = (per_try > 0.5).rename("success").reset_index()
    return succeeded.groupby(keys, sort=True, observed=True).agg(
        tries=("success", "size"), successes=("success", "sum")).reset_index()


def pass_k(tidy: pd.DataFrame, k_max: int | None = None, *, seed: int = 0) -> pd.DataFrame:
    """Long: pass^k (%) per condition, assistant and k = 1..min(k_max, most tries), averaged over the
    scenarios with at least k tries, with a user-clustered interval; empty without repeats."""
    tries = scenario_tries(tidy)
    most = int(tries["tries"].max()) if len(tries) else 0
    top = most if k_max is None else min(k_max, most)
    rows: list[dict[str, object]] = []
    if most < 2:
        return pd.DataFrame(rows, columns=[LABEL, ASSISTANT, "k", "mean", "ci_low", "ci_high", "n",
                                           "withheld"])
    for (condition, assistant), group in tries.groupby([LABEL, ASSISTANT], sort=True, observed=True):
        for k in range(1, top + 1):
            values = 100.0 * pass_hat_k(group["tries"].to_numpy(), group["successes"].to_numpy(), k)
            kept = ~np.isnan(values)
            found = cluster_ci(values[kept], group[CLUSTER].to_numpy()[kept], seed=seed)
            rows.append({LABEL: condition, ASSISTANT: assistant, "k": k, **found.as_dict(),
                         "withheld": found.withheld})
    return pd.DataFrame(rows)


def pass_k_table(tidy: pd.DataFrame, k_max: int | None = None, *, seed: int = 0) -> TableResult:
    """R5: pass^1..pass^k (%) of task completion per assistant and condition; a table of no rows whose
    caption says it needs repeats ≥ 2 when no scenario was run twice."""
    long = pass_k(tidy, k_max, seed=seed)
    frame = with_conditions(tidy)
    if long.empty:
        caption = (f"Pass^k {NEEDS_REPEATS}: no scenario was simulated more than once, so there is no chance "
                   "of repeated success to estimate; run with repeats ≥ 2." + roles_note(frame))
        empty = pd.DataFrame(columns=["Condition", "Assistant"])
        return TableResult(empty, caption, score_source(frame), long)
    rank = {label: i for i, label in enumerate(conditions_in(frame))}
    long = long.sort_values([LABEL, ASSISTANT, "k"],
                            key=lambda col: col.map(rank) if col.name == LABEL else col)
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for rec in long.to_dict("records"):
        cell = fmt_ci(rec["mean"], rec["ci_low"], rec["ci_high"], 1)
        rows.setdefault((rec[LABEL], row_label(str(rec[ASSISTANT]))), {})[f"pass^{rec['k']}"] = cell
    display = pd.DataFrame([{"Condition": c, "Assistant": a, **cells} for (c, a), cells in rows.items()])
    caption = (
        "Reliability over repeats: pass^k (%), the chance that all k tries of a scenario complete the task, "
        "per condition (user agent model and style / judge) and assistant; estimated without bias from each "
        "scenario's n tries and c successes as C(c, k) / C(n, k) (tau-bench), a try counting as a success "
        "when most of its judgments say so, averaged over the scenarios with at least k tries; in brackets "
        f"{method_note()}." + withheld_note(long["withheld"].tolist()) + roles_note(frame)
    )
    return TableResult(display, caption, score_source(frame), long.drop(columns="withheld"))
