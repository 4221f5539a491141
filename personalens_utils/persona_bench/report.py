"""PERSONA Bench tables and figures: the authors' results layout, per-domain scores, paired gains,
coverage, a radar plot per model and an explorer view of answers beside the truth.

Every table is a `TableResult`, every figure a `FigureResult` (the kit's one style), so they export
as the kit's other tables and figures do. Captions say which way unread answers were counted, the
data label (synthetic data says so) and the offline label where the offline backend answered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.outputs.plots import (
    FigureResult,
    Span,
    current_style,
    greyscale_styles,
    label_spokes,
    mark_offline,
    new_figure,
)
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.persona_bench.items import SETTINGS, TASK_NAMES
from personalens_utils.persona_bench.metrics import LOWER_IS_BETTER, METRICS, NOT_MEASURED, metric_note
from personalens_utils.runstore.records import PersonaPrediction
from personalens_utils.runstore.store import RunStore

MODE_NOTE = {
    "authors": "Unread answers left out, as the authors' evaluators do (3.3 averages leave out ROUGE, "
    "BLEU and METEOR scores of 0 and keep every SBERT cosine, negative ones too, as their GPT "
    "evaluators do).",
    "strict": (
        "Unread answers and failed calls counted wrong (the opposite label, a score of 0, an empty reply)."
    ),
}
RADAR_METRICS = ("Accuracy", "F1", "MCC", "ROUGE-1", "ROUGE-L", "BLEU", "METEOR", "SBERT")
RINGS = (0.25, 0.5, 0.75, 1.0)
"""The radar plot's rings (metric values), named in its caption rather than on the plot."""


def predictions(store: RunStore) -> pd.DataFrame:
    """The stored predictions, one row per record, sorted by id."""
    frame = store.frame(PersonaPrediction)
    if frame.empty:
        raise ValueError(
            f"the run store {store.root} holds no PERSONA Bench predictions: run the items first"
        )
    return frame.sort_values("id").reset_index(drop=True)


def _labels(frame: pd.DataFrame, data_label: str) -> str:
    parts = [f"Data: {data_label}."]
    if (frame["backend"] == "offline").any():
        parts.append(f"Answers: {OFFLINE_LABEL}.")
    return " ".join(parts)


def _source(frame: pd.DataFrame, origin: str) -> Source:
    return Source.of(origin, len(frame), "predictions", frame["backend"], frame["model"])


def _cell(row: pd.Series) -> str:
    if math.isnan(row["value"]):
        return NOT_MEASURED if row["metric"] in ("METEOR", "SBERT") and row["n"] else "no items"
    if math.isnan(row["low"]):
        return f"{row['value']:.3f}"
    return f"{row['value']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"


def results_table(
    summary: pd.DataFrame, frame: pd.DataFrame, mode: str, *, data_label: str, origin: str
) -> TableResult:
    """The authors' results layout: task x metric rows, P-Conv | P-NonConv per model, 95% intervals
    over users."""
    shown = summary[summary["setting"].isin(("P-Conv", "P-NonConv"))].copy()
    shown["cell"] = shown.apply(_cell, axis=1)
    shown["column"] = shown["model"] + " " + shown["setting"]
    wide = shown.pivot_table(index=["task", "metric"], columns="column", values="cell", aggfunc="first")
    order = [(t, m) for t in METRICS for m in METRICS[t] if (t, m) in wide.index]
    wide = wide.loc[order].reset_index()
    wide.insert(1, "what", wide["task"].map(TASK_NAMES))
    wide.columns.name = None
    caption = (
        f"PERSONA Bench results, P-Conv | P-NonConv (95% intervals over users; RMSE and MAE: lower "
        f"is better). {MODE_NOTE[mode]} {metric_note()} {_labels(frame, data_label)}"
    )
    return TableResult(wide, caption, _source(frame, origin), data=summary)


def domain_table(
    summary: pd.DataFrame, frame: pd.DataFrame, mode: str, *, data_label: str, origin: str
) -> TableResult:
    """Per domain and setting: one headline metric per task (accuracy, RMSE, ROUGE-L) and items."""
    heads = {"3.1": "Accuracy", "3.2": "RMSE", "3.3": "ROUGE-L"}
    picked = summary[[heads[t] == m for t, m in zip(summary["task"], summary["metric"], strict=True)]]
    wide = picked.pivot_table(index=["model", "domain", "setting"], columns="metric", values="value")
    items = summary.groupby(["model", "domain", "setting"])["items"].sum() // summary.groupby(
        ["model", "domain", "setting"]
    )["metric"].nunique().clip(lower=1)
    wide = wide.reindex(columns=[heads[t] for t in METRICS if heads[t] in wide.columns])
    wide["items"] = items
    out = wide.reset_index()
    out["setting"] = pd.Categorical(out["setting"], SETTINGS, ordered=True)
    out = out.sort_values(["model", "domain", "setting"]).reset_index(drop=True)
    out["setting"] = out["setting"].astype(str)
    out.columns.name = None
    caption = (
        f"PERSONA Bench per domain: 3.1 accuracy, 3.2 RMSE, 3.3 ROUGE-L. {MODE_NOTE[mode]} "
        f"{metric_note()} {_labels(frame, data_label)}"
    )
    return TableResult(
        out,
        caption,
        _source(frame, origin),
        best={"Accuracy": "max", "RMSE": "min", "ROUGE-L": "max"},
        precision=3,
    )


def gains_table(
    gains: pd.DataFrame, frame: pd.DataFrame, mode: str, *, data_label: str, origin: str
) -> TableResult:
    """Paired gains of P-Conv over the other settings, with 95% intervals over users."""
    shown = gains.copy()
    shown["cell"] = [
        NOT_MEASURED if math.isnan(g) else f"{g:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        for g, lo, hi in zip(shown["gain"], shown["low"], shown["high"], strict=True)
    ]
    wide = shown.pivot_table(
        index=["task", "metric", "comparison"], columns="model", values="cell", aggfunc="first"
    )
    order = [
        (t, m, c)
        for t in METRICS
        for m in METRICS[t]
        for c in ("P-Conv - P-NonConv", "P-Conv - NP-Conv")
        if (t, m, c) in wide.index
    ]
    wide = wide.loc[order].reset_index()
    wide.columns.name = None
    caption = (
        f"PERSONA Bench paired gains of P-Conv (same users resampled in both settings; 95% intervals; "
        f"for {' and '.join(LOWER_IS_BETTER)} a negative gain is better). {MODE_NOTE[mode]} "
        f"{metric_note()} {_labels(frame, data_label)}"
    )
    return TableResult(wide, caption, _source(frame, origin), data=gains)


def coverage_table(frame: pd.DataFrame, *, data_label: str, origin: str) -> TableResult:
    """Items, answers read, unread answers (missing), failed calls and coverage per model, task, setting."""
    rows = []
    for (model, task, setting), group in frame.groupby(["model", "task", "setting"], sort=True):
        status = group["status"]
        rows.append(
            {
                "model": model,
                "task": task,
                "setting": setting,
                "items": len(group),
                "read": int((status == "ok").sum()),
                "missing": int((status == "missing").sum()),
                "errors": int((status == "error").sum()),
                "coverage": float((status == "ok").mean()),
            }
        )
    caption = f"PERSONA Bench coverage: answers read of items asked. {_labels(frame, data_label)}"
    return TableResult(pd.DataFrame(rows), caption, _source(frame, origin), precision=3)


def radar(
    summary: pd.DataFrame, frame: pd.DataFrame, model: str, *, data_label: str, origin: str
) -> FigureResult:
    """One model's scores on the metrics that live in [0, 1], one polygon per setting."""
    mine = summary[(summary["model"] == model) & summary["metric"].isin(RADAR_METRICS)]
    wide = mine.pivot_table(index="setting", columns="metric", values="value").dropna(axis=1, how="all")
    metrics = [m for m in RADAR_METRICS if m in wide.columns]
    settings = [s for s in SETTINGS if s in wide.index]
    if len(metrics) < 3 or not settings:
        raise ValueError(f"model {model!r}: fewer than three measured metrics in [0, 1] to draw a radar plot")
    angles = np.linspace(0, 2 * np.pi, len(metrics), endpoint=False)
    closed = np.append(angles, angles[0])
    model_frame = frame[frame["model"] == model]

    def draw(width: Span) -> Figure:
        fig, ax = new_figure(width, 3.2, subplot_kw={"projection": "polar"})
        for setting, style in zip(settings, greyscale_styles(len(settings)), strict=True):
            values = np.clip(wide.loc[setting, metrics].to_numpy(dtype=float), 0, 1)
            ax.plot(closed, np.append(values, values[0]), lw=1.1, ms=3, label=setting, **style)
            ax.fill(closed, np.append(values, values[0]), color=style["color"], alpha=0.06)
        ax.set_ylim(0, 1)
        ax.set_yticks(RINGS, [])  # ring values in the caption: a label inside the plot would sit on the data
        label_spokes(ax, angles, metrics)
        ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, -0.08),
            ncol=len(settings),
            frameon=False,
            fontsize=current_style().small,
        )
        mark_offline(fig, model_frame["backend"])
        return fig

    caption = (
        f"PERSONA Bench radar plot of {model}: metrics in [0, 1] (MCC below 0 drawn at 0; rings at "
        f"{', '.join(f'{r:g}' for r in RINGS)}), one polygon per setting; metrics not measured are left "
        f"out. {metric_note()} {_labels(model_frame, data_label)}"
    )
    return FigureResult(draw("column"), caption, _source(model_frame, origin), data=mine, at=draw)


def explorer(
    frame: pd.DataFrame,
    *,
    tasks: Sequence[str] = ("3.1", "3.2", "3.3"),
    status: str | None = None,
    limit: int = 30,
) -> pd.DataFrame:
    """Items with the model's answer beside the truth (raw text where it did not read), for browsing."""
    rows = frame[frame["task"].isin(tasks)]
    if status is not None:
        rows = rows[rows["status"] == status]
    shown = rows[
        ["task", "setting", "model", "user", "domain", "target", "status", "truth", "prediction", "raw"]
    ]
    return shown.sort_values(["task", "target", "setting", "model"]).head(limit).reset_index(drop=True)
