"""The paper's result tables and figures (Tables 3, 4, 5, 12; Figures 4, 5; the radar chart).

Every builder takes the tidy score frame of `metrics.scores` (or a frame derived from it) and
returns a display table with its caption, or a matplotlib figure. Display cells read
"mean [low, high]" with 95% bootstrap intervals; the numbers behind them come back in a long frame
for export. Anything made with the offline backend says so in its caption or title.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from personalens_utils.analysis import agreement, annotation
from personalens_utils.analysis.scores import (
    PERSONALIZATION,
    SCALES,
    TASK_COMPLETION,
    aggregate,
    backends,
    explode_domains,
    load_scores,
)
from personalens_utils.analysis.stats import bootstrap_ci, holm_adjust, paired_comparison
from personalens_utils.data import Benchmark, load_benchmark, resolve_users
from personalens_utils.judging import benchmark_contexts, judge_model_key, run_judging
from personalens_utils.judging import dialogue_filter as judging_filter
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.records import Dialogue
from personalens_utils.simulation.report import default_users
from personalens_utils.simulation.settings import PAPER_SETTINGS as ABLATION_SETTINGS
from personalens_utils.store import RunStore

MAIN_SETTING = "base"
ASSISTANT_DIMENSIONS = (TASK_COMPLETION, PERSONALIZATION, "naturalness_assistant", "coherence_assistant")
USER_DIMENSIONS = ("naturalness_user", "coherence_user")
AGREEMENT_DIMENSIONS = annotation.RATED
AGREEMENT_NAMES = {
    TASK_COMPLETION: "Task Completion",
    PERSONALIZATION: "Personalization",
    "naturalness_user": "Naturalness (U)",
    "naturalness_assistant": "Naturalness (A)",
    "coherence_user": "Coherence (U)",
    "coherence_assistant": "Coherence (A)",
}
REPRESENTATIVE_DOMAINS = ("Movies", "Music", "Messaging")
MIN_DIALOGUES_PER_TURN = 5


@dataclass(frozen=True)
class TableResult:
    """A display table, the long numeric frame behind it, and its caption."""

    display: pd.DataFrame
    data: pd.DataFrame
    caption: str


def provenance_note(backend_names: set[str] | Sequence[str]) -> str:
    """Caption suffix naming the backend(s); the offline one is always spelled out."""
    names = sorted(set(backend_names))
    if "offline" in names:
        return f" Made with the {OFFLINE_LABEL}."
    return f" Backend: {', '.join(names)}." if names else ""


def fmt_ci(mean: float, low: float, high: float, digits: int = 2) -> str:
    if np.isnan(mean):
        return "n/a"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _require(tidy: pd.DataFrame, column: str, values: Sequence[str], what: str) -> None:
    present = set(tidy[column].unique())
    absent = [v for v in values if v not in present]
    if absent:
        raise ValueError(f"no dialogues for {what} {absent} in the scores; present: {sorted(present)}")


def _wide(long: pd.DataFrame, index: str, dimensions: Sequence[str]) -> pd.DataFrame:
    """Long aggregates -> one row per `index` value, one "mean [low, high]" column per type x dimension."""
    cells: dict[str, dict[str, str]] = {}
    for rec in long.itertuples(index=False):
        label = f"{rec.task_type} {SCALES[rec.dimension].short}"
        cells.setdefault(getattr(rec, index), {})[label] = fmt_ci(rec.mean, rec.ci_low, rec.ci_high)
    order = [f"{t} {SCALES[d].short}" for t in ("SD", "MD") for d in dimensions]
    frame = pd.DataFrame.from_dict(cells, orient="index")
    frame = frame[[c for c in order if c in frame.columns]]
    return frame.fillna("n/a")


def table3(
    tidy: pd.DataFrame, *, setting: str = MAIN_SETTING, models: Sequence[str] | None = None, seed: int = 0
) -> TableResult:
    """Assistant TCR, P, naturalness and coherence per assistant model, SD and MD, under one setting."""
    part = tidy[tidy["assistant_setting"] == setting]
    if models is not None:
        _require(part, "assistant_model", models, "assistant models")
        part = part[part["assistant_model"].isin(models)]
    if part.empty:
        raise ValueError(f"no judged dialogues under setting {setting!r}")
    long = aggregate(part, ["assistant_model", "task_type"], ASSISTANT_DIMENSIONS, seed=seed)
    display = _wide(long, "assistant_model", ASSISTANT_DIMENSIONS)
    if models is not None:
        display = display.reindex(list(models))
    display = display.rename_axis("Assistant model").reset_index()
    caption = (
        f"Assistant models under the {setting!r} setting: task completion rate (TCR, %), "
        "personalization (P, 1-4), and the assistant's naturalness and coherence (1-5), "
        "on single-domain (SD) and multi-domain (MD) tasks; 95% bootstrap intervals in brackets."
        + _missing_note(long)
        + provenance_note(backends(part))
    )
    return TableResult(display, long, caption)


def table12(
    tidy: pd.DataFrame, *, setting: str = MAIN_SETTING, task_types: Sequence[str] = ("SD",), seed: int = 0
) -> TableResult:
    """The user agent's naturalness and coherence, per assistant model it talked to."""
    part = tidy[(tidy["assistant_setting"] == setting) & tidy["task_type"].isin(task_types)]
    if part.empty:
        raise ValueError(f"no judged dialogues under setting {setting!r} for task types {list(task_types)}")
    long = aggregate(part, ["assistant_model", "task_type"], USER_DIMENSIONS, seed=seed)
    display = _wide(long, "assistant_model", USER_DIMENSIONS)
    display = display.rename_axis("Assistant model").reset_index()
    caption = (
        f"The user agent's naturalness and coherence (1-5) when talking to each assistant model "
        f"({'/'.join(task_types)} tasks, {setting!r} setting); 95% bootstrap intervals in brackets."
        + _missing_note(long)
        + provenance_note(backends(part))
    )
    return TableResult(display, long, caption)


def _missing_note(long: pd.DataFrame) -> str:
    missing = int(long["n_missing"].sum())
    if not missing:
        return ""
    return f" {missing} judgments had no valid score and are left out (not counted as zero)."


def paired_scores(
    tidy: pd.DataFrame, dimension: str, task_type: str, treatment: str, control: str
) -> pd.DataFrame:
    """Per-scenario scores of two settings side by side, only where both have a valid score."""
    part = tidy[(tidy["dimension"] == dimension) & (tidy["task_type"] == task_type)]
    part = part[part["assistant_setting"].isin([treatment, control])].dropna(subset=["score"])
    wide = part.pivot_table(index="scenario_id", columns="assistant_setting", values="score", aggfunc="first")
    if treatment not in wide or control not in wide:
        return pd.DataFrame(columns=[treatment, control])
    return wide[[treatment, control]].dropna()


def table4(
    tidy: pd.DataFrame,
    *,
    assistant_model: str,
    settings: Sequence[str] = ABLATION_SETTINGS,
    base: str = MAIN_SETTING,
    seed: int = 0,
) -> TableResult:
    """Ablation: TCR and P per setting with intervals, and each setting minus `base` on shared scenarios."""
    part = tidy[tidy["assistant_model"] == assistant_model]
    _require(part, "assistant_setting", [base], f"{assistant_model!r} under the setting")
    settings = [s for s in settings if s in set(part["assistant_setting"])]
    dims = (TASK_COMPLETION, PERSONALIZATION)
    long = aggregate(part, ["assistant_setting", "task_type"], dims, seed=seed)
    comparisons = []
    for setting in settings:
        if setting == base:
            continue
        for task_type in sorted(part["task_type"].unique()):
            for dim in dims:
                pairs = paired_scores(part, dim, task_type, setting, base)
                factor = 100.0 if dim == TASK_COMPLETION else 1.0
                result = paired_comparison(pairs[setting] * factor, pairs[base] * factor, seed=seed)
                comparisons.append(
                    {
                        "assistant_setting": setting,
                        "task_type": task_type,
                        "dimension": dim,
                        "diff_vs_base": result.difference.estimate,
                        "diff_ci_low": result.difference.low,
                        "diff_ci_high": result.difference.high,
                        "n_pairs": result.difference.n,
                        "p_permutation": result.p_permutation,
                        "p_bootstrap": result.p_bootstrap,
                    }
                )
    comp = pd.DataFrame(comparisons)
    if not comp.empty:
        comp["p_holm"] = holm_adjust(comp["p_permutation"].tolist())
    data = (
        long.merge(comp, on=["assistant_setting", "task_type", "dimension"], how="left")
        if len(comp)
        else long
    )
    display = _ablation_display(data, settings, base)
    caption = (
        f"Ablation of the assistant's instructions and context ({assistant_model}): vanilla (minimal "
        "instructions), base (asks for personalization), and base plus demographics (D), past-interaction "
        "summaries (I), situational context (S), or all three. TCR in %, P on 1-4, with 95% bootstrap "
        f"intervals. Δ columns: setting minus {base} on the same scenarios, paired bootstrap interval and "
        "two-sided sign-flip permutation p-value (Holm-adjusted values in the CSV)."
        + _missing_note(long)
        + provenance_note(backends(part))
    )
    return TableResult(display, data, caption)


def _ablation_display(data: pd.DataFrame, settings: Sequence[str], base: str) -> pd.DataFrame:
    rows = []
    for setting in settings:
        row: dict[str, str] = {"Setting": setting}
        for task_type in ("SD", "MD"):
            for dim in (TASK_COMPLETION, PERSONALIZATION):
                sel = data[
                    (data["assistant_setting"] == setting)
                    & (data["task_type"] == task_type)
                    & (data["dimension"] == dim)
                ]
                if sel.empty:
                    continue
                rec = sel.iloc[0]
                short = SCALES[dim].short
                row[f"{task_type} {short}"] = fmt_ci(rec["mean"], rec["ci_low"], rec["ci_high"])
                if setting == base:
                    row[f"{task_type} Δ{short}"] = "(reference)"
                elif "diff_vs_base" in rec and not pd.isna(rec["diff_vs_base"]):
                    row[f"{task_type} Δ{short}"] = (
                        f"{rec['diff_vs_base']:+.2f} "
                        f"[{rec['diff_ci_low']:+.2f}, {rec['diff_ci_high']:+.2f}], "
                        f"{_fmt_p(rec['p_permutation'])}"
                    )
                else:
                    row[f"{task_type} Δ{short}"] = "no shared scenarios"
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt_p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def ratings_matrix(ratings: pd.DataFrame, items: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Long ratings (rater, dialogue_id, score) -> rater names and a raters x items matrix (NaN: unrated)."""
    wide = ratings.pivot_table(index="rater", columns="dialogue_id", values="score", aggfunc="first")
    wide = wide.reindex(columns=list(items))
    return list(wide.index), wide.to_numpy(dtype=float)


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
        ref = reference[reference["dimension"] == dim]
        oth = raters[raters["dimension"] == dim]
        items = sorted(set(oth["dialogue_id"]) & set(ref["dialogue_id"]))
        scale = SCALES[dim]
        _, ref_matrix = ratings_matrix(ref, items)
        names, matrix = ratings_matrix(oth, items)
        pooled = np.vstack([ref_matrix, matrix]) if pool_reference else matrix
        rows.append(
            {
                "Metric": AGREEMENT_NAMES.get(dim, dim),
                "Cohen's κ": agreement.mean_pairwise_cohen(ref_matrix[0], matrix, categories=scale.categories)
                if len(names) and len(ref_matrix)
                else float("nan"),
                "Fleiss' κ": agreement.fleiss_kappa(pooled, categories=scale.categories),
                "Krippendorff's α": agreement.krippendorff_alpha(
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


def table5(
    judge: pd.DataFrame,
    annotations: pd.DataFrame | None,
    *,
    judge_model: str,
    second_judge: pd.DataFrame | None = None,
    second_judge_model: str | None = None,
    backend_names: set[str] | Sequence[str] = (),
) -> TableResult:
    """Judge-human agreement when annotations exist; otherwise judge-judge agreement, said plainly.

    `judge` and `second_judge` are tidy score frames (one judge each); `annotations` is the long
    frame from `annotation.read_sheets` (annotator, dialogue_id, dimension, score) or None.
    """
    reference = judge.assign(rater=judge_model)[["rater", "dialogue_id", "dimension", "score"]]
    if annotations is not None and not annotations.empty:
        humans = annotations.rename(columns={"annotator": "rater"})
        table = agreement_table(reference, humans, pool_reference=False)
        table = table.rename(
            columns={
                "Cohen's κ": "Cohen's κ (judge vs annotator, mean)",
                "Fleiss' κ": "Fleiss' κ (annotators)",
                "Krippendorff's α": "Krippendorff's α (annotators)",
            }
        )
        n_annot, n_items = annotations["annotator"].nunique(), annotations["dialogue_id"].nunique()
        caption = (
            f"Agreement with {n_annot} human annotator(s) on {n_items} dialogues: "
            f"Cohen's κ between the judge ({judge_model}) and each annotator, averaged; Fleiss' κ and "
            "Krippendorff's α among the annotators (α ordinal for P, naturalness and coherence; nominal for "
            "TC). U: user agent, A: assistant."
        )
    else:
        if second_judge is None or second_judge.empty:
            raise ValueError(
                "no human annotations and no second judge: give filled annotation sheets, or judge the "
                "sample with a second judge model to report judge-judge agreement"
            )
        other = second_judge.assign(rater=second_judge_model or "second judge")
        table = agreement_table(
            reference, other[["rater", "dialogue_id", "dimension", "score"]], pool_reference=True
        )
        table = table.rename(
            columns={
                "Cohen's κ": "Cohen's κ (judge vs second judge)",
                "Fleiss' κ": "Fleiss' κ (both judges)",
                "Krippendorff's α": "Krippendorff's α (both judges)",
            }
        ).drop(columns=["raters"])
        caption = (
            "NO HUMAN ANNOTATIONS WERE GIVEN: this table is not the paper's judge-human comparison. It shows "
            f"agreement between two judge models, {judge_model} and {second_judge_model}, on the same "
            "dialogues: Cohen's κ, Fleiss' κ and Krippendorff's α (ordinal for P, naturalness and coherence; "
            "nominal for TC). U: user agent, A: assistant."
        )
        if _identical(judge, second_judge):
            caption += " The two judges gave the same score on every dialogue and dimension."
    if table.select_dtypes("number").isna().any().any():
        caption += " A blank cell is undefined: every rating in it was the same value, or too few items."
    caption += provenance_note(backend_names)
    return TableResult(table, table, caption)


def _identical(first: pd.DataFrame, second: pd.DataFrame) -> bool:
    keys = ["dialogue_id", "dimension"]
    both = first[[*keys, "score"]].merge(second[[*keys, "score"]], on=keys).dropna()
    return bool(len(both)) and bool((both["score_x"] == both["score_y"]).all())


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


def choose_users(benchmark_dir: str | Path, users: Any, n: int | None) -> list[int]:
    """The first `n` of `users`: a sample name, a list, or None for notebook 03's default (the paper's
    sample_50 on the official data, every user of a generated benchmark)."""
    ids = resolve_users(users if users is not None else default_users(benchmark_dir))
    if ids is None:
        ids = sorted(load_benchmark(benchmark_dir).users)
    return ids if n is None else ids[:n]


def ablation_filter(
    assistant_model: str, settings: Sequence[str], users: Any = None, task_types: Sequence[str] | None = None
) -> Callable[[Dialogue], bool]:
    """`select` for `run_judging`: one assistant's dialogues under some settings, users and task types."""
    scope = judging_filter(users, task_types)
    wanted = set(settings)

    def keep(d: Dialogue) -> bool:
        return scope(d) and d.assistant_model == assistant_model and d.assistant_setting in wanted

    return keep


def agreement_for_run(
    store: RunStore | str | Path,
    benchmark: Benchmark,
    client: Any,
    *,
    judge_model: str,
    second_judge_model: str,
    annotation_dir: str | Path,
    sheets: Any = None,
    n: int = 100,
    seed: int = 0,
) -> tuple[TableResult, dict[str, Path]]:
    """Table 5 for a run: export the annotation sample, then compare the judge with the filled sheets,
    or, with none, judge the sample again with `second_judge_model` and compare the two judges.
    """
    store = store if isinstance(store, RunStore) else RunStore(store)
    paths = annotation.export_sheet(
        store, benchmark, annotation_dir, n=n, seed=seed, where={"assistant_setting": MAIN_SETTING}
    )
    ids = set(annotation.read_manifest(paths["manifest"])["dialogue_ids"])

    def sample(model: str) -> pd.DataFrame:
        tidy = load_scores(store, judge_model=model)
        return tidy[tidy["dialogue_id"].isin(ids) & tidy["dimension"].isin(AGREEMENT_DIMENSIONS)]

    judge = sample(judge_model)
    if sheets:
        humans = annotation.read_sheets(sheets, manifest=paths["manifest"])
        return table5(
            judge, humans, judge_model=judge_model_key(judge_model), backend_names=backends(judge)
        ), paths
    run_judging(
        store,
        client,
        benchmark_contexts(benchmark),
        judge_model=second_judge_model,
        dimensions=AGREEMENT_DIMENSIONS,
        select=lambda d: d.id in ids,
    )
    second = sample(second_judge_model)
    result = table5(
        judge,
        None,
        judge_model=judge_model_key(judge_model),
        second_judge=second,
        second_judge_model=judge_model_key(second_judge_model),
        backend_names=backends(judge) | backends(second),
    )
    return result, paths
