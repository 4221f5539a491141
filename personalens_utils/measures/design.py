"""The nested design of a run, as one frame: which user, task, simulation sample and judge sample
each score belongs to.

The tidy score frame (`measures.scores.load_scores`) names these `user_id`, `scenario_id`, `sample`
(the dialogue's repeat) and `judge_sample` (the judgment's repeat). A frame from a run made without
repeats has no repeat columns: every dialogue is then its scenario's sample 0 and every judgment its
dialogue's judge sample 0, which is what such a run is. Missing scores are left out (never zero).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from personalens_utils.base.errors import KitError

USER, TASK, SAMPLE, JUDGE_SAMPLE, ARM, SCORE = "user", "task", "sample", "judge_sample", "assistant", "score"
LEVELS = (USER, TASK, SAMPLE, JUDGE_SAMPLE)
"""The nesting, outermost first: tasks within users, samples within scenarios, judge samples within
dialogues."""
SOURCE_COLUMNS = {USER: "user_id", TASK: "scenario_id", SAMPLE: "sample", JUDGE_SAMPLE: "judge_sample"}
DESIGN_COLUMNS = ("dimension", "score", "dialogue_id", *SOURCE_COLUMNS.values())
"""The score frame's columns `design_frame` reads besides its arm: a caller selecting rows of a whole
run's frame for it can keep only these."""
PERCENT_DIMENSIONS = ("task_completion",)
"""Dimensions reported in percent (TCR), as in the kit's tables, so variances are in the tables' units."""


class DesignError(KitError, ValueError):
    """A design cannot be made from what was given: a score frame lacking a column, a dimension or an
    arm, or a probe design of a size the benchmark cannot fill."""


def design_frame(tidy: pd.DataFrame, dimension: str, *, arm: str = "assistant_model") -> pd.DataFrame:
    """One row per valid score of `dimension`: `user`, `task`, `sample`, `judge_sample`, `assistant`
    (the value of the `arm` column, e.g. an assistant model or setting), `score`.

    Task completion is in percent. Rows are sorted, so everything resampled from them is the same
    for the same scores whatever order the store returned them in.
    """
    needed = ["dimension", "score", arm, SOURCE_COLUMNS[USER], SOURCE_COLUMNS[TASK]]
    absent = [c for c in needed if c not in tidy.columns]
    if absent:
        raise DesignError(f"the score frame has no column(s) {absent}; load it with "
                          "measures.scores.load_scores")
    part = tidy[(tidy["dimension"] == dimension) & tidy["score"].notna()]
    if part.empty:
        raise DesignError(f"no valid {dimension!r} scores in the frame; it holds dimensions "
                          f"{sorted(tidy['dimension'].unique())}")
    _check_unlabelled_repeats(part, arm)
    factor = 100.0 if dimension in PERCENT_DIMENSIONS else 1.0
    frame = pd.DataFrame({
        USER: part[SOURCE_COLUMNS[USER]].to_numpy(),
        TASK: part[SOURCE_COLUMNS[TASK]].astype(str).to_numpy(),
        SAMPLE: _repeat(part, SOURCE_COLUMNS[SAMPLE]),
        JUDGE_SAMPLE: _repeat(part, SOURCE_COLUMNS[JUDGE_SAMPLE]),
        ARM: part[arm].astype(str).to_numpy(),
        SCORE: part["score"].to_numpy(dtype=float) * factor,
    })
    return sort_design(frame)


def _repeat(part: pd.DataFrame, column: str) -> object:
    return part[column].fillna(0).astype(int).to_numpy() if column in part.columns else 0


def _check_unlabelled_repeats(part: pd.DataFrame, arm: str) -> None:
    """Refuse repeats the frame does not number: a scenario must have one dialogue per arm and sample,
    a dialogue one judgment of the dimension per judge sample. Otherwise they would be pooled as one."""
    if "dialogue_id" not in part.columns:
        return
    sample, judge_sample = SOURCE_COLUMNS[SAMPLE], SOURCE_COLUMNS[JUDGE_SAMPLE]
    keys = [arm, SOURCE_COLUMNS[TASK], *([sample] if sample in part.columns else [])]
    dialogues = part.groupby(keys)["dialogue_id"].nunique()
    if (dialogues > 1).any():
        raise DesignError(f"{int((dialogues > 1).sum())} scenarios have several dialogues of one arm that "
                          f"the {sample!r} column does not tell apart: select one setting (and run) per arm, "
                          "or load a frame numbering its repeats")
    keys = ["dialogue_id", *([judge_sample] if judge_sample in part.columns else [])]
    if part.duplicated(keys).any():
        raise DesignError(f"dialogues with several judgments of one dimension that the {judge_sample!r} "
                          "column does not tell apart")


def sort_design(frame: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
    """`frame` sorted by arm, the levels and score: one order for the same contents."""
    keys = [c for c in (ARM, *LEVELS, *extra, SCORE) if c in frame.columns]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def check_design(frame: pd.DataFrame, columns: Sequence[str] = (USER, TASK, SCORE)) -> None:
    """Raise naming the columns a design frame lacks."""
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise DesignError(f"the design frame has no column(s) {absent}; build it with "
                          "measures.design.design_frame")
