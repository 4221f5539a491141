"""Table 5: agreement of the judge with human annotators, or with a second judge when there are none.

Cohen's kappa compares the judge with each other rater; Fleiss' kappa and Krippendorff's alpha
are computed among the raters (ordinal alpha for the rating scales, nominal for task completion).
Without annotation sheets the table compares two judge models and its caption says so plainly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from personalens_utils.data import Benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, judge_model_key, run_judging
from personalens_utils.labels.agreement import AGREEMENT_DIMENSIONS, agreement_table
from personalens_utils.labels.reading import read_sheets
from personalens_utils.labels.sampling import read_manifest
from personalens_utils.labels.sheets import export_sheet
from personalens_utils.measures.display import MAIN_SETTING, provenance_note
from personalens_utils.measures.scores import backends, load_scores
from personalens_utils.outputs.latex import Block, Printed
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.prompt_sets import KIT, PromptSet
from personalens_utils.runstore.store import RunStore


def table5(
    judge: pd.DataFrame,
    annotations: pd.DataFrame | None,
    *,
    judge_model: str,
    second_judge: pd.DataFrame | None = None,
    second_judge_model: str | None = None,
    backend_names: set[str] | Sequence[str] = (),
    origin: str = "a score frame",
) -> TableResult:
    """Judge-human agreement when annotations exist; otherwise judge-judge agreement, said plainly.

    `judge` and `second_judge` are tidy score frames (one judge each); `annotations` is the long
    frame from `labels.reading.read_sheets` (annotator, dialogue_id, dimension, score) or None.
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
        raters = [judge_model, *(f"annotator {a}" for a in annotations["annotator"].unique())]
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
        n_items = judge["dialogue_id"].nunique()
        raters = [judge_model, second_judge_model or "second judge"]
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
    source = Source.of(origin, n_items, "rated dialogues", backend_names, raters)
    return TableResult(table, caption, source, precision=3, printed=printed_table5)


PRINTED_NAMES = {"Cohen's κ": "Cohen κ", "Fleiss' κ": "Fleiss κ", "Krippendorff's α": "Kripp. α"}
"""Table 5's measures as a paper's column prints them; the legend says what each compares."""


def printed_table5(shown: pd.DataFrame) -> Printed:
    """Table 5 for a paper, one column wide: each measure under a short name whose legend says who it
    compares; the alpha level, which the caption states per dimension, is left out, and so is a
    number of raters that is the same on every row (the legend states it)."""
    renamed, legend = {}, []
    for column in shown.columns:
        for long, short in PRINTED_NAMES.items():
            if column.startswith(long):
                renamed[column] = short
                among = column.removeprefix(long).strip(" ()")
                legend.append(f"{short}: {long}" + (f", {among}" if among else "") + ".")
    dropped = ["α level"]
    if "raters" in shown and shown["raters"].nunique() == 1:
        dropped.append("raters")
        legend.append(f"{shown['raters'].iloc[0]} raters on every dimension.")
    frame = shown.drop(columns=dropped, errors="ignore")
    frame = frame.rename(columns={**renamed, "Metric": "Dimension"})
    return Printed((Block(frame),), " ".join(legend))


def _identical(first: pd.DataFrame, second: pd.DataFrame) -> bool:
    keys = ["dialogue_id", "dimension"]
    both = first[[*keys, "score"]].merge(second[[*keys, "score"]], on=keys).dropna()
    return bool(len(both)) and bool((both["score_x"] == both["score_y"]).all())


@dataclass(frozen=True)
class AnnotationSample:
    """Table 5's annotation sample: the folder its sheet goes to, its size and seed, and the sheets
    people filled (None: a second judge rates the sample instead). The size is shared equally among the
    assistants, each drawn apart (`labels.sampling.draw_sample`), so putting a new assistant beside them
    (`make evaluate`, with `n` grown by one assistant's share) draws the same dialogues of theirs and the
    second judge is called on the new assistant's only."""

    directory: str | Path
    sheets: Any = None
    n: int = 100
    seed: int = 0


def agreement_for_run(
    store: RunStore | str | Path,
    benchmark: Benchmark,
    client: Any,
    *,
    judge_model: str,
    second_judge_model: str,
    sample: AnnotationSample,
    prompts: PromptSet = KIT,
) -> tuple[TableResult, dict[str, Path]]:
    """Table 5 for a run: export the annotation sample, then compare the judge with the filled sheets,
    or, with none, judge the sample again with `second_judge_model` and compare the two judges; both
    judges' scores are those made with the judge prompts of `prompt_templates` (docs/judging.md).
    """
    store = store if isinstance(store, RunStore) else RunStore(store)
    origin = f"run store {store.root.name}/"
    paths = export_sheet(
        store, benchmark, sample.directory, n=sample.n, seed=sample.seed,
        where={"assistant_setting": MAIN_SETTING}, stratify_by="assistant_model", apart=True,
    )
    ids = set(read_manifest(paths["manifest"])["dialogue_ids"])

    def scores_of(model: str) -> pd.DataFrame:
        tidy = load_scores(store, judge_model=model, judge_prompt_set=prompts.name, dialogue_ids=ids)
        return tidy[tidy["dimension"].isin(AGREEMENT_DIMENSIONS)]

    judge = scores_of(judge_model)
    if sample.sheets:
        humans = read_sheets(sample.sheets, manifest=paths["manifest"])
        result = table5(
            judge,
            humans,
            judge_model=judge_model_key(judge_model),
            backend_names=backends(judge),
            origin=origin,
        )
        return result, paths
    run_judging(store, client, benchmark_contexts(benchmark),
                JudgingConfig(judge_model=second_judge_model, dimensions=AGREEMENT_DIMENSIONS,
                              select=lambda d: d.id in ids, prompts=prompts))
    second = scores_of(second_judge_model)
    result = table5(
        judge,
        None,
        judge_model=judge_model_key(judge_model),
        second_judge=second,
        second_judge_model=judge_model_key(second_judge_model),
        backend_names=backends(judge) | backends(second),
        origin=origin,
    )
    return result, paths
