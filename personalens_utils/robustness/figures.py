"""The ranking figure: each assistant's rank under every condition, so a reader sees at a glance
where lines cross, i.e. where a change of user agent or judge reorders the assistants."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy.stats import rankdata

from personalens_utils.assistants.python import row_label
from personalens_utils.measures.display import score_source
from personalens_utils.measures.scores import SCALES, provenance
from personalens_utils.outputs.plots import (
    FigureResult,
    Span,
    fit_legend,
    greyscale_styles,
    mark_offline,
    new_figure,
)
from personalens_utils.robustness.conditions import (
    ASSISTANT,
    LABEL,
    conditions_in,
    roles_note,
    scenario_scores,
    with_conditions,
)


def condition_ranks(tidy: pd.DataFrame, dimension: str) -> pd.DataFrame:
    """Long: each assistant's mean and rank (1 = best, ties averaged) under each condition."""
    frame = with_conditions(tidy)
    means = scenario_scores(frame, dimension).groupby([LABEL, ASSISTANT], observed=True)["score"].mean()
    wide = means.unstack(ASSISTANT).reindex(conditions_in(frame))
    ranks = pd.DataFrame(rankdata(-wide.to_numpy(), axis=1, nan_policy="omit"), index=wide.index,
                         columns=wide.columns)
    return pd.concat({"mean": wide.stack(), "rank": ranks.stack()}, axis=1).reset_index()


def ranking_figure(tidy: pd.DataFrame, dimension: str, *, span: Span = "column") -> FigureResult:
    """A bump chart: conditions along x, each assistant's rank by mean `dimension` as one line."""
    frame = with_conditions(tidy)
    long = condition_ranks(frame, dimension)
    conditions = conditions_in(frame)
    assistants = sorted(long[ASSISTANT].astype(str).unique())
    made = provenance(frame)
    keys = [f"C{i}" for i in range(1, len(conditions) + 1)]  # a condition's label is too long for an axis

    def draw(width: Span) -> Figure:
        fig, ax = new_figure(width, 1.5 + 0.12 * len(assistants))
        x = np.arange(len(conditions))
        for style, assistant in zip(greyscale_styles(len(assistants)), assistants, strict=True):
            ranks = long[long[ASSISTANT] == assistant].set_index(LABEL)["rank"].reindex(conditions)
            ax.plot(x, ranks.to_numpy(), label=row_label(assistant), **style)
        ax.set_xticks(x, keys)
        ax.set_xlabel("condition")
        ax.set_yticks(np.arange(1, len(assistants) + 1))
        ax.set_ylim(len(assistants) + 0.4, 0.6)  # rank 1 on top
        ax.set_ylabel(f"rank by {SCALES[dimension].short}")
        ax.grid(axis="x", visible=False)
        handles, labels = ax.get_legend_handles_labels()
        fits = fit_legend(labels, fig.get_figwidth(), max_columns=3,
                          handlelength=mpl.rcParams["legend.handlelength"])
        fig.legend(handles, fits.labels, loc="outside lower center", ncols=fits.columns, frameon=False)
        mark_offline(fig, made.backends, made.offline_roles())
        return fig

    caption = (f"Each assistant's rank by mean {SCALES[dimension].short} (1: best) under each condition "
               "(user agent model and style / judge); lines that cross mark a reordering. "
               + "; ".join(f"{key}: {label}" for key, label in zip(keys, conditions, strict=True)) + "."
               + roles_note(frame))
    return FigureResult(draw(span), caption, score_source(frame), long, at=draw)
