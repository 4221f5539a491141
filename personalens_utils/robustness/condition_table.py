"""R1: Table 3 under every condition of the grid, so a reader can compare an assistant's scores across
user agents and judges row by row."""

from __future__ import annotations

import pandas as pd

from personalens_utils.assistants.python import row_label
from personalens_utils.measures.bootstrap import method_note
from personalens_utils.measures.display import CLUSTER, MAIN_SETTING, fmt_ci, missing_note, score_source
from personalens_utils.measures.scores import PERSONALIZATION, SCALES, TASK_COMPLETION, aggregate
from personalens_utils.measures.stats import withheld_note
from personalens_utils.outputs.tables import TableResult
from personalens_utils.robustness.conditions import (
    ASSISTANT,
    CONDITION,
    LABEL,
    conditions_in,
    roles_note,
    with_conditions,
)

DIMENSIONS = (TASK_COMPLETION, PERSONALIZATION)
"""The two scores a robustness table reports: what the paper's conclusions rest on."""
TASK_TYPES = ("SD", "MD")


def condition_table(tidy: pd.DataFrame, *, setting: str = MAIN_SETTING, seed: int = 0) -> TableResult:
    """Table 3's TCR and P, SD and MD, one row per condition and assistant, each cell's interval
    resampling users as Table 3's does (`aggregate` with the user as cluster)."""
    frame = with_conditions(tidy)
    if "assistant_setting" in frame.columns:
        frame = frame[frame["assistant_setting"] == setting]
    if frame.empty:
        raise ValueError(f"no judged dialogues under setting {setting!r}")
    by = [*CONDITION, LABEL, ASSISTANT, "task_type"]
    long = aggregate(frame, by, DIMENSIONS, seed=seed, cluster=CLUSTER)
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for rec in long.itertuples(index=False):
        column = f"{rec.task_type} {SCALES[rec.dimension].short}"
        cells.setdefault((rec.condition, rec.assistant_model), {})[column] = fmt_ci(
            rec.mean, rec.ci_low, rec.ci_high, 1 if rec.dimension == TASK_COMPLETION else 2)
    order = [f"{t} {SCALES[d].short}" for t in TASK_TYPES for d in DIMENSIONS]
    present = [c for c in order if any(c in shown for shown in cells.values())]
    rank = {label: i for i, label in enumerate(conditions_in(frame))}
    keys = sorted(cells, key=lambda key: (rank[key[0]], key[1]))
    rows = [{"Condition": condition, "Assistant": row_label(assistant),
             **{c: cells[condition, assistant].get(c, "n/a") for c in present}}
            for condition, assistant in keys]
    caption = (
        "Table 3 under each condition (user agent model and style / judge): task completion rate "
        "(TCR, %) and personalization (P, 1-4) on single- (SD) and multi-domain (MD) tasks; in brackets "
        f"{method_note()}."
        + withheld_note(long.attrs["withheld"]) + missing_note(long, frame) + roles_note(frame)
    )
    return TableResult(pd.DataFrame(rows), caption, score_source(frame), long)
