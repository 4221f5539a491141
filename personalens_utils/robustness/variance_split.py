"""R3: how much of a score's variance the assistant explains, against the user agent (model, style),
the judge and their interactions. If the user agent moves scores more than the assistants differ,
a ranking measured under one user agent says little.

A crossed-factor ANOVA with sequential (type I) sums of squares: they add up to the total sum of
squares on any design, balanced or not, so each share is exact bookkeeping, not an estimate of a
variance component. 07's nested decomposition (`trust.variance`) splits what this calls the residual:
users, tasks and repeats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from personalens_utils.measures.design import PERCENT_DIMENSIONS
from personalens_utils.measures.display import score_source
from personalens_utils.measures.scores import PERSONALIZATION, SCALES, TASK_COMPLETION
from personalens_utils.outputs.tables import TableResult
from personalens_utils.robustness.conditions import (
    ASSISTANT,
    JUDGE_MODEL,
    USER_MODEL,
    roles_note,
    with_conditions,
)
from personalens_utils.runstore.identity import USER_STYLE

FACTORS = {ASSISTANT: "assistant", USER_MODEL: "user model", USER_STYLE: "user style", JUDGE_MODEL: "judge"}
"""The crossed factors, in the order their sums of squares are taken (the assistant first)."""
RESIDUAL, TOTAL = "residual", "total"


def _component(term: str, names: dict[str, str]) -> str:
    """A statsmodels term (`C(f0):C(f2)`) as a reader names it (`assistant × user style`)."""
    return RESIDUAL if term == "Residual" else " × ".join(names[part] for part in term.split(":"))


def split_one(tidy: pd.DataFrame, dimension: str) -> pd.DataFrame:
    """One dimension's sums of squares per factor and interaction, the residual and the total, each with
    its degrees of freedom, its variance (sum of squares / (n - 1)) and its share of the total.
    Factors with a single level in the frame are left out (they explain nothing)."""
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    frame = with_conditions(tidy)
    part = frame[(frame["dimension"] == dimension) & frame["score"].notna()]
    if len(part) < 2:
        raise ValueError(f"too few valid {dimension!r} scores to split their variance")
    factor = 100.0 if dimension in PERCENT_DIMENSIONS else 1.0
    varying = [c for c in FACTORS if part[c].nunique() > 1]
    data = pd.DataFrame({f"f{i}": part[c].astype(str).to_numpy() for i, c in enumerate(varying)})
    data["y"] = part["score"].to_numpy(dtype=float) * factor
    names = {f"C(f{i})": FACTORS[c] for i, c in enumerate(varying)}
    formula = "y ~ " + (" * ".join(names) if names else "1")
    table = anova_lm(smf.ols(formula, data).fit(), typ=1) if names else pd.DataFrame(
        {"df": [len(data) - 1], "sum_sq": [float(np.sum((data["y"] - data["y"].mean()) ** 2))]},
        index=["Residual"])
    total = float(np.sum((data["y"] - data["y"].mean()) ** 2))
    rows = [{"component": _component(str(term), names), "df": float(rec["df"]),
             "sum_sq": float(rec["sum_sq"])} for term, rec in table.iterrows()]
    rows.append({"component": TOTAL, "df": float(len(data) - 1), "sum_sq": total})
    out = pd.DataFrame(rows)
    out["variance"] = out["sum_sq"] / (len(data) - 1)
    out["share"] = out["sum_sq"] / total if total > 0 else np.nan
    return out.assign(dimension=dimension)


def variance_split(tidy: pd.DataFrame,
                   dimensions: Sequence[str] = (TASK_COMPLETION, PERSONALIZATION)) -> TableResult:
    """R3: per dimension, each factor's and interaction's variance and share of the total, the residual
    last; the parts add up to the total variance of single judgments (sum of squares / (n - 1))."""
    long = pd.concat([split_one(tidy, d) for d in dimensions], ignore_index=True)
    frame = with_conditions(tidy)
    display = pd.DataFrame({"Component": list(dict.fromkeys(long["component"]))})
    for dimension in dimensions:
        mine = long[long["dimension"] == dimension].set_index("component")
        tiny = 1e-9 * mine.at[TOTAL, "variance"]  # rounding error of an effect the design has none of
        cells = [f"{max(mine.at[c, 'variance'], 0.0) if mine.at[c, 'variance'] > tiny else 0.0:.3g} "
                 f"({mine.at[c, 'share']:.0%})" if c in mine.index else "n/a" for c in display["Component"]]
        display[SCALES[dimension].short] = cells
    caption = (
        "Where the scores' variance lies across the grid: the assistant, the user agent's model and style, "
        "the judge, their interactions, and the residual (users, scenarios and repeats); each cell is a "
        "variance (TCR in %², P in its scale's units²) and its share of the total. Sequential (type I) sums "
        "of squares of a crossed ANOVA (statsmodels), taken in the order assistant, user model, user style, "
        "judge, each divided by n - 1, so the parts add up exactly to the total, the sample variance of the "
        "single judgments; a factor with one level in the grid is left out." + roles_note(frame)
    )
    return TableResult(display, caption, score_source(frame), long)
