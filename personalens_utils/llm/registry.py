"""Model names -> ids per backend, and the price table.

The paper names its models in prose ("Claude 3 Sonnet", Table 11); each backend wants its own id
("claude-3-sonnet-20240229" on the Anthropic API, "anthropic.claude-3-sonnet-20240229-v1:0" on
Bedrock, a Hugging Face id on a vLLM server). `resolve` turns any known spelling into the id for
the chosen backend; an id the registry does not know passes through unchanged, so new models work
without editing this file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .types import FatalError, Usage

PRICES_TAKEN = "2026-11-21"
"""The day the prices below were read from Anthropic's public pricing pages (USD per million tokens)."""

CACHE_WRITE_MULTIPLIER = 1.25
"""Anthropic bills a 5-minute prompt-cache write at 1.25x the base input price."""

CACHE_READ_MULTIPLIER = 0.10
"""...and a cache hit at 0.1x the base input price, unless a model's row says otherwise."""

BATCH_DISCOUNT = 0.50
"""The Message Batches API bills input and output at half price."""

KNOWN_BACKENDS = ("offline", "anthropic", "openai", "bedrock")


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage, *, batch: bool = False) -> float:
        read = self.input * CACHE_READ_MULTIPLIER if self.cache_read is None else self.cache_read
        write = self.input * CACHE_WRITE_MULTIPLIER if self.cache_write is None else self.cache_write
        total = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
        ) / 1e6
        return total * (BATCH_DISCOUNT if batch else 1.0)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model: its display name, other spellings, ids per backend, price and quirks.

    `temperature` is False for models that reject a sampling temperature (the backend then
    leaves it out rather than fail every call).
    """

    name: str
    ids: dict[str, str]
    aliases: tuple[str, ...] = ()
    price: Price | None = None
    temperature: bool = True
    notes: str = ""
    extra_ids: tuple[str, ...] = ()


def _claude(name: str, api_id: str, bedrock: str | None, price: Price, *aliases: str, **kw) -> ModelInfo:
    ids = {"anthropic": api_id, "openai": api_id, "offline": api_id}
    if bedrock:
        ids["bedrock"] = bedrock
    return ModelInfo(name=name, ids=ids, aliases=aliases, price=price, **kw)


def _open(name: str, hf_id: str, bedrock_id: str, *aliases: str) -> ModelInfo:
    """An open-weights model: served by an OpenAI-compatible server (vLLM takes the HF id)."""
    return ModelInfo(
        name=name,
        ids={"openai": hf_id, "offline": hf_id},
        aliases=aliases,
        extra_ids=(bedrock_id,),
        notes="self-hosted: no price (cost counted as 0); Ollama or llama.cpp users pass their own tag",
    )


_HAIKU3 = Price(0.25, 1.25, cache_read=0.03, cache_write=0.30)
_HAIKU35 = Price(0.80, 4.00)
_SONNET = Price(3.0, 15.0)
_OPUS_OLD = Price(15.0, 75.0)
_OPUS_NEW = Price(5.0, 25.0)
_HAIKU45 = Price(1.0, 5.0)

MODELS: tuple[ModelInfo, ...] = (
    # The paper's models (Table 11).
    _claude("Claude 3 Haiku", "claude-3-haiku-20240307", "anthropic.claude-3-haiku-20240307-v1:0", _HAIKU3),
    _claude(
        "Claude 3.5 Haiku",
        "claude-3-5-haiku-20241022",
        "anthropic.claude-3-5-haiku-20241022-v1:0",
        _HAIKU35,
        "claude-3-5-haiku-latest",
    ),
    _claude(
        "Claude 3 Sonnet",
        "claude-3-sonnet-20240229",
        "anthropic.claude-3-sonnet-20240229-v1:0",
        _SONNET,
        notes="retired on the Anthropic API; still listed on some Bedrock regions",
    ),
    _claude(
        "Claude 3.5 Sonnet",
        "claude-3-5-sonnet-20241022",
        "anthropic.claude-3-5-sonnet-20241022-v2:0",
        _SONNET,
        "claude-3-5-sonnet-latest",
    ),
    _open(
        "Llama 3.1 8B Instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta.llama3-1-8b-instruct-v1:0",
        "llama3-1-8b-instruct",
        "llama-3.1-8b",
    ),
    _open(
        "Llama 3.1 70B Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        "meta.llama3-1-70b-instruct-v1:0",
        "llama3-1-70b-instruct",
        "llama-3.1-70b",
    ),
    _open(
        "Mistral 7B Instruct",
        "mistralai/Mistral-7B-Instruct-v0.2",
        "mistral.mistral-7b-instruct-v0:2",
        "mistral-7b-instruct-v0.2",
        "mistral-7b",
    ),
    _open(
        "Mixtral 8x7B Instruct",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "mistral.mixtral-8x7b-instruct-v0:1",
        "mixtral-8x7b-instruct-v0.1",
        "mixtral-8x7b",
    ),
    # Later Claude models.
    _claude(
        "Claude 3.7 Sonnet",
        "claude-3-7-sonnet-20250219",
        "anthropic.claude-3-7-sonnet-20250219-v1:0",
        _SONNET,
        "claude-3-7-sonnet-latest",
    ),
    _claude(
        "Claude Sonnet 4",
        "claude-sonnet-4-20250514",
        "anthropic.claude-sonnet-4-20250514-v1:0",
        _SONNET,
        "claude-sonnet-4-0",
    ),
    _claude(
        "Claude Opus 4",
        "claude-opus-4-20250514",
        "anthropic.claude-opus-4-20250514-v1:0",
        _OPUS_OLD,
        "claude-opus-4-0",
        "claude-4-opus-20250514",
    ),
    _claude(
        "Claude Opus 4.1",
        "claude-opus-4-1-20250805",
        "anthropic.claude-opus-4-1-20250805-v1:0",
        _OPUS_OLD,
        "claude-opus-4-1",
    ),
    _claude(
        "Claude Sonnet 4.5",
        "claude-sonnet-4-5-20250929",
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        _SONNET,
        "claude-sonnet-4-5",
    ),
    _claude(
        "Claude Haiku 4.5",
        "claude-haiku-4-5-20251001",
        "anthropic.claude-haiku-4-5-20251001-v1:0",
        _HAIKU45,
        "claude-haiku-4-5",
    ),
    _claude(
        "Claude Opus 4.5",
        "claude-opus-4-5-20251101",
        "anthropic.claude-opus-4-5-20251101-v1:0",
        _OPUS_NEW,
        "claude-opus-4-5",
    ),
    _claude("Claude Sonnet 4.6", "claude-sonnet-4-6", None, _SONNET),
    _claude("Claude Opus 4.6", "claude-opus-4-6", None, _OPUS_NEW),
    _claude("Claude Opus 4.7", "claude-opus-4-7", None, _OPUS_NEW, temperature=False),
    _claude("Claude Opus 4.8", "claude-opus-4-8", None, _OPUS_NEW, temperature=False),
    _claude("Claude Sonnet 5", "claude-sonnet-5", None, Price(2.0, 10.0, cache_read=0.20), temperature=False),
    _claude(
        "Claude Sonnet 5.5", "claude-sonnet-5-5", None, Price(2.0, 10.0, cache_read=0.10), temperature=False
    ),
    _claude(
        "Claude Haiku 5.5",
        "claude-haiku-5-5",
        None,
        Price(0.10, 0.50, cache_read=0.01),
        temperature=False,
        notes="price is the tier for prompts up to 100k tokens",
    ),
    _claude("Claude Opus 5", "claude-opus-5", None, _OPUS_NEW, temperature=False),
    _claude("Claude Opus 5.5", "claude-opus-5-5", None, Price(4.0, 20.0), temperature=False),
)


def normalise(name: str) -> str:
    """One spelling for a name: lower case, runs of spaces, dots and underscores become '-'."""
    return re.sub(r"[\s._]+", "-", name.strip().lower())


def _index() -> dict[str, ModelInfo]:
    index: dict[str, ModelInfo] = {}
    for info in MODELS:
        for spelling in (info.name, *info.aliases, *info.ids.values(), *info.extra_ids):
            index.setdefault(normalise(spelling), info)
            index.setdefault(spelling, info)
    return index


_INDEX = _index()


def lookup(model: str) -> ModelInfo | None:
    """The registry entry for any known spelling or id of a model, else None."""
    return _INDEX.get(model) or _INDEX.get(normalise(model))


def resolve(model: str, backend: str) -> str:
    """The id to send to `backend` for `model`; unknown ids pass through unchanged."""
    info = lookup(model) if model else None
    if info is None:
        return model
    if backend in info.ids:
        return info.ids[backend]
    if backend not in KNOWN_BACKENDS:
        return model
    raise FatalError(
        f"model {model!r} ({info.name}) has no id for the {backend!r} backend; "
        f"it is available on: {', '.join(sorted(info.ids))}. "
        "Serve open-weights models with vLLM/Ollama and use backend='openai', or pass a raw model id."
    )


def price_for(model: str) -> Price | None:
    info = lookup(model) if model else None
    return info.price if info else None


def honours_temperature(model: str) -> bool:
    """False for models known to reject a sampling temperature; unknown ids are assumed to take one."""
    info = lookup(model) if model else None
    return info.temperature if info else True


def cost_usd(model: str, usage: Usage, *, batch: bool = False) -> float | None:
    """What `usage` costs on `model` at list price, or None when the registry has no price for it."""
    price = price_for(model)
    return None if price is None else price.cost(usage, batch=batch)
