"""The official reading of a stored judge answer: the rule the authors' gather script applies to a saved
answer, described in our words (docs/judging.md, "Scoring rules"): no normalising, no retry, no range check.

It lives on the run store's floor because the columnar copy stores it (`judgments.official_score`) for
every process that builds the copy, whatever that process imported; `judging.scoring` applies the same
functions when it compares the kit's reading with the official one.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from personalens_utils.base.errors import KitError
from personalens_utils.reference.rubric import SCALES, TASK_COMPLETION

RETRY_SEPARATOR = "\n\n----- answer to the format reminder -----\n\n"
"""Between a judge's first answer and its answer to the format reminder, in a stored `raw`."""


class OfficialReadingError(KitError, ValueError):
    """A stored answer has no official reading: an unknown or turn-level dimension."""


@lru_cache(maxsize=16)
def _official_label(label: str) -> re.Pattern[str]:
    return re.compile(re.escape(label.rstrip(":")) + r": (\d+)")


_OFFICIAL_VERDICT = re.compile(r"VERDICT: (true|false)", re.IGNORECASE)


def official_score(text: str, label: str) -> float | None:
    """The number after the first exact `<label>: ` (case as written, one space, digits only), any
    value; None when the label with a number never occurs (that answer is left out of the mean)."""
    match = _official_label(label).search(text)
    return None if match is None else float(int(match.group(1)))


def official_verdict(text: str) -> float:
    """1.0 when the first `VERDICT: true|false` (any case, one space) says true, else 0.0: an
    answer without a readable verdict counts as a failed task, never as missing."""
    match = _OFFICIAL_VERDICT.search(text)
    return 1.0 if match is not None and match.group(1).lower() == "true" else 0.0


def first_answer(raw: str) -> str:
    """The judge's first reply in a stored `raw` (before the answer to the format reminder)."""
    return raw.split(RETRY_SEPARATOR, 1)[0]


def official_reading(dimension: str, raw: str) -> float | None:
    """The score the official gather script reads from a stored answer; None: left out of the mean.
    Not defined for turn-level dimensions (the official code has none)."""
    scale = SCALES.get(dimension)
    if scale is None:
        raise OfficialReadingError(f"unknown judge dimension {dimension!r}; known: {list(SCALES)}")
    if scale.turn_level:
        raise OfficialReadingError(f"{dimension} has no official reading: the official code never scores it")
    text = first_answer(raw)
    if scale.family == TASK_COMPLETION:
        return official_verdict(text)
    return official_score(text, scale.label)


def stored_score(status: str, score: float | None) -> float | None:
    """The kit's own (strict) reading, which the record stores: none unless the judgment is "ok"."""
    return score if status == "ok" and score is not None and not math.isnan(score) else None


def official_column(line: dict[str, Any]) -> float | None:
    """A stored judgment line's score under the official reading, as the columnar copy keeps it: none for
    an errored judgment, the stored (strict) score for a turn-level one, which the official code never
    reads."""
    status, dimension = line["status"], line.get("dimension", "")
    if status == "error":
        return None
    scale = SCALES.get(dimension)
    if scale is not None and scale.turn_level:
        return stored_score(status, line.get("score"))
    return official_reading(dimension, line.get("raw") or "")
