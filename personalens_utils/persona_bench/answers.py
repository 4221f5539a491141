"""Reading a model's answer to a PERSONA Bench item; an answer that does not read is a missing
prediction (None), never a guess.

The kit's prompts ask for one word, a number or a text; the official mode reads answers exactly as
the authors' evaluators do (3.1: the stripped, lower-cased answer must be "positive" or
"negative"; 3.2: a number, else the last number in the answer; 3.3: any text).
"""

from __future__ import annotations

import re

LABELS = ("positive", "negative")
_NUMBER = re.compile(r"[-+]?\b\d+(?:\.\d+)?\b")


def read_label(text: str, *, official: bool) -> str | None:
    """3.1: "positive" or "negative"; the kit also accepts quotes, markup and a trailing full stop."""
    answer = text.strip().lower()
    if not official:
        answer = answer.strip("*_`\"' ").rstrip(".!").strip()
    return answer if answer in LABELS else None


def read_score(text: str) -> float | None:
    """3.2: the answer as a number, else the last number in it (the authors' rule)."""
    answer = text.strip()
    try:
        return float(answer)
    except ValueError:
        found = _NUMBER.findall(answer)
        return float(found[-1]) if found else None


def read_text(text: str) -> str | None:
    """3.3: the reply text; an empty answer is missing."""
    answer = text.strip()
    return answer or None


def read_answer(task: str, text: str, *, official: bool) -> str | float | None:
    if task == "3.1":
        return read_label(text, official=official)
    if task == "3.2":
        return read_score(text)
    return read_text(text)
