"""The offline backend: a deterministic, rule-based stand-in for a language model.

It answers from the request's structured context, never from a network, so the whole pipeline
runs anywhere in seconds. Its answers are simulations; every table and figure made from them says
so (see `OFFLINE_LABEL`). The stand-in for each call kind lives beside the stage that defines the
behaviour (`simulation.offline`, `judging.offline`, ...); this package holds only the backend and its
dispatch, `RESPONDERS`. That table names them as strings and imports one by name when its kind is first
asked: a declared dispatch into the stages floor, the one way the model door reaches above itself
(docs/architecture.md), so the floor test, which reads import statements, does not see it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import random
from collections.abc import Callable

from personalens_utils.llm.types import CallKind, FatalError, Request, Response, Usage

OFFLINE_LABEL = "offline backend (rule-based simulation, not a language model)"
OFFLINE_RULES = "offline rules"
"""What answered a call on the offline backend, shown where a model id would be: no model answered."""


def answered_by(backend: str, model_id: str) -> str:
    """`backend: model id` of a role's calls, or the offline rules where no model answered them."""
    return OFFLINE_RULES if backend == "offline" else f"{backend}: {model_id}"


Responder = Callable[[Request, random.Random], str]
RESPONDERS: dict[CallKind, tuple[str, str]] = {
    CallKind.USER_TURN: ("personalens_utils.simulation.offline", "user_turn"),
    CallKind.ASSISTANT_TURN: ("personalens_utils.simulation.offline", "assistant_turn"),
    CallKind.JUDGE: ("personalens_utils.judging.offline", "respond"),
    CallKind.GENERATION: ("personalens_utils.generation.offline", "respond"),
    CallKind.VALIDATION: ("personalens_utils.benchmark_validation.offline", "respond_consistency"),
    CallKind.REVIEW: ("personalens_utils.validity.offline", "respond"),
    CallKind.PERSONA_BENCH: ("personalens_utils.persona_bench.offline", "predict"),
}
"""The offline answer to each call kind: (module of its stage, function `fn(request, rng) -> text`).
Declared here, not registered by the stages, so every process answers every kind whatever it imported;
the modules are imported by name when first asked (they are large, and most runs need a few)."""


@functools.cache
def responder(kind: CallKind) -> Responder:
    """The function that answers calls of `kind` offline."""
    if kind not in RESPONDERS:
        raise FatalError(f"the offline backend has no responder for calls of kind {kind!r}")
    module, name = RESPONDERS[kind]
    fn: Responder = getattr(importlib.import_module(module), name)
    return fn


def count_tokens(text: str) -> int:
    """Rough token count (whitespace words x 4/3) used for offline usage figures."""
    return (len(text.split()) * 4 + 2) // 3


class OfflineBackend:
    name = "offline"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def rng_for(self, request: Request, model: str) -> random.Random:
        digest = hashlib.sha256(f"{self.seed}:{request.cache_key(self.name, model)}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def respond(self, request: Request, model: str) -> Response:
        text = responder(request.kind)(request, self.rng_for(request, model))
        prompt = request.system + "".join(m.content for m in request.messages)
        usage = Usage(input_tokens=count_tokens(prompt), output_tokens=count_tokens(text))
        return Response(text=text, usage=usage, backend=self.name, model=model, latency_s=0.0)

    async def acomplete(self, request: Request, model: str) -> Response:
        return self.respond(request, model)
