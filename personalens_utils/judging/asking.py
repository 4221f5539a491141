"""One judgment's calls, asked and asked again with a format reminder: the same policy online and in
batches (`engine.ask_parsed`); only who answers the calls differs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from personalens_utils.judging.answers import combine, error_fields, score_fields
from personalens_utils.judging.dimensions import Dimension
from personalens_utils.judging.parsing import ParsedAnswer
from personalens_utils.judging.requests import dimension_requests, reminder_request
from personalens_utils.llm import Request
from personalens_utils.prompt_sets import PromptSet
from personalens_utils.runstore import engine
from personalens_utils.runstore.engine import Asker, UnreadableAnswer


async def judge_dimension(
    ask_for: Callable[[int], Asker], dimension: Dimension, context: Mapping[str, Any], judge_model: str,
    prompts: PromptSet, sample: int = 0,
) -> dict[str, Any]:
    """Score fields of one dimension: each call asked, and asked again once with a format reminder
    when the prompt set that judges it reminds (the official script asks once). `ask_for(k)` is who
    answers the k-th call (0-based): the client online, the Message Batches stand-in in batch judging.
    Every call carries the judge `sample` (`Request.sample`: its own cache key, its own answer)."""

    def parse(text: str) -> ParsedAnswer:
        parsed = dimension.parse(text)
        if not parsed.ok:
            raise UnreadableAnswer(str(parsed.problem))
        return parsed

    def again(request: Request, answer: str, problem: str, attempt: int) -> Request:
        return reminder_request(request, answer, dimension)

    requests = [replace(request, sample=sample)
                for request in dimension_requests(dimension, context, judge_model, prompts)]
    attempts = 2 if prompts.judge_set(dimension).reminds else 1
    asked = await asyncio.gather(*(engine.ask_parsed(ask_for(k), r, parse, again, attempts=attempts)
                                   for k, r in enumerate(requests)))
    failed = [a.error for a in asked if a.error is not None]
    if failed:
        return error_fields(failed[0])
    answers = [combine(dimension, a.answers[0], a.answers[1] if len(a.answers) > 1 else None) for a in asked]
    return score_fields(dimension, answers)
