"""Scoring rules: two readings of one stored judge answer.

`strict` is the kit's reading (`judging.parsing`, what a judgment record stores): labels found
through markdown and case changes, the scale checked, an unreadable answer asked again once and then
stored as missing, never counted. `official` is the reading of the authors' gather script, applied to
the same stored text (`raw`), so one judging run serves both rules:

- personalization, naturalness, coherence: the number after the first `<Label>: ` written exactly
  so (case, one space, digits), whatever its value; no such line -> left out of the mean;
- task completion: the first `VERDICT: true|false` (any case); no such line -> a failed task (0);
- only the first answer counts (the official code never asks again), so the kit's answer to its
  format reminder is ignored;
- turn-level personalization, which the official code never runs, keeps the strict reading.

Errored judgments (no answer) have no reading under either rule.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from personalens_utils.judging.answers import RETRY_SEPARATOR
from personalens_utils.judging.dimensions import DIMENSIONS, JudgingError
from personalens_utils.judging.parsing import official_score, official_verdict
from personalens_utils.runstore import columnar
from personalens_utils.runstore.records import Judgment

STRICT = "strict"
OFFICIAL = "official"
SCORING_RULES = (STRICT, OFFICIAL)


def check_scoring(scoring: str) -> str:
    """`scoring` if it names a rule; a clear error otherwise."""
    if scoring not in SCORING_RULES:
        raise JudgingError(f"unknown scoring rule {scoring!r}; choose one of {list(SCORING_RULES)} "
                           "(docs/judging.md, 'Scoring rules')")
    return scoring


def first_answer(raw: str) -> str:
    """The judge's first reply in a stored `raw` (before the answer to the format reminder)."""
    return raw.split(RETRY_SEPARATOR, 1)[0]


def official_reading(dimension: str, raw: str) -> float | None:
    """The score the official gather script reads from a stored answer; None: left out of the mean.
    Not defined for turn-level dimensions (the official code has none)."""
    dim = DIMENSIONS.get(dimension)
    if dim is None:
        raise JudgingError(f"unknown judge dimension {dimension!r}; known: {list(DIMENSIONS)}")
    if dim.turn_level:
        raise JudgingError(f"{dimension} has no official reading: the official code never scores it")
    text = first_answer(raw)
    if dim.family == "task_completion":
        return official_verdict(text)
    return official_score(text, dim.label)


def score_under(
    scoring: str, dimension: str, status: str, score: float | None, raw: str | None
) -> float | None:
    """A stored judgment's score under `scoring` (None: no score, left out of every mean).

    `status`, `score` and `raw` are the record's fields; the strict reading is the stored one.
    """
    check_scoring(scoring)
    if status == "error":
        return None
    strict = score if status == "ok" and score is not None and not math.isnan(score) else None
    dim = DIMENSIONS.get(dimension)
    if scoring == STRICT or (dim is not None and dim.turn_level):
        return strict
    return official_reading(dimension, raw or "")


def _official_column(rec: dict[str, Any]) -> float | None:
    return score_under(OFFICIAL, rec.get("dimension", ""), rec["status"], rec.get("score"), rec.get("raw"))


_RULE_SOURCES = [str(Path(__file__).parent / f"{name}.py")
                 for name in ("scoring", "parsing", "answers", "dimensions")]
columnar.derive(Judgment, "official_score", ("DOUBLE", _official_column), _RULE_SOURCES)
