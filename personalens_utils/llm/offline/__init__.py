"""The offline backend: a deterministic, rule-based stand-in for a language model.

It answers from the request's structured context, never from a network, so the whole pipeline
runs anywhere in seconds. Its answers are simulations; every table and figure made from them says
so (see `OFFLINE_LABEL`). Responders for each call kind live in sibling modules and register here.
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
_RESPONDERS: dict[CallKind, Responder] = {}


def register(kind: CallKind) -> Callable[[Responder], Responder]:
    """Decorator: make `fn(request, rng) -> text` the offline answer for one call kind."""

    def deco(fn: Responder) -> Responder:
        _RESPONDERS[kind] = fn
        return fn

    return deco


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
        _load_responders()
        responder = _RESPONDERS.get(request.kind)
        if responder is None:
            raise FatalError(f"the offline backend has no responder for calls of kind {request.kind!r}")
        text = responder(request, self.rng_for(request, model))
        prompt = request.system + "".join(m.content for m in request.messages)
        usage = Usage(input_tokens=count_tokens(prompt), output_tokens=count_tokens(text))
        return Response(text=text, usage=usage, backend=self.name, model=model, latency_s=0.0)

    async def acomplete(self, request: Request, model: str) -> Response:
        return self.respond(request, model)


_RESPONDER_MODULES = ("dialogue", "judge", "generation", "profile_consistency", "review")


@functools.cache
def _load_responders() -> None:
    """Import every responder module once, so registration happens without import cycles."""
    for module in _RESPONDER_MODULES:
        importlib.import_module(f"{__name__}.{module}")
