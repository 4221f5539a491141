"""The paper's figures from a run's scores: Figure 4 (per-domain TCR and P of one assistant),
Figure 5 (turn-level personalization) and the radar chart of per-domain P.

Each returns a `plots.FigureResult`: the figure, drawn at the column or text width of the current
`plots` style, its caption (with the offline label where it applies) and source (N), and the numbers
drawn. `FigureResult.save` writes them byte-identically from run to run.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from personalens_utils.analysis.tables import table_rows
from personalens_utils.assistants.python import row_label
from personalens_utils.measures.display import CLUSTER, MAIN_SETTING, provenance_note, score_source
from personalens_utils.measures.scores import (
    PERSONALIZATION,
    SCALES,
    TASK_COMPLETION,
    Provenance,
    aggregate,
    aggregate_columns,
    explode_domains,
    provenance,
)
from personalens_utils.measures.stats import bootstrap_ci, no_intervals_note, too_few_clusters
from personalens_utils.outputs.frames import rows_of
from personalens_utils.outputs.plots import (
    FigureResult,
    LegendFit,
    Span,
    current_style,
    fit_legend,
    greyscale_styles,
    label_spokes,
    mark_offline,
    new_figure,
    scale_limits,
)
from personalens_utils.outputs.tables import Source

REPRESENTATIVE_DOMAINS = ("Movies", "Music", "Messaging")
MIN_DIALOGUES_PER_TURN = 5
RADAR_HOLE = 0.25
RADAR_MARGIN = 0.08
"""Room inside a radar chart below its scale's lowest score, as a share of the scale: a polygon of
lowest scores draws as its own ring, not along the edge of the chart's hole."""
"""Radius below the lowest score, as a share of the scale, so the lowest score is a ring, not a point."""
RADAR_CHART_IN = {"column": 2.9, "text": 3.6}
"""Height of the radar chart with its spoke labels and the offline note, at each width; a legend below
the chart adds its own height. At text width the chart's height, not the width, sets its size."""
RADAR_NOTE_IN = 0.2
"""Room for the offline note above a legend beside the chart: that legend is centred on the figure's
height, so it must be this much shorter than the chart at both ends."""
RADAR_LEGEND_SHARE = 0.33
"""Share of the text width a legend beside the radar chart may take; the chart keeps the rest."""
RADAR_LEGEND_COLUMNS = {"column": 2, "text": 3}
"""The most legend columns below the chart at each width."""
RADAR_HANDLE = 2.6
"""Legend handle length (font sizes): long enough to show each polygon's dash pattern."""
DOMAIN_DIMENSIONS = (TASK_COMPLETION, PERSONALIZATION)
"""What the per-domain figures show."""


def domain_scores(
    tidy: pd.DataFrame,
    *,
    assistant_model: str | None = None,
    setting: str = MAIN_SETTING,
    task_types: Sequence[str] = ("SD",),
    seed: int = 0,
) -> pd.DataFrame:
    """TCR and P per domain (and per assistant model), with intervals; MD dialogues count to each domain."""
    keep = (tidy["assistant_setting"] == setting) & tidy["task_type"].isin(task_types)
    if assistant_model is not None:
        keep &= tidy["assistant_model"] == assistant_model
    if not keep.any():
        raise ValueError(f"no judged dialogues for {assistant_model or 'any model'} under {setting!r}")
    by = ["domain"] if assistant_model is not None else ["assistant_model", "domain"]
    read = [*aggregate_columns(tidy, ["assistant_model"]), "domains"]  # explode only what aggregate reads
    part = tidy.loc[keep & tidy["dimension"].isin(DOMAIN_DIMENSIONS), read]
    return aggregate(explode_domains(part), by, DOMAIN_DIMENSIONS, seed=seed)


def figure4(
    tidy: pd.DataFrame,
    *,
    assistant_model: str,
    setting: str = MAIN_SETTING,
    task_types: Sequence[str] = ("SD",),
    seed: int = 0,
    span: Span = "text",
) -> FigureResult:
    """Per-domain TCR and P for one assistant (at text width unless `span` says column; `at` draws the
    other); the dashed line is its mean over all dialogues.

    Bars start at the bottom of each scale (0% for TCR, 1 for P), so a bar's length is its distance
    from the worst score. A panel whose every domain has the same score says so inside it, since a
    row of equal bars looks like a drawing error. Below `stats.MIN_CLUSTERS` users the bars have no
    error bars and NaN bounds in the data, as Table 3 prints no interval there.
    """
    per_domain = domain_scores(
        tidy, assistant_model=assistant_model, setting=setting, task_types=task_types, seed=seed
    )
    keep = ((tidy["assistant_model"] == assistant_model) & (tidy["assistant_setting"] == setting)
            & tidy["task_type"].isin(task_types))
    part = table_rows(tidy, keep, ["assistant_model"])
    made, source = provenance(part), score_source(part)
    overall = {dim: part.loc[part["dimension"] == dim, "score"].dropna().mean() for dim in DOMAIN_DIMENSIONS}
    users = part.loc[part["dimension"].isin(DOMAIN_DIMENSIONS) & part["score"].notna(), CLUSTER].nunique()
    del part  # the drawing (kept for `at`) holds the means, not the rows
    intervals = not too_few_clusters(users)
    if not intervals:
        per_domain = per_domain.assign(ci_low=np.nan, ci_high=np.nan)

    def draw(width: Span) -> Figure:
        fig, axes = new_figure(width, 3.6 if width == "text" else 4.2, nrows=2, ncols=1, sharex=True)
        domains = sorted(per_domain["domain"].unique())
        x = np.arange(len(domains))
        for ax, dim, color in zip(axes, (TASK_COMPLETION, PERSONALIZATION), ("C0", "C1"), strict=True):
            factor = 100 if dim == TASK_COMPLETION else 1
            scale = SCALES[dim]
            low, high = scale.low * factor, scale.high * factor
            sel = per_domain[per_domain["dimension"] == dim].set_index("domain").reindex(domains)
            err = (np.vstack([sel["mean"] - sel["ci_low"], sel["ci_high"] - sel["mean"]]) if intervals
                   else None)
            ax.bar(x, sel["mean"] - low, bottom=low, yerr=err, color=color, capsize=1.5, width=0.7,
                   error_kw={"lw": 0.7, "ecolor": "0.3"}, zorder=2)
            mean = overall[dim] * factor
            ax.axhline(mean, color="black", ls=(0, (4, 2)), lw=1.1, zorder=4,
                       label=f"mean over all domains: {mean:.2f}")
            name = "TCR" if dim == TASK_COMPLETION else "P"
            ax.set_ylabel("TCR (%)" if dim == TASK_COMPLETION else f"P ({scale.low}-{scale.high})")
            ax.set_ylim(*scale_limits(low, high))
            ax.set_yticks(np.linspace(low, high, 6 if dim == TASK_COMPLETION else scale.high - scale.low + 1))
            ax.set_xlim(-0.6, len(domains) - 0.4)
            values = sel["mean"].dropna().round(6).unique()
            if len(values) == 1 and len(domains) > 1:
                ax.text(0.5, 0.5, f"{name} is {values[0]:.4g}{'%' if factor == 100 else ''} in every domain",
                        transform=ax.transAxes, ha="center", va="center", zorder=5,
                        bbox={"facecolor": "white", "edgecolor": "0.5", "lw": 0.5, "pad": 2})
            ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.2, frameon=False)
            ax.grid(axis="x", visible=False)
        axes[-1].set_xticks(x, domains, rotation=90)  # vertical labels never overlap their neighbours
        mark_offline(fig, made.backends, made.offline_roles())
        return fig

    kinds, name = "/".join(task_types), row_label(assistant_model)
    shown, thin = (", with 95% bootstrap intervals", "") if intervals else ("", no_intervals_note(users))
    caption = (
        f"Task completion rate (TCR) and personalization (P) of {name} per domain "
        f"({kinds} tasks, {setting!r} setting){shown}; the dashed line is the "
        f"mean over all its dialogues." + thin + provenance_note(made)
    )
    return FigureResult(draw(span), caption, source, per_domain, at=draw)


def turn_curves(turns: pd.DataFrame, *, domains: Sequence[str], seed: int = 0) -> pd.DataFrame:
    """Mean turn-level P per turn for each domain and for all SD dialogues, with intervals.

    Turns scored in fewer than MIN_DIALOGUES_PER_TURN dialogues are left out: a handful of long
    dialogues would otherwise draw the tail of every curve.
    """
    sd = turns.loc[turns["task_type"] == "SD", ["domains", "turn", "score"]]
    groups = {"All SD tasks": sd}
    combinations = set(sd["domains"])  # a few hundred tuples, each shared by many rows
    for dom in domains:
        groups[dom] = sd[sd["domains"].map({ds: dom in ds for ds in combinations})]
    rows = []
    for label, frame in groups.items():
        for turn, part in frame.groupby("turn"):
            if len(part) < MIN_DIALOGUES_PER_TURN:
                continue
            ci = bootstrap_ci(part["score"].to_numpy(), seed=seed)
            rows.append({"series": label, "turn": int(turn), **ci.as_dict()})
    return pd.DataFrame(rows, columns=["series", "turn", "mean", "ci_low", "ci_high", "n"])


def figure5(
    turns: pd.DataFrame,
    *,
    assistant_model: str,
    setting: str = MAIN_SETTING,
    domains: Sequence[str] = REPRESENTATIVE_DOMAINS,
    backend_names: Collection[str] = (),
    seed: int = 0,
    span: Span = "column",
) -> FigureResult:
    """Turn-level personalization against turn number (at column width unless `span` says text; `at`
    draws the other), for representative domains and all SD tasks; each series has its own colour,
    dash pattern and marker. Below `stats.MIN_CLUSTERS` users of SD tasks no bands are drawn and the
    data's bounds are NaN, as Table 3 prints no interval there. What made the numbers is read from the
    rows (`scores.turn_frame` keeps their run identity); `backend_names` stands in for rows without it."""
    keep = (turns["assistant_model"] == assistant_model) & (turns["assistant_setting"] == setting)
    part = rows_of(turns, keep)
    if part.empty:
        raise ValueError(f"no turn-level personalization scores for {assistant_model!r} under {setting!r}")
    made = provenance(part)
    if not made.backends:
        made = Provenance(frozenset(backend_names), {}, {})
    curves = turn_curves(part, domains=domains, seed=seed)
    users = part.loc[part["task_type"] == "SD", CLUSTER].nunique()
    intervals = not too_few_clusters(users)
    if not intervals:
        curves = curves.assign(ci_low=np.nan, ci_high=np.nan)
    scale = SCALES[PERSONALIZATION]

    def draw(width: Span) -> Figure:
        fig, ax = new_figure(width, 2.6)
        series = list(dict.fromkeys(curves["series"]))
        for label, style in zip(series, greyscale_styles(len(series)), strict=True):
            sel = curves[curves["series"] == label]
            overall = label == "All SD tasks"  # drawn last, over the domains, which it summarises
            if overall:
                style = {**style, "color": "black", "lw": 1.6}
            ax.plot(sel["turn"], sel["mean"], label=label, zorder=4 if overall else 3, **style)
            if intervals:
                ax.fill_between(sel["turn"], sel["ci_low"], sel["ci_high"], alpha=0.12, color=style["color"],
                                lw=0)
        ax.set_xlabel("Assistant turn")
        ax.set_ylabel(f"Turn-level P ({scale.low}-{scale.high})")
        ax.set_ylim(*scale_limits(scale.low, scale.high))
        ax.set_yticks(np.arange(scale.low, scale.high + 1))
        if len(curves):
            first, last = int(curves["turn"].min()), int(curves["turn"].max())
            step = max(1, int(np.ceil((last - first + 1) / (8 if width == "column" else 16))))
            ax.set_xticks(np.arange(first, last + 1, step))
        fig.legend(loc="outside lower center", ncol=2 if width == "column" else 4, frameon=False,
                   handlelength=2.6)
        mark_offline(fig, made.backends, made.offline_roles())
        return fig

    name = row_label(assistant_model)  # a Python assistant by its class, not its file's path
    shown, thin = (", with 95% bootstrap intervals", "") if intervals else ("", no_intervals_note(users))
    caption = (
        f"Mean turn-level personalization of {name} at each assistant turn ({setting!r} setting), "
        f"for {', '.join(domains)} and all SD tasks{shown}; turns scored in fewer "
        f"than {MIN_DIALOGUES_PER_TURN} dialogues are left out." + thin + provenance_note(made)
    )
    source = Source.of(
        part.attrs.get("origin", "turn-level scores"),
        part["dialogue_id"].nunique(),
        "judged SD and MD dialogues",
        made.backends,
        [assistant_model],
    )
    return FigureResult(draw(span), caption, source, curves, at=draw)


def _radar_legend(names: Sequence[str], width: Span) -> tuple[LegendFit, bool]:
    """The radar chart's legend at `width`, and whether it stands beside the chart: across the page when
    it fits beside the chart's height, else below it in as many columns as fit."""
    page = current_style().width(width)
    if width == "text":
        beside = fit_legend(names, page * RADAR_LEGEND_SHARE, max_columns=1, handlelength=RADAR_HANDLE)
        if beside.height + 2 * RADAR_NOTE_IN <= RADAR_CHART_IN[width]:
            return beside, True
    below = fit_legend(names, page, max_columns=RADAR_LEGEND_COLUMNS[width], handlelength=RADAR_HANDLE)
    return below, False


def radar_chart(
    tidy: pd.DataFrame,
    *,
    setting: str = MAIN_SETTING,
    task_types: Sequence[str] = ("SD",),
    seed: int = 0,
    span: Span = "column",
) -> FigureResult:
    """Per-domain personalization (at column width unless `span` says text; `at` draws the other), one
    polygon (colour, dashes, marker) per assistant.

    The radius starts below the scale's lowest score, so an assistant scoring 1 everywhere draws a
    small ring rather than a dot at the centre. The rings' values are in the caption, not on the rings,
    where a polygon near them would run through the label. The legend names assistants as table rows
    do (`row_label`), in as many columns as fit the width, a long name wrapped, and the figure grows
    by the legend's height, so no name is cut off however many there are.
    """
    per = domain_scores(tidy, setting=setting, task_types=task_types, seed=seed)
    per = per[per["dimension"] == PERSONALIZATION]
    wide = per.pivot_table(index="assistant_model", columns="domain", values="mean")
    part = table_rows(tidy, (tidy["assistant_setting"] == setting) & tidy["task_type"].isin(task_types),
                      ["assistant_model"])
    made = provenance(part)
    scale = SCALES[PERSONALIZATION]

    rings = np.arange(scale.low, scale.high + 0.5, 1.0)
    names = [row_label(str(model)) for model in wide.index]

    def draw(width: Span) -> Figure:
        domains = list(wide.columns)
        angles = np.linspace(0, 2 * np.pi, len(domains), endpoint=False)
        legend, beside = _radar_legend(names, width)
        height = RADAR_CHART_IN[width] + (0 if beside else legend.height)
        fig, ax = new_figure(width, height, subplot_kw={"projection": "polar"})
        closed = np.append(angles, angles[0])
        for (model, row), style in zip(wide.iterrows(), greyscale_styles(len(wide)), strict=True):
            values = row.to_numpy(dtype=float)
            ax.plot(closed, np.append(values, values[0]), lw=1.1, ms=3, label=model, **style)
            ax.fill(closed, np.append(values, values[0]), color=style["color"], alpha=0.06)
        inner = scale.low - RADAR_MARGIN * (scale.high - scale.low)  # a polygon at the lowest score
        ax.set_rorigin(inner - RADAR_HOLE * (scale.high - scale.low))  # stays off the hole's edge
        ax.set_ylim(inner, scale.high)
        ax.set_yticks(rings, [])  # ring values in the caption: a label on a ring would sit on the data
        label_spokes(ax, angles, domains)
        fig.legend(ax.get_lines(), legend.labels, loc=f"outside {'right' if beside else 'lower'} center",
                   ncol=legend.columns, frameon=False, handlelength=RADAR_HANDLE)
        mark_offline(fig, made.backends, made.offline_roles())
        return fig

    caption = (
        f"Personalization (P, {scale.low}-{scale.high}; rings at {', '.join(f'{r:g}' for r in rings)} from "
        f"the centre out) "
        f"per domain of each assistant model ({'/'.join(task_types)} tasks, {setting!r} setting)."
        + provenance_note(made)
    )
    return FigureResult(draw(span), caption, score_source(part), per, at=draw)
