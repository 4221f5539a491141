"""From judge answers to judgment records, the same for online and batch judging.

An answer with no valid score is asked once more with a format reminder; the record keeps both
replies (`raw`) and the better reading. Turn-level scoring averages the turns that have a score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from personalens_utils.judging.dimensions import Dimension
from personalens_utils.judging.parsing import ParsedAnswer
from personalens_utils.llm.role import Role
from personalens_utils.runstore.identity import Variant
from personalens_utils.runstore.official_reading import RETRY_SEPARATOR
from personalens_utils.runstore.records import Judgment

TURN_SEPARATOR = "\n\n----- after assistant turn {turn} -----\n\n"


@dataclass
class Answer:
    """The answer behind one score: its reading, the raw text of every reply and how many were asked."""

    parsed: ParsedAnswer
    raw: str
    attempts: int


def combine(dimension: Dimension, first: str, second: str | None) -> Answer:
    """The answer behind a score: the first reply, or the first and the reply to the format reminder."""
    parsed = dimension.parse(first)
    if parsed.ok or second is None:
        return Answer(parsed, first, 1)
    again = dimension.parse(second)
    return Answer(again if again.ok else parsed, first + RETRY_SEPARATOR + second, 2)


def score_fields(dimension: Dimension, answers: Sequence[Answer]) -> dict[str, Any]:
    """Score fields of one judgment record (status, score, turn_scores, explanation, raw, attempts)."""
    if not dimension.turn_level:
        (answer,) = answers
        ok = answer.parsed.ok
        return {
            "status": "ok" if ok else "missing",
            "score": answer.parsed.score,
            "turn_scores": None,
            "explanation": answer.parsed.explanation if ok else f"no valid score: {answer.parsed.problem}",
            "raw": answer.raw,
            "attempts": answer.attempts,
        }
    scores = [a.parsed.score for a in answers]
    valid = [s for s in scores if s is not None]
    notes = [
        f"turn {k}: {a.parsed.explanation if a.parsed.ok else 'no valid score: ' + str(a.parsed.problem)}"
        for k, a in enumerate(answers, start=1)
    ]
    return {
        "status": "ok" if valid else "missing",
        "score": sum(valid) / len(valid) if valid else None,
        "turn_scores": scores,
        "explanation": "\n".join(notes) if notes else "no assistant turn to score",
        "raw": "".join(TURN_SEPARATOR.format(turn=k) + a.raw for k, a in enumerate(answers, start=1)).strip(),
        "attempts": sum(a.attempts for a in answers),
    }


def error_fields(explanation: str) -> dict[str, Any]:
    """Score fields of a judgment the llm layer could not make: judged again on the next run."""
    return {"status": "error", "score": None, "turn_scores": None, "explanation": explanation, "raw": "",
            "attempts": 0}


def judgment_record(dialogue_id: str, dimension: Dimension, judge: Role, variant: Variant,
                    fields: Mapping[str, Any]) -> Judgment:
    """One judgment record: its identity fields (`variant`: the judge prompts and sample; `judge` as its
    records key it, `JudgingConfig.judge_as`) and the score fields."""
    turn_scores = fields["turn_scores"]
    return Judgment(
        dialogue_id=dialogue_id, dimension=dimension.name, judge_model=judge.model,
        variant=variant, backend=judge.backend, judge_model_id=judge.model_id,
        status=fields["status"],
        score=fields["score"],
        turn_scores=None if turn_scores is None else tuple(turn_scores), explanation=fields["explanation"],
        raw=fields["raw"], attempts=fields["attempts"],
    )
