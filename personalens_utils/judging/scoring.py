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

from personalens_utils.judging.dimensions import DIMENSIONS, JudgingError
from personalens_utils.runstore.official_reading import OfficialReadingError, first_answer, stored_score
from personalens_utils.runstore.official_reading import official_reading as _official_reading

STRICT = "strict"
OFFICIAL = "official"
SCORING_RULES = (STRICT, OFFICIAL)


def check_scoring(scoring: str) -> str:
    """`scoring` if it names a rule; a clear error otherwise."""
    if scoring not in SCORING_RULES:
        raise JudgingError(f"unknown scoring rule {scoring!r}; choose one of {list(SCORING_RULES)} "
                           "(docs/judging.md, 'Scoring rules')")
    return scoring


def official_reading(dimension: str, raw: str) -> float | None:
    """The score the official gather script reads from a stored answer (`runstore.official_reading`);
    None: left out of the mean. A judging error for an unknown or turn-level dimension."""
    try:
        return _official_reading(dimension, raw)
    except OfficialReadingError as exc:
        raise JudgingError(str(exc)) from None


def score_under(
    scoring: str, dimension: str, status: str, score: float | None, raw: str | None
) -> float | None:
    """A stored judgment's score under `scoring` (None: no score, left out of every mean).

    `status`, `score` and `raw` are the record's fields; the strict reading is the stored one.
    """
    check_scoring(scoring)
    if status == "error":
        return None
    dim = DIMENSIONS.get(dimension)
    if scoring == STRICT or (dim is not None and dim.turn_level):
        return stored_score(status, score)
    return official_reading(dimension, raw or "")


__all__ = ["OFFICIAL", "SCORING_RULES", "STRICT", "check_scoring", "first_answer", "official_reading",
           "score_under"]
