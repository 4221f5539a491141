"""The offline predictor of PERSONA Bench: rules over what a prompt shows (history and thread), no model.

It answers from the request's `context`, which holds exactly what the prompt shows, so the three
settings differ for reasons a reader can check:

- sign of the score (3.1, and 3.2 without the authors' sign hint): the sign of the score of the
  comment replied to when the thread shows it (*-Conv), else the sign of the history reply's score,
  else positive;
- size of the score (3.2): the absolute score of the history reply (the user's own under P-*,
  another user's under NP-Conv), else 10;
- reply text (3.3): the opening and closing words of the history reply (the user's style) around the
  content words of the comment replied to.

About 3% of answers (a seeded draw per request) are unreadable on purpose, so the coverage
accounting is exercised offline too. Items made by the authors' prompt makers (official mode) carry
no structured context: they get the prior (positive, 10, an empty-ish reply).
"""

from __future__ import annotations

import random
import re

from personalens_utils.llm import Request

UNREADABLE = "I cannot tell from what is shown."
UNREADABLE_RATE = 0.03
PRIOR_SIZE = 10
_STOP = {
    "about",
    "anyone",
    "thought",
    "thinking",
    "there",
    "their",
    "which",
    "would",
    "could",
    "should",
    "think",
    "what",
    "with",
    "this",
    "that",
    "have",
    "been",
    "from",
    "nobody",
    "mentions",
    "serious",
    "question",
    "stop",
    "can't",
    "unpopular",
    "view",
    "news",
}


def _sign(context: dict) -> int:
    parent = (context.get("parent") or {}).get("score")
    if parent is not None:
        return 1 if parent >= 0 else -1
    history = [h for h in context.get("history") or [] if h.get("score") is not None]
    if history:
        return 1 if history[0]["score"] >= 0 else -1
    return 1


def _size(context: dict) -> float:
    history = [h for h in context.get("history") or [] if h.get("score") is not None]
    return abs(history[0]["score"]) if history else PRIOR_SIZE


def _reply(context: dict) -> str:
    history = context.get("history") or []
    words = history[0]["body"].split() if history else []
    head, tail = " ".join(words[:2]), " ".join(words[-2:]) if len(words) > 4 else ""
    parent = (context.get("parent") or {}).get("body") or ""
    content = [w for w in re.findall(r"[A-Za-z']+", parent.lower()) if len(w) > 3 and w not in _STOP]
    middle = " and the ".join(dict.fromkeys(content)) if content else "point"
    return f"{head} the {middle} too. {tail}".strip()


def predict(request: Request, rng: random.Random) -> str:
    """The offline answer to one PERSONA Bench item."""
    context = dict(request.context)
    if rng.random() < UNREADABLE_RATE:
        return UNREADABLE
    task = context.get("task")
    if task == "3.1":
        return "positive" if _sign(context) > 0 else "negative"
    if task == "3.2":
        sign = context.get("sign_hint") or _sign(context)
        return f"{sign * _size(context):g}"
    return _reply(context)
