"""The paper's figures from a run's scores: Figure 4 (per-domain TCR and P of one assistant),
Figure 5 (turn-level personalization) and the radar chart of per-domain P.

Each returns a matplotlib figure (and the numbers drawn, where those are not a table already);
`plots.save_figure` writes them byte-identically from run to run. A figure made with the offline
backend says so in its title.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from personalens_utils.analysis.scores import (
    PERSONALIZATION,
    SCALES,
    TASK_COMPLETION,
    aggregate,
    backends,
    explode_domains,
)
from personalens_utils.analysis.stats import bootstrap_ci
from personalens_utils.analysis.tables import MAIN_SETTING
from personalens_utils.llm.offline import OFFLINE_LABEL

REPRESENTATIVE_DOMAINS = ("Movies", "Music", "Messaging")
MIN_DIALOGUES_PER_TURN = 5


def _title(text: str, backend_names: set[str] | Sequence[str]) -> str:
    return f"{text}\n[{OFFLINE_LABEL}]" if "offline" in set(backend_names) else text


def domain_scores(
    tidy: pd.DataFrame,
    *,
    assistant_model: str | None = None,
    setting: str = MAIN_SETTING,
    task_types: Sequence[str] = ("SD",),
    seed: int = 0,
) -> pd.DataFrame:
    """TCR and P per domain (and per assistant model), with intervals; MD dialogues count to each domain."""
    part = tidy[(tidy["assistant_setting"] == setting) & tidy["task_type"].isin(task_types)]
    if assistant_model is not None:
        part = part[part["assistant_model"] == assistant_model]
    if part.empty:
        raise ValueError(f"no judged dialogues for {assistant_model or 'any model'} under {setting!r}")
    by = ["domain"] if assistant_model is not None else ["assistant_model", "domain"]
    return aggregate(explode_domains(part), by, (TASK_COMPLETION, PERSONALIZATION), seed=seed)


def figure4(
    tidy: pd.DataFrame,
    *,
    assistant_model: str,
    setting: str = MAIN_SETTING,
    task_types: Sequence[str] = ("SD",),
    seed: int = 0,
) -> plt.Figure:
    """Per-domain TCR and P for one assistant; the dashed line is the mean over all its dialogues."""
    per_domain = domain_scores(
        tidy, assistant_model=assistant_model, setting=setting, task_types=task_types, seed=seed
    )
    part = tidy[
        (tidy["assistant_model"] == assistant_model)
        & (tidy["assistant_setting"] == setting)
        & tidy["task_type"].isin(task_types)
    ]
    fig, axes = plt.subplots(2, 1, figsize=(8.0, 5.2), sharex=True)
    domains = sorted(per_domain["domain"].unique())
    x = np.arange(len(domains))
    for ax, dim, color in zip(axes, (TASK_COMPLETION, PERSONALIZATION), ("C0", "C1"), strict=True):
        sel = per_domain[per_domain["dimension"] == dim].set_index("domain").reindex(domains)
        err = np.vstack([sel["mean"] - sel["ci_low"], sel["ci_high"] - sel["mean"]])
        ax.bar(x, sel["mean"], yerr=err, color=color, capsize=2, width=0.7, error_kw={"lw": 0.8})
        scores = part.loc[part["dimension"] == dim, "score"].dropna() * (100 if dim == TASK_COMPLETION else 1)
        ax.axhline(scores.mean(), color="0.2", ls="--", lw=1, label=f"all domains: {scores.mean():.2f}")
        scale = SCALES[dim]
        ax.set_ylabel("TCR (%)" if dim == TASK_COMPLETION else "P (1-4)")
        ax.set_ylim(0, 100 if dim == TASK_COMPLETION else scale.high)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=True)
    axes[-1].set_xticks(x, domains, rotation=45, ha="right")
    kinds = "/".join(task_types)
    fig.suptitle(_title(f"{assistant_model} by domain ({kinds} tasks, {setting!r} setting)", backends(part)))
    fig.tight_layout()
    return fig


def turn_curves(turns: pd.DataFrame, *, domains: Sequence[str], seed: int = 0) -> pd.DataFrame:
    """Mean turn-level P per turn for each domain and for all SD dialogues, with intervals.

    Turns scored in fewer than MIN_DIALOGUES_PER_TURN dialogues are left out: a handful of long
    dialogues would otherwise draw the tail of every curve.
    """
    sd = turns[turns["task_type"] == "SD"]
    groups = {"All SD tasks": sd}
    for dom in domains:
        groups[dom] = sd[sd["domains"].map(lambda ds, d=dom: d in ds)]
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
    backend_names: set[str] | Sequence[str] = (),
    seed: int = 0,
) -> tuple[plt.Figure, pd.DataFrame]:
    """Turn-level personalization against turn number, for representative domains and all SD tasks."""
    part = turns[(turns["assistant_model"] == assistant_model) & (turns["assistant_setting"] == setting)]
    if part.empty:
        raise ValueError(f"no turn-level personalization scores for {assistant_model!r} under {setting!r}")
    curves = turn_curves(part, domains=domains, seed=seed)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for i, (label, sel) in enumerate(curves.groupby("series", sort=False)):
        style = (
            {"color": "0.15", "lw": 2.2, "ls": "-"}
            if label == "All SD tasks"
            else {"color": f"C{i}", "lw": 1.4}
        )
        ax.plot(sel["turn"], sel["mean"], marker="o", ms=3, label=label, **style)
        ax.fill_between(sel["turn"], sel["ci_low"], sel["ci_high"], alpha=0.12, color=style["color"])
    ax.set_xlabel("Assistant turn")
    ax.set_ylabel("Turn-level P (1-4)")
    ax.set_ylim(1, 4)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(frameon=True)
    ax.set_title(
        _title(f"Turn-level personalization, {assistant_model} ({setting!r} setting)", backend_names)
    )
    fig.tight_layout()
    return fig, curves


def radar_chart(
    tidy: pd.DataFrame, *, setting: str = MAIN_SETTING, task_types: Sequence[str] = ("SD",), seed: int = 0
) -> tuple[plt.Figure, pd.DataFrame]:
    """Per-domain personalization, one polygon per assistant model."""
    per = domain_scores(tidy, setting=setting, task_types=task_types, seed=seed)
    per = per[per["dimension"] == PERSONALIZATION]
    wide = per.pivot_table(index="assistant_model", columns="domain", values="mean")
    domains = list(wide.columns)
    angles = np.linspace(0, 2 * np.pi, len(domains), endpoint=False)
    fig, ax = plt.subplots(figsize=(6.0, 6.0), subplot_kw={"projection": "polar"})
    closed = np.append(angles, angles[0])
    for i, (model, row) in enumerate(wide.iterrows()):
        values = row.to_numpy(dtype=float)
        style = ("-", "--", ":", "-.")[i % 4]  # identical polygons stay visible on top of each other
        ax.plot(closed, np.append(values, values[0]), color=f"C{i}", lw=1.6, ls=style, label=model)
        ax.fill(closed, np.append(values, values[0]), color=f"C{i}", alpha=0.08)
    ax.set_xticks(angles, domains)
    ax.set_ylim(1, 4)
    ax.set_yticks([1.5, 2, 2.5, 3, 3.5])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, frameon=True)
    part = tidy[tidy["assistant_setting"] == setting]
    ax.set_title(
        _title(
            f"Personalization by domain ({'/'.join(task_types)} tasks, {setting!r} setting)", backends(part)
        ),
        pad=24,
    )
    return fig, per
