"""The request and response every language-model call in the kit goes through.

A request carries both what a real model is sent (system text and messages) and the structured
context the prompt was built from, so the offline backend can answer from facts instead of prose.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

import orjson

from personalens_utils.base.errors import KitError

Speaker = Literal["user", "assistant"]


class CallKind(StrEnum):
    """What a call is for; backends and accounting group calls by it."""

    USER_TURN = "user_turn"
    ASSISTANT_TURN = "assistant_turn"
    JUDGE = "judge"
    GENERATION = "generation"
    VALIDATION = "validation"
    PERSONA_BENCH = "persona_bench"
    REVIEW = "review"


ROLES: Mapping[CallKind, str] = {
    CallKind.USER_TURN: "user agent",
    CallKind.ASSISTANT_TURN: "assistant",
    CallKind.JUDGE: "judge",
    CallKind.GENERATION: "benchmark generator",
    CallKind.VALIDATION: "consistency checker",
    CallKind.PERSONA_BENCH: "PERSONA Bench model",
    CallKind.REVIEW: "failure reviewer",
}
"""The role each kind of call plays, as messages about a failed call name it."""


@dataclass(frozen=True, slots=True)
class Message:
    role: Speaker
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class Request:
    """One call to a language model.

    `task` names the call within its kind: the judge dimension ("personalization", ...) or the
    generation step ("preferences", ...); empty for dialogue turns. `context` is the structured
    material the prompt was rendered from; it never reaches a real model and is not part of the
    cache key (the rendered prompt already is). `sample` is which independent repetition of the same
    call this is (a run's `repeats` or `judge_samples`): part of the cache key when not 0, so a cache
    never answers sample 2 with sample 1's answer, and a sample-0 call keeps the key it always had.
    """

    kind: CallKind
    messages: tuple[Message, ...]
    system: str = ""
    model: str = ""
    temperature: float | None = None
    max_tokens: int = 1024
    task: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)
    stop: tuple[str, ...] = ()
    sample: int = 0

    def cache_key(self, backend: str, resolved_model: str) -> str:
        """Hash of exactly what changes the answer: backend, model, parameters, system, messages, and
        the sample index when it is not 0."""
        payload = {
            "backend": backend,
            "model": resolved_model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
            "system": self.system,
            "messages": [m.as_dict() for m in self.messages],
            **({"sample": self.sample} if self.sample else {}),
        }
        return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        """The one stored form of token usage (run-store records, batch results)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Read `to_dict`'s form back; a key it does not write raises TypeError, a non-number ValueError."""
        return cls(**{key: int(value) for key, value in data.items()})


@dataclass(frozen=True)
class Response:
    text: str
    usage: Usage
    backend: str
    model: str
    latency_s: float
    cached: bool = False
    retries: int = 0
    cost_usd: float = 0.0
    batch: bool = False
    """Answered through a batch API (set by the batch transport): billed, and booked, at batch prices."""
    cut_off: bool = False
    """The model stopped at the request's token limit, not where it meant to (openai's finish_reason
    "length", anthropic's and bedrock's stop reason "max_tokens"): the text is kept as it came, and a
    dialogue counts such replies, since a cut reply reads as a complete one."""


@runtime_checkable
class ChatModel(Protocol):
    """A backend: turns one request into one response, or raises an `LLMError`. One whose endpoint
    decides which model answers says where in a `served_at` attribute (`endpoints`; the openai one)."""

    name: str

    async def acomplete(self, request: Request, model: str) -> Response: ...


class LLMError(KitError):
    """Base of every error the llm layer raises."""


class RetryableError(LLMError):
    """A failure a later attempt may not repeat: 429, 529, 5xx, dropped connections."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class FatalError(LLMError):
    """A failure retrying cannot fix (bad key, bad request, spend limit); the message says what to do.

    `role` is the role of the failed call ("user agent", "judge", ...), set by the client, so a run
    that stops on it can say whose call it was."""

    def __init__(self, message: str, *, status: int | None = None, role: str | None = None):
        super().__init__(message)
        self.status = status
        self.role = role


class RetriesExhaustedError(LLMError):
    """Every allowed attempt hit a retryable failure; the message says how many and what the last was."""

    def __init__(self, message: str, *, attempts: int, last_error: RetryableError):
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error


class PreflightError(FatalError):
    """A role's backend failed its check before any work started; nothing was run or stored."""

    says_all = True
    """The message names the role, backend, cause and fix (`errors.KitError`)."""
