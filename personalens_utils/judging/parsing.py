"""Reading judge answers back into scores, strictly.

Accepted (harmless variation): any letter case; markdown emphasis, headers, quotes and bullets
around the label or the number; `<response>` tags (when present, only the last tagged block is
read, so reasoning written before it cannot add a second score); prose before and after; the
number in brackets or followed by a qualifier ("3 (Strong)"); a whole-valued decimal ("3.0"); a
denominator that names the scale ("3/4", "3 out of 4"); the same score repeated; a bare
`Score:` at the start of a line when the full label is absent; for task completion, `VERDICT:`
followed by true/false, or an answer whose first word is true/false when an `EXPLANATION:` follows
(the paper's prompt ends with "VERDICT:", so models continue after it).

Rejected (the answer has no valid score): no labelled number; a number outside the scale or not
whole ("3.5"); a denominator other than the scale's top ("3/5" on a 1-4 scale); a range or a
choice ("2-3", "3 or 4"); two different scores; a verdict that is neither true nor false, or both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

VERDICT_LABEL = "VERDICT:"


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """A judge answer read back: `score` is None exactly when `problem` says why not."""

    score: float | None
    explanation: str
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.score is not None


_RESPONSE_BLOCK = re.compile(r"<response>(.*?)(?:</response>|\Z)", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"</?response>", re.IGNORECASE)
_LINE_DECOR = re.compile(r"(?m)^[ \t]*(?:(?:#{1,6}|>|[-•+]|\d+[.)](?=[ \t]+[a-z]))[ \t]*)+", re.IGNORECASE)
_EMPHASIS = re.compile(r"\*+|__+|`+")
_NUMBER = re.compile(
    r"\s*[\[(]?\s*(?P<value>[+-]?\d+(?:\.\d+)?)\s*[\])]?"
    r"(?:\s*(?:/|out\s+of)\s*(?P<denom>\d+(?:\.\d+)?))?"
    r"(?P<alt>\s*(?:-|–|—|to|or|and)\s*\d)?",
    re.IGNORECASE,
)
_SECTION = re.compile(
    r"^(?:key observations|justification|explanation|improvement suggestions|reasoning|rationale)\s*:",
    re.IGNORECASE | re.MULTILINE,
)


def normalize_answer(text: str) -> str:
    """The answer with markdown decoration removed and only its last `<response>` block kept."""
    blocks = _RESPONSE_BLOCK.findall(text)
    body = blocks[-1] if blocks and blocks[-1].strip() else _TAGS.sub("", text)
    body = _EMPHASIS.sub("", body)
    return _LINE_DECOR.sub("", body).strip()


@lru_cache(maxsize=64)
def _label_pattern(label: str, *, line_start: bool) -> re.Pattern[str]:
    words = r"\s+".join(re.escape(w) for w in label.rstrip(":").split())
    prefix = r"(?m)^" if line_start else r"(?<![a-z])"
    separator = r"\s*(?::|=|\bis\b|\bof\b|[ \t]*(?=\n))"  # or a header line of its own
    return re.compile(prefix + words + separator, re.IGNORECASE)


def _scores_after(
    pattern: re.Pattern[str], text: str, low: int, high: int
) -> tuple[list[tuple[int, int]], str | None]:
    """(score, end offset) after each occurrence of the label; the first problem found, if any."""
    scores: list[tuple[int, int]] = []
    for match in pattern.finditer(text):
        number = _NUMBER.match(text, match.end())
        if number is None:
            continue  # the label used in prose ("the score reflects ..."), not a score
        raw = number.group("value")
        if number.group("alt"):
            return scores, f"a range or choice instead of one score after {match.group(0)!r}"
        value = float(raw)
        if not value.is_integer():
            return scores, f"score {raw} is not a whole number"
        denom = number.group("denom")
        if denom is not None and float(denom) != high:
            return scores, f"score {raw}/{denom} is not on the {low}-{high} scale"
        if not low <= value <= high:
            return scores, f"score {raw} is outside {low}-{high}"
        scores.append((int(value), number.end()))
    return scores, None


def _explanation(text: str, after: int = 0) -> str:
    """The prose of the answer: from its first section label on, else everything after the score."""
    section = _SECTION.search(text)
    body = text[section.start():] if section else text[after:]
    return re.sub(r"\s+\n", "\n", body).strip().lstrip(".:;,)]- \n").strip()


def parse_score(text: str, label: str, low: int, high: int) -> ParsedAnswer:
    """Read an integer score on `low..high` that follows `label` (e.g. "Personalization Score:")."""
    body = normalize_answer(text)
    full = _label_pattern(label, line_start=False)
    scores, problem = _scores_after(full, body, low, high)
    if not scores and problem is None:
        scores, problem = _scores_after(_label_pattern("Score:", line_start=True), body, low, high)
    if problem is None and not scores:
        problem = f"no '{label}' followed by a score from {low} to {high}"
    values = sorted({score for score, _ in scores})
    if problem is None and len(values) > 1:
        problem = f"different scores given: {values}"
    if problem is not None:
        return ParsedAnswer(None, "", problem)
    return ParsedAnswer(float(values[0]), _explanation(body, scores[0][1]))


_VERDICT = re.compile(
    r"(?<![a-z])verdict\s*(?P<sep>:|=|\bis\b)\s*[\[(\"']?\s*(?P<word>[a-z]+)", re.IGNORECASE
)
_LEADING_BOOL = re.compile(r"\A[\[(\"']?\s*(true|false)\b", re.IGNORECASE)
_EXPLANATION = re.compile(r"(?<![a-z])explanation\s*:", re.IGNORECASE)
_BOTH = re.compile(r"\s*[\"')\].]*\s*(?:/|or|and)\s*(?:true|false)\b", re.IGNORECASE)


def parse_verdict(text: str) -> ParsedAnswer:
    """Read a task-completion answer: score 1.0 for a true verdict, 0.0 for a false one."""
    body = normalize_answer(text)
    words: list[tuple[str, int]] = []
    for m in _VERDICT.finditer(body):
        word = m.group("word").lower()
        if word in ("true", "false") or m.group("sep") != "is":  # "verdict is that ..." is prose
            words.append((word, m.end()))
    explanation = _EXPLANATION.search(body)
    if not words and explanation is not None:
        lead = _LEADING_BOOL.match(body)
        if lead:
            words = [(lead.group(1).lower(), lead.end())]
    if not words:
        return ParsedAnswer(None, "", "no 'VERDICT:' followed by true or false")
    for word, end in words:
        if word not in ("true", "false"):
            return ParsedAnswer(None, "", f"verdict {word!r} is neither true nor false")
        if _BOTH.match(body, end):
            return ParsedAnswer(None, "", "the verdict offers both true and false")
    if len({w for w, _ in words}) > 1:
        return ParsedAnswer(None, "", "the answer gives both a true and a false verdict")
    reason = body[explanation.end():] if explanation else body[words[0][1]:]
    reason = reason.strip().lstrip(".:;,)]- \n").strip()
    return ParsedAnswer(1.0 if words[0][0] == "true" else 0.0, reason)
