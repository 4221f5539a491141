"""The failure reviewer's request (`prompt_templates.review`), built from a review context.

A review context is a judge context (`judging.requests.judge_context`) with `verdicts` added: the
judge's score and explanation per dimension under review ({dimension: {"score", "explanation"}}).
The request carries it whole, for the offline reviewer (`validity.offline`) and the records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from personalens_utils.llm import CallKind, Message, Request
from personalens_utils.prompt_templates import review as review_text
from personalens_utils.prompt_templates.render import render_fields_as_keyed, render_preferences

REVIEW_TEMPERATURE = 0.0
REVIEW_MAX_TOKENS = 600
REVIEW_TASK = "blame"
"""The review call's `task` (its accounting line)."""


def render_numbered(turns: list[Mapping[str, str]]) -> str:
    """The conversation with each message numbered from 1, as the reviewer names the turn it blames."""
    return "\n".join(review_text.NUMBERED_LINE.format(number=k, speaker=t["role"].upper(),
                                                      content=t["content"] or "(empty)")
                     for k, t in enumerate(turns, start=1))


def render_verdicts(verdicts: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per judged dimension: its score (or that none was read) and the judge's explanation."""
    lines = [review_text.VERDICT_LINE.format(
                 dimension=name, score="no score" if v.get("score") is None else v["score"],
                 explanation=" ".join(str(v.get("explanation") or "").split()) or "(none)")
             for name, v in verdicts.items()]
    return "\n".join(lines) or "(none)"


def review_request(context: Mapping[str, Any], reviewer_model: str) -> Request:
    """One reviewer call on a review context; the head (instructions, profile, task) is cacheable."""
    task = context["task"]
    head = review_text.REVIEW_HEAD.format(
        demographics=render_fields_as_keyed(context.get("demographics") or {}),
        preferences=render_preferences(context.get("preferences") or {}),
        situation=render_fields_as_keyed(context.get("situation") or {}),
        task_description=task["task_description"], goal=task["task_goal"],
        relevant=", ".join(task.get("relevant_preferences") or ()) or "(none)")
    tail = review_text.REVIEW_TAIL.format(ended=context.get("ended", "unknown"),
                                conversation=render_numbered(list(context["dialogue"])),
                                verdicts=render_verdicts(context.get("verdicts") or {}))
    return Request(kind=CallKind.REVIEW, messages=(Message("user", head + tail),), model=reviewer_model,
                   temperature=REVIEW_TEMPERATURE, max_tokens=REVIEW_MAX_TOKENS, task=REVIEW_TASK,
                   context={**context, "cache_prefix_chars": len(head)})


def reminder_request(request: Request, answer: str, problem: str) -> Request:
    """The retry: the same conversation plus the unreadable answer and a reminder of the form."""
    note = review_text.REVIEW_REMINDER.format(problem=problem)
    messages = (*request.messages, Message("assistant", answer or "(empty answer)"), Message("user", note))
    return replace(request, messages=messages, context={**request.context, "retry": True})
