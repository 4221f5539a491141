"""Which leading part of a request repeats from call to call, and how long it must be for a provider
to cache it: rules the budget projects costs with and the Anthropic backend marks requests by.

Kept apart from the backend so that projecting a cost never imports a provider's SDK.
"""

from __future__ import annotations

from personalens_utils.llm import registry
from personalens_utils.llm.types import Request

CACHE_PREFIX_KEY = "cache_prefix_chars"
"""Request-context key: how many leading characters of the first message every call of its kind repeats
(set by the prompt builders). Without it the system prompt is the stable prefix."""

MIN_CACHEABLE_TOKENS: dict[str, int] = {
    "Claude 3 Haiku": 2048,
    "Claude 3.5 Haiku": 2048,
    "Claude Haiku 4.5": 4096,
    "Claude Opus 4.5": 4096,
    "Claude Opus 4.6": 4096,
    "Claude Opus 4.7": 2048,
    "Claude Opus 5": 512,
}
"""Shortest prefix (tokens) Anthropic caches, where it differs from `DEFAULT_MIN_CACHEABLE_TOKENS`; from
Anthropic's prompt-caching documentation as quoted on 2026-11-21. A shorter prefix is simply not cached."""

DEFAULT_MIN_CACHEABLE_TOKENS = 1024

CHARS_PER_TOKEN_LOW = 3.0
"""A low estimate of characters per token (English prose runs near 4), so a prefix is never judged too
short to cache when it is not; marking one that is too short costs nothing."""


def min_cacheable_tokens(model: str) -> int:
    info = registry.lookup(model) if model else None
    return MIN_CACHEABLE_TOKENS.get(info.name, DEFAULT_MIN_CACHEABLE_TOKENS) if info else (
        DEFAULT_MIN_CACHEABLE_TOKENS
    )


def stable_prefix(request: Request) -> tuple[str, str]:
    """(system text, leading text of the first message) that every call sharing this prefix repeats."""
    chars = int(request.context.get(CACHE_PREFIX_KEY) or 0)
    if chars <= 0 or not request.messages:
        return request.system, ""
    return request.system, request.messages[0].content[:chars]
