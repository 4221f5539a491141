"""Planted judges: in-process `ChatModel`s (passed to `LLMClient(model)`) whose faults are known, for
testing the judge report card. Each answers judge requests as the offline judge would, except for
its one planted fault."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from personalens_utils.judging import DIMENSIONS
from personalens_utils.judging.offline import judge_answer
from personalens_utils.llm.types import FatalError, Request, Response, Usage

Truth = Callable[[Mapping[str, Any]], Mapping[str, Any]]
"""The profile entries of the user a judge context's dialogue belongs to, found without the profile."""


class PlantedJudge:
    """The offline judge's answers through a `ChatModel`; subclasses change them."""

    name = "planted"

    async def acomplete(self, request: Request, model: str) -> Response:
        if request.kind.value != "judge":
            raise FatalError(f"{self.name}: only judges, got a {request.kind.value} request")
        text = self.answer(dict(request.context), request)
        return Response(text=text, usage=Usage(), backend=self.name, model=model, latency_s=0.0)

    def answer(self, context: dict[str, Any], request: Request) -> str:
        return judge_answer(context)


class ProfileBlindJudge(PlantedJudge):
    """Never reads the profile it is shown: it scores against the profile of the dialogue's own user,
    which it finds from the conversation (`truth`)."""

    name = "planted-blind"

    def __init__(self, truth: Truth):
        self.truth = truth

    def answer(self, context: dict[str, Any], request: Request) -> str:
        return judge_answer({**context, **self.truth(context)})


class LengthBiasedJudge(PlantedJudge):
    """Personalization one level higher (at most 4) when the assistant's turns average more than
    `words` words; otherwise the offline judge's answer."""

    name = "planted-length"

    def __init__(self, words: int = 50):
        self.words = words

    def answer(self, context: dict[str, Any], request: Request) -> str:
        text = judge_answer(context)
        said = [len(t["content"].split()) for t in context["dialogue"] if t["role"] == "assistant"]
        if context.get("dimension") != "personalization" or not said or sum(said) / len(said) <= self.words:
            return text
        return re.sub(r"(Personalization Score:\s*)(\d)", lambda m: f"{m[1]}{min(4, int(m[2]) + 1)}", text)


class RandomJudge(PlantedJudge):
    """A valid score drawn at random: each judge sample of a prompt draws from a generator seeded by the
    prompt and the sample, so answers are reproducible and differ between judge samples."""

    name = "planted-random"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def answer(self, context: dict[str, Any], request: Request) -> str:
        prompt = "".join(m.content for m in request.messages)
        digest = hashlib.sha256(f"{self.seed}:{request.sample}:{prompt}".encode()).digest()
        rng = random.Random(digest)
        dimension = DIMENSIONS[context["dimension"]]
        text = judge_answer(context)
        if dimension.family == "task_completion":
            return re.sub(r"VERDICT:\s*(True|False)", f"VERDICT: {rng.choice(['True', 'False'])}", text)
        score = rng.randint(dimension.low, dimension.high)
        return re.sub(r"(Score:\s*)\d", lambda m: f"{m[1]}{score}", text)


class ContradictingJudge(PlantedJudge):
    """Reasons as the offline judge does, then gives the opposite score: the task-completion verdict
    flipped, personalization mirrored on its scale (4 -> 1, 3 -> 2); the explanation left as it was."""

    name = "planted-contradicting"

    def answer(self, context: dict[str, Any], request: Request) -> str:
        text = judge_answer(context)
        if context["dimension"] == "task_completion":
            return re.sub(r"VERDICT:\s*(True|False)", lambda m: f"VERDICT: {m[1] != 'True'}", text)
        if context["dimension"] == "personalization":
            return re.sub(r"(Personalization Score:\s*)(\d)", lambda m: f"{m[1]}{5 - int(m[2])}", text)
        return text
