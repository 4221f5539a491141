"""Where a metric's noise comes from: users, tasks, simulation samples, judge samples.

A score is modelled as nested random effects, y = mean + user + task (within user) + simulation
sample (within scenario) + judge sample (within dialogue), each with its own variance. Each variance
over their sum is that level's share, its intraclass correlation: the share of users is how alike two
scores of one user are on different tasks; a large share of judge samples says that judging the same
dialogue again moves the score.

Two estimators, one answer on balanced data:
- `anova` (default): the hierarchical ANOVA (Henderson's method I for nested designs). Each level's
  sum of squares about its parent's mean has an expectation that is a known linear combination of
  the variances below it, with coefficients from the unit sizes (so unbalanced designs are handled);
  the triangular system is solved from the bottom up. Closed form, a few group-bys, milliseconds on a
  full run; an estimate below zero is set to zero (and flagged).
- `mixedlm`: statsmodels' REML mixed model with the user as group and tasks and samples as variance
  components. Never negative and efficient on unbalanced data, but iterative and 50-150 times slower
  (38 s against 0.25 s on 36,000 judgments, `benchmarks/trust_timing.py`, docs/trust.md), so it is
  the cross-check on a pilot, not the default on a full run.

A level with no replication (one simulation sample per scenario, one judge sample per dialogue) cannot
be told apart from the level above it: its variance is counted there, and the table says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from personalens_utils.assistants.python import row_label
from personalens_utils.measures.design import (
    ARM,
    JUDGE_SAMPLE,
    LEVELS,
    SAMPLE,
    SCORE,
    TASK,
    USER,
    DesignError,
    check_design,
    design_frame,
)
from personalens_utils.measures.display import provenance_note, score_source
from personalens_utils.measures.scores import SCALES, backends
from personalens_utils.outputs.plots import FigureResult, Span, greyscale_styles, mark_offline, new_figure
from personalens_utils.outputs.tables import TableResult

ANOVA, MIXEDLM = "anova", "mixedlm"
METHODS = (ANOVA, MIXEDLM)
LEVEL_NAMES = {USER: "user", TASK: "task", SAMPLE: "simulation sample", JUDGE_SAMPLE: "judge sample"}
COLUMNS = ["assistant", "dimension", "component", "variance", "share", "df", "merged_into", "truncated",
           "method"]


def _units(frame: pd.DataFrame, level: str) -> np.ndarray:
    """Each row's unit number at `level`: a unit is named by the level and every level around it
    (sample 0 of one scenario is not sample 0 of another)."""
    if level == LEVELS[-1]:
        return np.arange(len(frame))
    return frame.groupby(list(LEVELS[: LEVELS.index(level) + 1]), sort=True).ngroup().to_numpy()


def _degrees(frame: pd.DataFrame) -> dict[str, int]:
    """Degrees of freedom of each level: its units minus its parents' units (0: no replication)."""
    units = [1, *(len(np.unique(_units(frame, level))) for level in LEVELS)]
    return {level: units[i + 1] - units[i] for i, level in enumerate(LEVELS)}


def nested_anova(frame: pd.DataFrame, levels: Sequence[str]) -> np.ndarray:
    """ANOVA estimates of the variances of `levels` (outermost first; the last one's units hold one
    row each, the residual): the solution of E[SS] = K sigma^2, where SS_i sums each unit's squared
    distance from its parent's mean weighted by its size, and K[i, j] = sum over units h of level j
    of n_h^2 (1 / n of h's unit at level i - 1 / n of that unit's parent)."""
    y = frame[SCORE].to_numpy(dtype=float)
    codes = [_units(frame, level) for level in levels]
    parents = [np.zeros(len(y), dtype=np.int64), *codes[:-1]]
    sizes = [np.bincount(c) for c in codes]
    means = [np.bincount(c, weights=y) / n for c, n in zip(codes, sizes, strict=True)]
    parent_means = [np.array([y.mean()]), *means[:-1]]
    depth = len(codes)
    ss = np.array([np.sum((means[i][codes[i]] - parent_means[i][parents[i]]) ** 2) for i in range(depth)])
    k = np.zeros((depth, depth))
    for i in range(depth):
        inverse = 1.0 / sizes[i][codes[i]] - 1.0 / np.bincount(parents[i])[parents[i]]
        for j in range(i, depth):
            k[i, j] = np.sum(sizes[j][codes[j]] * inverse)
    return np.linalg.solve(k, ss)


def mixedlm_variances(frame: pd.DataFrame, levels: Sequence[str]) -> np.ndarray:
    """REML estimates (statsmodels MixedLM) of the same variances: the outermost level as the group,
    the levels inside it as variance components, the last level as the residual (the scale)."""
    import statsmodels.formula.api as smf

    if len(levels) < 2:
        raise DesignError("the mixed model needs at least two levels with repeats; use method='anova'")
    data = pd.DataFrame({SCORE: frame[SCORE].to_numpy(dtype=float),
                         **{level: _units(frame, level) for level in levels[:-1]}})
    components = {level: f"0 + C({level})" for level in levels[1:-1]}
    model = smf.mixedlm(f"{SCORE} ~ 1", data, groups=data[levels[0]], re_formula="1",
                        vc_formula=components or None)
    fit = model.fit(reml=True, method=["lbfgs"])
    vc = dict(zip(model.exog_vc.names, map(float, fit.vcomp), strict=True)) if components else {}
    return np.array([float(fit.cov_re.iloc[0, 0]), *(vc[level] for level in levels[1:-1]), float(fit.scale)])


def decompose_design(frame: pd.DataFrame, *, method: str = ANOVA) -> pd.DataFrame:
    """Variance components of one arm and metric (a design frame): one row per level with its
    variance, its share of the total (the level's ICC), its degrees of freedom, the level it is
    counted in when it has no repeats, and whether a negative estimate was set to zero."""
    check_design(frame, (*LEVELS, SCORE))
    if method not in METHODS:
        raise DesignError(f"unknown variance method {method!r}; choose one of {list(METHODS)}")
    df = _degrees(frame)
    kept = [level for level in LEVELS if df[level] > 0]
    if len(kept) < 2:
        raise DesignError(f"too few users, tasks or repeats to split the variance (degrees of freedom {df})")
    raw = nested_anova(frame, kept) if method == ANOVA else mixedlm_variances(frame, kept)
    estimates = dict(zip(kept, map(float, raw), strict=True))
    variance = {level: max(0.0, value) for level, value in estimates.items()}
    total = sum(variance.values())
    rows = []
    for level in LEVELS:
        measured = level in variance
        host = next((h for h in reversed(LEVELS[: LEVELS.index(level)]) if h in variance), None)
        rows.append({"component": LEVEL_NAMES[level],
                     "variance": variance[level] if measured else float("nan"),
                     "share": variance[level] / total if measured and total > 0 else float("nan"),
                     "df": df[level],
                     "merged_into": "" if measured or host is None else LEVEL_NAMES[host],
                     "truncated": bool(measured and estimates[level] < 0),
                     "method": method})
    return pd.DataFrame(rows)


def decompose(tidy: pd.DataFrame, dimensions: Sequence[str], *, arm: str = "assistant_model",
              method: str = ANOVA) -> pd.DataFrame:
    """Variance components of every arm (e.g. assistant model) and dimension of a tidy score frame,
    long: `assistant`, `dimension`, `component`, `variance`, `share`, `df`, `merged_into`, `truncated`,
    `method`. Task completion in percent points squared (the tables' unit)."""
    parts = []
    for dimension in dimensions:
        design = design_frame(tidy, dimension, arm=arm)
        for name, frame in design.groupby(ARM, sort=True):
            parts.append(decompose_design(frame, method=method).assign(assistant=name, dimension=dimension))
    return pd.DataFrame(pd.concat(parts, ignore_index=True), columns=COLUMNS)


def _cell(row: pd.Series) -> str:
    if row["merged_into"]:
        return f"in {row['merged_into']}"
    if np.isnan(row["variance"]):
        return "n/a"
    mark = "*" if row["truncated"] else ""
    share = "" if np.isnan(row["share"]) else f" ({row['share']:.0%})"  # NaN: every variance is 0
    return f"{row['variance']:.3g}{mark}{share}"


def _display(long: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (name, dimension), group in long.groupby(["assistant", "dimension"], sort=True):
        cells = {row["component"]: _cell(row) for _, row in group.iterrows()}
        rows.append({"Assistant": row_label(name), "Metric": SCALES[dimension].short,
                     **{LEVEL_NAMES[level].capitalize(): cells[LEVEL_NAMES[level]] for level in LEVELS}})
    return pd.DataFrame(rows)


def _repeats_note(tidy: pd.DataFrame, dimensions: Sequence[str], arm: str) -> str:
    design = design_frame(tidy, dimensions[0], arm=arm)
    samples = design.groupby([ARM, USER, TASK])[SAMPLE].nunique()
    judges = design.groupby([ARM, USER, TASK, SAMPLE])[JUDGE_SAMPLE].nunique()
    return (f"{design[USER].nunique()} users, {design.groupby(ARM)[TASK].nunique().max()} scenarios, "
            f"{_span(samples)} simulation samples per scenario, {_span(judges)} judge samples per dialogue")


def _span(counts: pd.Series) -> str:
    low, high = int(counts.min()), int(counts.max())
    return str(low) if low == high else f"{low}-{high}"


def variance_table(tidy: pd.DataFrame, dimensions: Sequence[str] = ("task_completion", "personalization"), *,
                   arm: str = "assistant_model", method: str = ANOVA) -> TableResult:
    """The variance decomposition of each assistant and metric: each level's variance and, in
    brackets, its share of the total (its ICC)."""
    long = decompose(tidy, dimensions, arm=arm, method=method)
    how = ("hierarchical ANOVA (method of moments; negative estimates set to 0, marked *)" if method == ANOVA
           else "REML mixed model (statsmodels MixedLM)")
    caption = (
        "Where each score's variance comes from: users, tasks within a user, simulation samples of a "
        "scenario and judge samples of a dialogue; each cell is the variance (TCR in %², other metrics in "
        f"their scale's units²) and its share of the total, the level's intraclass correlation. Estimated by "
        f"{how} on {_repeats_note(tidy, dimensions, arm)}. \"in task\": a level without repeats cannot be "
        "told apart from the level above it and is counted there." + provenance_note(backends(tidy))
    )
    return TableResult(_display(long), caption, score_source(tidy), long)


def variance_figure(tidy: pd.DataFrame, dimensions: Sequence[str] = ("task_completion", "personalization"), *,
                    arm: str = "assistant_model", method: str = ANOVA, span: Span = "column") -> FigureResult:
    """Stacked bars of each level's share of the variance, one bar per assistant and metric
    (`at` draws it at the other width)."""
    long = decompose(tidy, dimensions, arm=arm, method=method)
    shares = long.pivot_table(index=["assistant", "dimension"], columns="component", values="share",
                              sort=True).reindex(columns=[LEVEL_NAMES[level] for level in LEVELS]).fillna(0.0)
    labels = [f"{name}, {SCALES[dim].short}" for name, dim in shares.index]
    used = backends(tidy)

    def draw(width: Span) -> Figure:
        fig, ax = new_figure(width, 0.9 + 0.28 * len(labels))
        left = np.zeros(len(labels))
        hatches = ("", "//", "..", "xx")
        styles = greyscale_styles(len(LEVELS))
        for style, hatch, component in zip(styles, hatches, shares.columns, strict=True):
            values = shares[component].to_numpy()
            ax.barh(np.arange(len(labels)), values, left=left, color=style["color"], hatch=hatch,
                    edgecolor="white", linewidth=0.4, label=component)
            left += values
        ax.set_yticks(np.arange(len(labels)), labels)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of variance (ICC)")
        ax.grid(axis="y", visible=False)
        fig.legend(loc="outside lower center", ncols=2, frameon=False)  # below: long labels fill the width
        mark_offline(fig, used)
        return fig

    caption = (
        "Share of each metric's variance due to users, tasks within a user, simulation samples and judge "
        f"samples, per assistant ({'ANOVA' if method == ANOVA else 'REML'} estimates; a level without "
        "repeats is counted in the level above it)." + provenance_note(used)
    )
    return FigureResult(draw(span), caption, score_source(tidy), long, at=draw)
