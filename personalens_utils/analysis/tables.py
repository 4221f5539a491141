"""Score tables of a run: Table 3 (assistant models), Table 12 (the user agent), and the judging
checks J1 (missing judgments) and J2 (scores per model, setting and task type).

Every builder takes the tidy score frame of `measures.scores` and returns a `TableResult`:
display cells read "mean [low, high]" with 95% intervals, and the numbers behind them come back as
the long `data` frame for export. Tables 3 and 12 resample users (`measures.bootstrap`: a user's
judgments move together, so users, not dialogues, are the unit drawn) and say so in the caption;
J2 resamples judgments. Anything made with the offline backend says so in
its caption, and every source names the backends and resolved model ids its rows came from. A row
stands for one assistant model in one run: where a model was run on several backends (or with other
model ids), each run is its own row, labelled with its identity (`scores.run_label`).

Tables 3 and 12 are read under the frame's scoring rule (`scores.load_scores(scoring=...)`); a cell
whose mean the other rule would change shows that mean after it, e.g. "2.53 [2.31, 2.75] (official
2.61)", and the data frame carries `other_mean` and `n_read_differently` for every cell.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from personalens_utils import judging
from personalens_utils.assistants.python import row_label
from personalens_utils.llm.role import resolved_model
from personalens_utils.measures.bootstrap import method_note
from personalens_utils.measures.display import (
    ASSISTANT_DIMENSIONS,
    CLUSTER,
    DIMENSION_NAMES,
    MAIN_SETTING,
    USER_DIMENSIONS,
    fmt_ci,
    missing_note,
    provenance_note,
    score_source,
)
from personalens_utils.measures.scores import (
    SCALES,
    aggregate,
    aggregate_columns,
    other_means,
    provenance,
    run_label,
    scoring_of,
)
from personalens_utils.measures.stats import withheld_note
from personalens_utils.outputs.frames import rows_of
from personalens_utils.outputs.latex import Block, Printed
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.runstore.identity import PROMPT_SET
from personalens_utils.runstore.store import RunStore

J1_COLUMNS = {
    "ok": "OK", "missing": "Missing", "error": "Error", "missing_rate": "Missing rate",
    "official_missing": "Official missing", "read_differently": "Read differently", "turns": "Turns",
    "turns_missing": "Turns missing", "turn_missing_rate": "Turn missing rate",
}
"""Table J1's count columns as a paper prints them."""
LONG_COLUMNS = {
    "assistant_model": "Assistant model", "assistant_setting": "Setting", "task_type": "Task type",
    "dimension": "Dimension", "mean": "Mean", "ci_low": "CI low", "ci_high": "CI high", "n": "n",
    "n_missing": "Missing", "other_scoring": "Other rule", "other_mean": "Other rule's mean",
    "n_read_differently": "Read differently", "diff_vs_base": "Δ vs base", "diff_ci_low": "Δ CI low",
    "diff_ci_high": "Δ CI high", "n_pairs": "Pairs", "p_permutation": "p (permutation)",
    "p_bootstrap": "p (bootstrap)", "p_holm": "p (Holm)",
}
"""The columns of the long score frames (`aggregate`, Table 4's comparisons) as a paper prints them."""



def table_rows(tidy: pd.DataFrame, keep: pd.Series, by: Sequence[str],
               extra: Sequence[str] = ()) -> pd.DataFrame:
    """The rows `keep` marks for a table or figure of `aggregate`d scores grouped `by`, with only the
    columns such a result reads (its aggregates, both scoring rules, its source and notes) and `extra`:
    a part of a run's whole frame then costs a fraction of a copy of every column. The frame itself when
    it keeps every row."""
    if bool(keep.all()):
        return tidy
    wanted = [*aggregate_columns(tidy, by, CLUSTER), "dialogue_id", "strict_score", "official_score",
              "scoring", *extra]
    return tidy.loc[keep, [c for c in dict.fromkeys(wanted) if c in tidy.columns]]


def by_run(
    part: pd.DataFrame, models: Sequence[str] | None = None
) -> tuple[pd.DataFrame, list[str] | None]:
    """`part` with `assistant_model` relabelled per run (`run_label`), and the row order for `models`."""
    labelled = part.assign(assistant_model=run_label(part, "assistant_model"))
    if models is None:
        return labelled, None
    pairs = labelled[["assistant_model"]].assign(name=part["assistant_model"]).drop_duplicates()
    order = [label for name in models
             for label in sorted(pairs.loc[pairs["name"] == name, "assistant_model"])]
    return labelled, order



def require(tidy: pd.DataFrame, column: str, values: Sequence[str], what: str) -> None:
    """Raise naming the `values` of `column` that the frame does not hold."""
    present = set(tidy[column].unique())
    absent = [v for v in values if v not in present]
    if absent:
        raise ValueError(f"no dialogues for {what} {absent} in the scores; present: {sorted(present)}")



def with_other_rule(long: pd.DataFrame, tidy: pd.DataFrame, by: Sequence[str],
                    dimensions: Sequence[str]) -> pd.DataFrame:
    """`long` with the other scoring rule's mean and the count of judgments read differently per cell."""
    other = other_means(tidy, by, dimensions)
    if other.empty:
        return long
    return long.merge(other, on=[*by, "dimension"], how="left", validate="one_to_one")


def rule_note(long: pd.DataFrame, tidy: pd.DataFrame) -> str:
    """Caption sentence: the scoring rule, and where the other rule reads the answers differently."""
    scoring = scoring_of(tidy)
    if "n_read_differently" not in long.columns:
        return f" Scores read under the {scoring} rule."
    differ, other = int(long["n_read_differently"].sum()), long["other_scoring"].iloc[0]
    if not differ:
        return f" Scores read under the {scoring} rule; the {other} rule reads every answer alike."
    return (f" Scores read under the {scoring} rule; the {other} rule reads {differ} answers differently, "
            "and its mean follows a cell wherever it differs.")


def _cell(rec: object, digits: int = 2) -> str:
    text = fmt_ci(rec.mean, rec.ci_low, rec.ci_high, digits)  # type: ignore[attr-defined]
    other = getattr(rec, "other_mean", None)
    if other is None or (np.isnan(other) and np.isnan(rec.mean)):  # type: ignore[attr-defined]
        return text
    mine = "n/a" if np.isnan(rec.mean) else f"{rec.mean:.{digits}f}"  # type: ignore[attr-defined]
    theirs = "n/a" if np.isnan(other) else f"{other:.{digits}f}"
    return text if mine == theirs else f"{text} ({rec.other_scoring} {theirs})"  # type: ignore[attr-defined]


def _wide(long: pd.DataFrame, index: str, dimensions: Sequence[str]) -> pd.DataFrame:
    """Long aggregates -> one row per `index` value, one "mean [low, high]" column per type x dimension."""
    cells: dict[str, dict[str, str]] = {}
    for rec in long.itertuples(index=False):
        label = f"{rec.task_type} {SCALES[rec.dimension].short}"
        cells.setdefault(getattr(rec, index), {})[label] = _cell(rec)
    order = [f"{t} {SCALES[d].short}" for t in ("SD", "MD") for d in dimensions]
    frame = pd.DataFrame.from_dict(cells, orient="index")
    frame = frame[[c for c in order if c in frame.columns]]
    return frame.fillna("n/a")


def table3(
    tidy: pd.DataFrame, *, setting: str = MAIN_SETTING, models: Sequence[str] | None = None, seed: int = 0
) -> TableResult:
    """Assistant TCR, P, naturalness and coherence per assistant model, SD and MD, under one setting."""
    by = ["assistant_model", "task_type"]
    part = table_rows(tidy, tidy["assistant_setting"] == setting, by)
    if models is not None:
        require(part, "assistant_model", models, "assistant models")
        part = rows_of(part, part["assistant_model"].isin(models))
    if part.empty:
        raise ValueError(f"no judged dialogues under setting {setting!r}")
    labelled, order = by_run(part, models)
    means = aggregate(labelled, by, ASSISTANT_DIMENSIONS, seed=seed, cluster=CLUSTER)
    long = with_other_rule(means, labelled, by, ASSISTANT_DIMENSIONS)
    display = _wide(long, "assistant_model", ASSISTANT_DIMENSIONS)
    if order is not None:
        display = display.reindex(order)
    display = display.rename_axis("Assistant model").reset_index()
    display["Assistant model"] = display["Assistant model"].map(row_label)
    caption = (
        f"Assistant models under the {setting!r} setting: task completion rate (TCR, %), "
        "personalization (P, 1-4), and the assistant's naturalness and coherence (1-5), "
        f"on single-domain (SD) and multi-domain (MD) tasks; in brackets {method_note()}."
        + withheld_note(means.attrs["withheld"])
        + missing_note(long)
        + rule_note(long, tidy)
        + provenance_note(provenance(labelled))
    )
    return TableResult(display, caption, score_source(part), long, best=higher_is_better(display),
                       words=long_words)


@dataclass(frozen=True)
class LeftOut:
    """The dialogues a Table 3 beside itself leaves out, and how its caption says so: `without` which
    dialogues ("without the dialogues the audit flagged"), `kept` the column of what is left
    ("Unflagged"), `note` the caption's last words on the check, `backends` those of the check itself."""

    dialogues: Collection[str]
    without: str
    kept: str
    note: str = ""
    backends: Collection[str] = ()


def table3_beside(
    tidy: pd.DataFrame, left_out: LeftOut, *, setting: str = MAIN_SETTING,
    dimensions: Sequence[str] = ASSISTANT_DIMENSIONS, seed: int = 0, cluster: str | None = CLUSTER,
) -> TableResult:
    """Table 3's cells on all judged dialogues beside the same cells without the dialogues some check
    doubts (`left_out`), and the difference: how far a number moves without them. Intervals resample
    `cluster` (users) unless None (judgments)."""
    part = rows_of(tidy, tidy["assistant_setting"] == setting)
    if part.empty:
        raise ValueError(f"no judged dialogues under setting {setting!r}")
    dropped, kept = set(left_out.dialogues), left_out.kept
    labelled = by_run(part)[0]
    made = provenance(labelled)
    by = ["assistant_model", "task_type"]
    every = aggregate(labelled, by, dimensions, seed=seed, cluster=cluster)
    rest = labelled.loc[~labelled["dialogue_id"].isin(dropped), aggregate_columns(labelled, by, cluster)]
    left = aggregate(rest, by, dimensions, seed=seed, cluster=cluster)
    both = every.merge(left, on=[*by, "dimension"], how="left", suffixes=("", "_kept"))
    rows = [{"Assistant model": row_label(r.assistant_model), "Type": r.task_type,
             "Metric": SCALES[r.dimension].short,
             "All": fmt_ci(r.mean, r.ci_low, r.ci_high),
             kept: fmt_ci(r.mean_kept, r.ci_low_kept, r.ci_high_kept),
             "Difference": r.mean_kept - r.mean, "N all": int(r.n),
             f"N {kept.lower()}": int(0 if pd.isna(r.n_kept) else r.n_kept)}
            for r in both.itertuples(index=False)]
    intervals = "95% bootstrap intervals" if cluster is None else method_note()
    caption = (f"Table 3 ({setting!r} setting) on all judged dialogues and {left_out.without} "
               f"({len(dropped & set(part['dialogue_id'].unique()))} of {part['dialogue_id'].nunique()}); "
               f"Difference = {kept.lower()} minus all (TCR in %, P 1-4, naturalness and coherence 1-5); "
               f"{intervals} in brackets. " + left_out.note
               + provenance_note(replace(made, backends=made.backends | set(left_out.backends))))
    return TableResult(pd.DataFrame(rows), caption, score_source(part), both, precision=2)


def higher_is_better(display: pd.DataFrame) -> dict[str, str]:
    """Every score column of a table that compares assistants: higher is better on each scale."""
    return {str(c): "max" for c in display.columns if c != "Assistant model"}


def table12(
    tidy: pd.DataFrame, *, setting: str = MAIN_SETTING, task_types: Sequence[str] = ("SD",), seed: int = 0
) -> TableResult:
    """The user agent's naturalness and coherence, per assistant model it talked to."""
    by = ["assistant_model", "task_type"]
    part = table_rows(tidy, (tidy["assistant_setting"] == setting) & tidy["task_type"].isin(task_types), by)
    if part.empty:
        raise ValueError(f"no judged dialogues under setting {setting!r} for task types {list(task_types)}")
    labelled = by_run(part)[0]
    means = aggregate(labelled, by, USER_DIMENSIONS, seed=seed, cluster=CLUSTER)
    long = with_other_rule(means, labelled, by, USER_DIMENSIONS)
    display = _wide(long, "assistant_model", USER_DIMENSIONS)
    display = display.rename_axis("Assistant model").reset_index()
    display["Assistant model"] = display["Assistant model"].map(row_label)
    caption = (
        f"The user agent's naturalness and coherence (1-5) when talking to each assistant model "
        f"({'/'.join(task_types)} tasks, {setting!r} setting); in brackets {method_note()}."
        + withheld_note(means.attrs["withheld"])
        + missing_note(long, part)
        + rule_note(long, tidy)
        + provenance_note(provenance(labelled))
    )
    return TableResult(display, caption, score_source(part), long, best=higher_is_better(display),
                       words=long_words)


def judge_missing(store: RunStore, judge_model: str, prompt_version: str) -> TableResult:
    """Table J1: judge answers without a valid score, per judge model, backend and dimension."""
    missing = judging.missing_rate(store, judge_model)
    used = sorted(set(missing["backend"]))
    caption = (
        f"Judge answers without a valid score per dimension (judge {judging.judge_model_key(judge_model)}, "
        f"prompt {prompt_version}). Missing (missing): no score under the strict rule after one retry; "
        "official missing (official_missing): no score under the official rule (which counts an unreadable "
        "task-completion verdict as a failure); read differently (read_differently): answers the two rules "
        "score differently; error: a call that failed, judged again on the next run. Turns count the "
        "assistant turns of the turn-level personalization. U: user agent, A: assistant."
        + provenance_note(used)
    )
    answered = int((missing["ok"] + missing["missing"] + missing["error"]).sum()) if len(missing) else 0
    key = judging.judge_model_key(judge_model)
    source = Source.of(f"run store {store.root.name}/", answered, "answered judgments", used,
                       [resolved_model(key, backend) for backend in used])
    return TableResult(missing, caption, source, precision=4, printed=printed_judge_missing)


def long_words(shown: pd.DataFrame) -> pd.DataFrame:
    """A long score frame in words (`TableResult.words`): headers from `LONG_COLUMNS`, dimensions by name,
    a Python assistant by its class (`row_label`; the CSV keeps the whole spec)."""
    named = shown.copy()
    if "dimension" in named.columns:
        named["dimension"] = named["dimension"].map(lambda d: DIMENSION_NAMES.get(d, d))
    if "assistant_model" in named.columns:
        named["assistant_model"] = named["assistant_model"].map(row_label)
    return named.rename(columns=lambda c: LONG_COLUMNS.get(c, c))


def printed_judge_missing(shown: pd.DataFrame) -> Printed:
    """Table J1 for a paper: a heading per judge, backend and prompt set, then a row per dimension under
    its reader's name, the counts under words rather than ids."""
    heading = shown["judge_model"] + ", " + shown["backend"] + " backend, " + shown[PROMPT_SET] + " prompts"
    frame = pd.DataFrame({
        "run": heading,
        "Dimension": shown["dimension"].map(lambda d: DIMENSION_NAMES.get(d, d)),
        **{name: shown[column] for column, name in J1_COLUMNS.items()},
    })
    return Printed((Block(frame.reset_index(drop=True), group="run"),))


def judge_scores(tidy: pd.DataFrame, *, seed: int = 0) -> TableResult:
    """Table J2: mean scores with intervals per assistant model (per run), setting and task type."""
    labelled = by_run(tidy)[0]
    scores = aggregate(labelled, ["assistant_model", "assistant_setting", "task_type"], seed=seed)
    scores["assistant_model"] = scores["assistant_model"].map(row_label)  # the source names the full spec
    judges = ", ".join(sorted(tidy["judge_model"].unique()))
    caption = (f"Judge scores per assistant model, setting and task type (judge {judges})."
               + provenance_note(provenance(labelled)))
    return TableResult(scores, caption, score_source(tidy), words=long_words)
