"""The judge stage: score stored dialogues on the paper's dimensions and store one record each.

By concern: `dimensions` (what is scored, with its template and parser), `parsing` (reading answers
strictly, and as the official code does), `scoring` (the two rules over a stored answer), `requests`
(the judge's context and calls), `answers` (answers to records), `config` (`JudgingConfig`: what a
run is asked to do), `plan` (what is left to judge, the cost estimate), `runner` (online), `batch`
(Message Batches), `report`.
This module re-exports what notebooks and scripts use.
"""

from personalens_utils.judging.batch import run_judging_batch
from personalens_utils.judging.config import JudgingConfig
from personalens_utils.judging.dimensions import (
    ALL_DIMENSIONS,
    DEFAULT_JUDGE_MODEL,
    DIMENSIONS,
    Dimension,
    JudgingError,
    dimensions_from,
    judge_model_key,
)
from personalens_utils.judging.plan import (
    JUDGEABLE_STATUSES,
    dialogue_filter,
    estimate_judging,
    judged_users,
    sharded,
    skipped_offline_line,
    skipped_offline_note,
)
from personalens_utils.judging.report import missing_rate
from personalens_utils.judging.requests import benchmark_contexts, dimension_requests, judge_context
from personalens_utils.judging.runner import judge_dialogue, run_judging
from personalens_utils.judging.scoring import (
    OFFICIAL,
    SCORING_RULES,
    STRICT,
    check_scoring,
    official_reading,
    score_under,
)
from personalens_utils.prompt_sets.kit import build_prompt, judge_request

__all__ = [
    "ALL_DIMENSIONS",
    "DEFAULT_JUDGE_MODEL",
    "DIMENSIONS",
    "JUDGEABLE_STATUSES",
    "OFFICIAL",
    "SCORING_RULES",
    "STRICT",
    "Dimension",
    "JudgingConfig",
    "JudgingError",
    "benchmark_contexts",
    "build_prompt",
    "check_scoring",
    "dialogue_filter",
    "dimension_requests",
    "dimensions_from",
    "estimate_judging",
    "judge_context",
    "judge_dialogue",
    "judge_model_key",
    "judge_request",
    "judged_users",
    "missing_rate",
    "official_reading",
    "run_judging",
    "run_judging_batch",
    "score_under",
    "sharded",
    "skipped_offline_line",
    "skipped_offline_note",
]
