"""The paper's result tables and figures from a run store (notebooks 04-06).

The numbers they rest on come from the floor below (`measures`: scores, intervals, designs, the
tables' shared wording) and the human labels from `labels`.

- `tables`: Tables 3 and 12, and the judging checks J1 and J2; `ablation`: Table 4;
  `judge_agreement`: Table 5; `judge_check`: does a judge rank the reference assistants in their
  designed order; `dialogue_stats`: Table 13;
  `models`: Table 11 (from the registry); `figures`: Figures 4, 5, the radar chart.

Every table-making function returns a `personalens_utils.outputs.tables.TableResult`. The names below are
re-exported so `from personalens_utils import analysis; analysis.table3(...)` works.
"""

from personalens_utils.analysis.ablation import ABLATION_SETTINGS, ablation_filter, first_users, table4
from personalens_utils.analysis.figures import (
    MIN_DIALOGUES_PER_TURN,
    REPRESENTATIVE_DOMAINS,
    domain_scores,
    figure4,
    figure5,
    radar_chart,
    turn_curves,
)
from personalens_utils.analysis.judge_agreement import AnnotationSample, agreement_for_run, table5
from personalens_utils.analysis.judge_check import judge_sanity
from personalens_utils.analysis.models import table11
from personalens_utils.analysis.tables import judge_missing, judge_scores, table3, table12
from personalens_utils.outputs.frames import rows_of
from personalens_utils.outputs.tables import Source, TableResult

__all__ = [
    "ABLATION_SETTINGS",
    "MIN_DIALOGUES_PER_TURN",
    "REPRESENTATIVE_DOMAINS",
    "AnnotationSample",
    "Source",
    "TableResult",
    "ablation_filter",
    "agreement_for_run",
    "domain_scores",
    "figure4",
    "figure5",
    "first_users",
    "judge_missing",
    "judge_sanity",
    "judge_scores",
    "radar_chart",
    "rows_of",
    "table3",
    "table4",
    "table5",
    "table11",
    "table12",
    "turn_curves",
]
