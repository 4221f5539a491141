"""Table 4: the ablation over the assistant's instructions and context.

Each setting gets TCR and P with cluster-bootstrap intervals (users resampled); each setting other
than `base` is compared with `base` on the scenarios both hold (`measures.bootstrap.paired_difference`:
per-scenario differences, users resampled, sign flips per user; Holm-adjusted p-values in the long
frame).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from personalens_utils.analysis.tables import long_words, require
from personalens_utils.assistants.python import row_label
from personalens_utils.judging import dialogue_filter as judging_filter
from personalens_utils.measures.bootstrap import method_note, paired_difference
from personalens_utils.measures.design import DESIGN_COLUMNS, design_frame
from personalens_utils.measures.display import (
    CLUSTER,
    MAIN_SETTING,
    fmt_ci,
    fmt_diff,
    missing_note,
    provenance_note,
    score_source,
)
from personalens_utils.measures.scores import PERSONALIZATION, SCALES, TASK_COMPLETION, aggregate, provenance
from personalens_utils.measures.stats import holm_adjust, withheld_note
from personalens_utils.outputs.frames import rows_of
from personalens_utils.outputs.tables import TableResult
from personalens_utils.runstore.records import Dialogue
from personalens_utils.simulation.settings import PAPER_SETTINGS as ABLATION_SETTINGS

__all__ = ["ABLATION_SETTINGS", "ablation_filter", "first_users", "table4"]


def table4(
    tidy: pd.DataFrame,
    *,
    assistant_model: str,
    settings: Sequence[str] = ABLATION_SETTINGS,
    base: str = MAIN_SETTING,
    seed: int = 0,
) -> TableResult:
    """Ablation: TCR and P per setting with intervals, and each setting minus `base` on shared scenarios."""
    part = rows_of(tidy, tidy["assistant_model"] == assistant_model)
    require(part, "assistant_setting", [base], f"{assistant_model!r} under the setting")
    settings = [s for s in settings if s in set(part["assistant_setting"].unique())]
    dims = (TASK_COMPLETION, PERSONALIZATION)
    long = aggregate(part, ["assistant_setting", "task_type"], dims, seed=seed, cluster=CLUSTER)
    comparisons, withheld = [], list(long.attrs["withheld"])
    designs = _designs(part, dims)
    for setting in settings:
        if setting == base:
            continue
        for (task_type, dim), design in designs.items():
            arms = set(design["assistant"].unique())
            if setting in arms and base in arms:
                result = paired_difference(design, setting, base, seed=seed)
                withheld.append(result.difference.withheld)
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
        .astype({"n_pairs": "Int64"})  # a count, blank for the base rows (not 12.0000)
        if len(comp)
        else long
    )
    display = _ablation_display(data, settings, base)
    name = row_label(assistant_model)  # a Python assistant by its class, not its file's path
    caption = (
        f"Ablation of the assistant's instructions and context ({name}): vanilla (minimal "
        "instructions), base (asks for personalization), and base plus demographics (D), past-interaction "
        f"summaries (I), situational context (S), or all three. TCR in %, P on 1-4, with {method_note()}. "
        f"Δ columns: setting minus {base} on the same scenarios (each averaged over its repeats), the same "
        "cluster bootstrap, and a two-sided permutation p-value flipping each user's sign (Holm-adjusted "
        "values in the CSV)."
        + withheld_note(withheld)
        + missing_note(long, part)
        + provenance_note(provenance(part))
    )
    return TableResult(display, caption, score_source(part), data, words=long_words)


def _designs(part: pd.DataFrame, dims: Sequence[str]) -> dict[tuple[str, str], pd.DataFrame]:
    """The design frame (arm: setting) of each task type and dimension that has a valid score."""
    out = {}
    read = [c for c in (*DESIGN_COLUMNS, "assistant_setting") if c in part.columns]
    for task_type in sorted(part["task_type"].unique()):
        of_type = part.loc[(part["task_type"] == task_type) & part["dimension"].isin(dims), read]
        for dim in dims:
            if of_type.loc[of_type["dimension"] == dim, "score"].notna().any():
                out[(task_type, dim)] = design_frame(of_type, dim, arm="assistant_setting")
    return out


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
                    row[f"{task_type} Δ{short}"] = fmt_diff(
                        rec["diff_vs_base"], rec["diff_ci_low"], rec["diff_ci_high"], rec["p_permutation"]
                    )
                else:
                    row[f"{task_type} Δ{short}"] = "no shared scenarios"
        rows.append(row)
    return pd.DataFrame(rows)


def first_users(users: Sequence[int], n: int | None) -> list[int]:
    """The first `n` of the (sorted) users, or all of them when `n` is None: the ablation's users."""
    ordered = sorted(users)
    return ordered if n is None else ordered[:n]


def ablation_filter(
    assistant_model: str, settings: Sequence[str], users: Any = None, task_types: Sequence[str] | None = None
) -> Callable[[Dialogue], bool]:
    """`select` for `run_judging`: one assistant's dialogues under some settings, users and task types."""
    scope = judging_filter(users, task_types)
    wanted = set(settings)

    def keep(d: Dialogue) -> bool:
        return scope(d) and d.assistant_model == assistant_model and d.assistant_setting in wanted

    return keep
