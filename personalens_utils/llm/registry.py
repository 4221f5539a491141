"""Model names -> ids per backend, and the price table.

The paper names its models in prose ("Claude 3 Sonnet", Table 11); each backend wants its own id
("claude-3-sonnet-20240229" on the Anthropic API, "anthropic.claude-3-sonnet-20240229-v1:0" on
Bedrock, a Hugging Face id on a vLLM server). `resolve` turns any known spelling into the id for
the chosen backend; an id the registry does not know passes through unchanged, so new models work
without editing this file. The official PersonaLens code names models by short names
("claude-3-sonnet-v1", "llama-3-1-8b-instruct-v1"); each model carries its short name, which resolves
like any other spelling, so an imported official folder is the same model as the paper's prose name.

Bedrock ids are the ones on-demand Bedrock accepts: for several models (Claude 3.5 Haiku and later,
Llama 3.1/3.2/3.3) that is a cross-Region inference profile ("us." prefix), since their bare model id
answers "on-demand throughput isn't supported"; the bare id is kept as another spelling. A profile of
another geography ("eu.", "apac.", ...) resolves to the same model and is called as given.

Some of the paper's models no longer answer on a platform (retired on the Anthropic API, end of
life on Bedrock). `resolve_model` then names the model's successor and says why in one line, and
`resolve` (what the client calls) returns the successor's id, so a run asking for a paper model
still works and the notebooks can print what will really be called. The offline backend never
substitutes: its names stay the paper's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from personalens_utils.llm.types import FatalError, Usage

PRICES_TAKEN = "2026-11-21"
LIFECYCLE_TAKEN = "2026-11-23"
"""The day the retirement dates below were checked (Anthropic's model-deprecations page, AWS Bedrock's
model-lifecycle page and their release notes)."""
"""The day the prices below were read from Anthropic's public pricing pages (USD per million tokens)."""

CACHE_WRITE_MULTIPLIER = 1.25
"""Anthropic bills a 5-minute prompt-cache write at 1.25x the base input price."""

CACHE_READ_MULTIPLIER = 0.10
"""...and a cache hit at 0.1x the base input price, unless a model's row says otherwise."""

BATCH_DISCOUNT = 0.50
"""The Message Batches API bills input and output at half price."""

KNOWN_BACKENDS = ("offline", "anthropic", "openai", "bedrock")
PLATFORMS = {
    "anthropic": "the Anthropic API",
    "openai": "the Anthropic API (its OpenAI-compatible endpoint)",
    "bedrock": "Amazon Bedrock",
}
"""Where a backend's Claude calls land, for retirement messages."""


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
    retired: dict[str, str] = field(default_factory=dict)
    """Backend -> the date the model stopped answering there."""
    successor: str = ""
    """The registry name called instead where the model is retired."""
    paper_roles: tuple[str, ...] = ()
    """Its roles in the paper (Table 11); empty for models the paper did not use."""
    paper_version: str = ""
    """How Table 11 of the paper spells its version."""
    official_name: str = ""
    """The short name the official PersonaLens code uses for it (its output folders, `-m` flags)."""


def _claude(
    name: str,
    api_id: str,
    bedrock: str | None,
    price: Price,
    *aliases: str,
    api_retired: str = "",
    bedrock_retired: str = "",
    **kw,
) -> ModelInfo:
    """A Claude model; `api_retired` is the date it left the Anthropic API (and its OpenAI-compatible
    endpoint), `bedrock_retired` the date it reached end of life on Bedrock."""
    ids = {"anthropic": api_id, "openai": api_id, "offline": api_id}
    if bedrock:
        ids["bedrock"] = bedrock
        kw["extra_ids"] = (*kw.get("extra_ids", ()), *_other_bedrock_spellings(bedrock))
    retired = dict.fromkeys(("anthropic", "openai"), api_retired) if api_retired else {}
    if bedrock_retired:
        retired["bedrock"] = bedrock_retired
    version = api_id if kw.get("paper_roles") else ""
    return ModelInfo(
        name=name, ids=ids, aliases=aliases, price=price, retired=retired, paper_version=version, **kw
    )


def _other_bedrock_spellings(bedrock_id: str) -> tuple[str, ...]:
    """The bare model id behind a "us." inference profile, and the US profile of a bare id."""
    bare = bedrock_id.removeprefix("us.")
    return (bare,) if bare != bedrock_id else (f"us.{bedrock_id}",)


def _open(
    name: str,
    hf_id: str,
    bedrock_id: str,
    version: str,
    *aliases: str,
    official_name: str,
    paper: bool = True,
) -> ModelInfo:
    """A model with open weights: on Bedrock (its id there, often a "us." inference profile) or any
    OpenAI-compatible server (vLLM takes the Hugging Face id). `paper`: one of the paper's assistants."""
    return ModelInfo(
        name=name,
        ids={"openai": hf_id, "offline": hf_id, "bedrock": bedrock_id},
        aliases=(version, *aliases),
        paper_version=version if paper else "",
        extra_ids=_other_bedrock_spellings(bedrock_id),
        notes="no price recorded (cost counted as 0): self-hosted, or Bedrock's per-token price not in the "
        "registry; Ollama or llama.cpp users pass their own tag",
        paper_roles=("assistant",) if paper else (),
        official_name=official_name,
    )


_HAIKU3 = Price(0.25, 1.25, cache_read=0.03, cache_write=0.30)
_HAIKU35 = Price(0.80, 4.00)
_SONNET = Price(3.0, 15.0)
_OPUS_OLD = Price(15.0, 75.0)
_OPUS_NEW = Price(5.0, 25.0)
_HAIKU45 = Price(1.0, 5.0)

_SONNET_NOW = "Claude Sonnet 4.5"
_HAIKU_NOW = "Claude Haiku 4.5"
_OPUS_NOW = "Claude Opus 4.5"

MODELS: tuple[ModelInfo, ...] = (
    # The paper's models (Table 11), with the official code's short names.
    _claude(
        "Claude 3 Haiku",
        "claude-3-haiku-20240307",
        "anthropic.claude-3-haiku-20240307-v1:0",
        _HAIKU3,
        api_retired="2026-04-20",
        successor=_HAIKU_NOW,
        paper_roles=("assistant",),
        official_name="claude-3-haiku-v1",
    ),
    _claude(
        "Claude 3.5 Haiku",
        "claude-3-5-haiku-20241022",
        "us.anthropic.claude-3-5-haiku-20241022-v1:0",
        _HAIKU35,
        "claude-3-5-haiku-latest",
        api_retired="2026-02-19",
        successor=_HAIKU_NOW,
        paper_roles=("assistant",),
        official_name="claude-3-5-haiku-v1",
    ),
    _claude(
        "Claude 3 Sonnet",
        "claude-3-sonnet-20240229",
        "anthropic.claude-3-sonnet-20240229-v1:0",
        _SONNET,
        api_retired="2025-07-21",
        bedrock_retired="2025-07-21",
        successor=_SONNET_NOW,
        paper_roles=("user agent", "assistant"),
        official_name="claude-3-sonnet-v1",
    ),
    _claude(
        "Claude 3.5 Sonnet",
        "claude-3-5-sonnet-20241022",
        "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
        _SONNET,
        "claude-3-5-sonnet-latest",
        api_retired="2025-10-22",
        bedrock_retired="2026-03-01",
        successor=_SONNET_NOW,
        paper_roles=("judge",),
        official_name="claude-3-5-sonnet-v2",
    ),
    _open(
        "Llama 3.1 8B Instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
        "us.meta.llama3-1-8b-instruct-v1:0",
        "llama3-1-8b-instruct",
        "llama-3.1-8b",
        official_name="llama-3-1-8b-instruct-v1",
    ),
    _open(
        "Llama 3.1 70B Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        "us.meta.llama3-1-70b-instruct-v1:0",
        "llama3-1-70b-instruct",
        "llama-3.1-70b",
        official_name="llama-3-1-70b-instruct-v1",
    ),
    _open(
        "Mistral 7B Instruct",
        "mistralai/Mistral-7B-Instruct-v0.2",
        "mistral.mistral-7b-instruct-v0:2",
        "mistral-7b-instruct-v0.2",
        "mistral-7b",
        official_name="mistral-7b-instruct-v2",
    ),
    _open(
        "Mixtral 8x7B Instruct",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "mistral.mixtral-8x7b-instruct-v0:1",
        "mixtral-8x7b-instruct-v0.1",
        "mixtral-8x7b",
        official_name="mixtral-8x7b-instruct-v1",
    ),
    # Models the official code also names, which the paper did not report.
    _claude(
        "Claude 3.5 Sonnet (June 2024)",
        "claude-3-5-sonnet-20240620",
        "anthropic.claude-3-5-sonnet-20240620-v1:0",
        _SONNET,
        api_retired="2025-10-22",
        successor=_SONNET_NOW,
        official_name="claude-3-5-sonnet-v1",
    ),
    _claude(
        "Claude 3 Opus",
        "claude-3-opus-20240229",
        "us.anthropic.claude-3-opus-20240229-v1:0",
        _OPUS_OLD,
        "claude-3-opus-latest",
        api_retired="2026-01-05",
        successor=_OPUS_NOW,
        official_name="claude-3-opus-v1",
    ),
    _open(
        "Llama 3 70B Instruct",
        "meta-llama/Meta-Llama-3-70B-Instruct",
        "meta.llama3-70b-instruct-v1:0",
        "llama3-70b-instruct",
        official_name="llama-3-70b-instruct-v1",
        paper=False,
    ),
    _open(
        "Llama 3.2 90B Instruct",
        "meta-llama/Llama-3.2-90B-Vision-Instruct",
        "us.meta.llama3-2-90b-instruct-v1:0",
        "llama3-2-90b-instruct",
        official_name="llama-3-2-90b-instruct-v1",
        paper=False,
    ),
    _open(
        "Llama 3.3 70B Instruct",
        "meta-llama/Llama-3.3-70B-Instruct",
        "us.meta.llama3-3-70b-instruct-v1:0",
        "llama3-3-70b-instruct",
        official_name="llama-3-3-70b-instruct-v1",
        paper=False,
    ),
    # Later Claude models (on Bedrock through their US inference profiles).
    _claude(
        "Claude 3.7 Sonnet",
        "claude-3-7-sonnet-20250219",
        "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        _SONNET,
        "claude-3-7-sonnet-latest",
        api_retired="2026-02-19",
        bedrock_retired="2026-04-28",
        successor=_SONNET_NOW,
        official_name="claude-3-7-sonnet-v1",
    ),
    _claude(
        "Claude Sonnet 4",
        "claude-sonnet-4-20250514",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        _SONNET,
        "claude-sonnet-4-0",
        api_retired="2026-06-15",
        successor=_SONNET_NOW,
    ),
    _claude(
        "Claude Opus 4",
        "claude-opus-4-20250514",
        "us.anthropic.claude-opus-4-20250514-v1:0",
        _OPUS_OLD,
        "claude-opus-4-0",
        "claude-4-opus-20250514",
        api_retired="2026-06-15",
        successor=_OPUS_NOW,
    ),
    _claude(
        "Claude Opus 4.1",
        "claude-opus-4-1-20250805",
        "us.anthropic.claude-opus-4-1-20250805-v1:0",
        _OPUS_OLD,
        "claude-opus-4-1",
        api_retired="2026-08-05",
        successor=_OPUS_NOW,
    ),
    _claude(
        "Claude Sonnet 4.5",
        "claude-sonnet-4-5-20250929",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        _SONNET,
        "claude-sonnet-4-5",
    ),
    _claude(
        "Claude Haiku 4.5",
        "claude-haiku-4-5-20251001",
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        _HAIKU45,
        "claude-haiku-4-5",
    ),
    _claude(
        "Claude Opus 4.5",
        "claude-opus-4-5-20251101",
        "us.anthropic.claude-opus-4-5-20251101-v1:0",
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
        official = (info.official_name,) if info.official_name else ()
        for spelling in (info.name, *info.aliases, *info.ids.values(), *info.extra_ids, *official):
            index.setdefault(normalise(spelling), info)
            index.setdefault(spelling, info)
    return index


_INDEX = _index()


_GEOGRAPHY = re.compile(r"^(?:us|eu|apac|jp|au|ca|us-gov|global)\.(?=[a-z]+\.)")
"""The geography prefix of a Bedrock cross-Region inference profile id ("us.", "eu.", ...)."""


def lookup(model: str) -> ModelInfo | None:
    """The registry entry for any known spelling or id of a model, else None.

    A Bedrock inference profile of any geography ("eu.meta.llama3-1-8b-instruct-v1:0") finds the model
    of its bare id."""
    found = _INDEX.get(model) or _INDEX.get(normalise(model))
    if found is None and _GEOGRAPHY.match(model):
        return lookup(_GEOGRAPHY.sub("", model, count=1))
    return found


def is_inference_profile(model_id: str) -> bool:
    """True for a Bedrock cross-Region inference profile id, e.g. "us.meta.llama3-1-8b-instruct-v1:0"."""
    return bool(_GEOGRAPHY.match(model_id))


def _is_bedrock_id(model: str) -> bool:
    """A Bedrock model id or profile ("provider.model...") given as such: called as written, so a user
    may pick the bare id or another geography's profile where the registry's does not fit."""
    return bool(re.match(r"[a-z0-9]+\.[a-z]", _GEOGRAPHY.sub("", model, count=1)))


def official_name(model: str) -> str | None:
    """The official PersonaLens code's short name for a model ("Claude 3 Sonnet" -> "claude-3-sonnet-v1")."""
    info = lookup(model) if model else None
    return info.official_name or None if info else None


def same_model(a: str, b: str) -> bool:
    """Whether two spellings (prose name, short name, any backend's id) name one registry model."""
    first = lookup(a) if a else None
    return first is not None and first is lookup(b)


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a role's model name becomes on a backend: the id that will be called and, when the
    model asked for is retired there, the successor called instead and why."""

    requested: str
    backend: str
    model_id: str
    name: str | None = None
    successor: str | None = None
    reason: str = ""

    def describe(self, role: str) -> str:
        """One line for a notebook: the role, the backend, the id called, and any substitution."""
        line = f"{role}: {self.backend}:{self.model_id}"
        if self.name and self.name != self.model_id:
            line += f" ({self.successor or self.name})"
        return f"{line} - {self.reason}" if self.reason else line


def _known_names() -> str:
    return ", ".join(info.name for info in MODELS)


def _id_on(info: ModelInfo, model: str, backend: str) -> str:
    if backend in info.ids:
        return info.ids[backend]
    if backend not in KNOWN_BACKENDS:
        return model
    raise FatalError(
        f"model {model!r} ({info.name}) has no id for the {backend!r} backend; "
        f"it is available on: {', '.join(sorted(info.ids))}. "
        "Serve open-weights models with vLLM/Ollama and use backend='openai', or pass a raw model id."
    )


def resolve_model(model: str, backend: str) -> Resolution:
    """The id `backend` will be called with for `model`, with the successor used if it is retired there.

    A raw id the registry does not know passes through unchanged (new models, local tags); a prose
    name it does not know (one with a space, such as "Claude 3 Sonet") is an error listing the
    known names, since no backend would accept it. The offline backend never substitutes.
    """
    info = lookup(model) if model else None
    if info is None:
        if " " in model.strip():
            raise FatalError(f"unknown model name {model!r}; the registry knows: {_known_names()}")
        return Resolution(model, backend, model)
    retired = info.retired.get(backend) if backend != "offline" else None
    if not retired:
        if backend == "bedrock" and _is_bedrock_id(model):
            return Resolution(model, backend, model, info.name)
        return Resolution(model, backend, _id_on(info, model, backend), info.name)
    successor = lookup(info.successor)
    if successor is None:
        raise FatalError(f"{info.name} was retired on {backend} on {retired} and has no successor listed")
    where = PLATFORMS.get(backend, backend)
    reason = (
        f"{info.name} was retired on {where} on {retired} (checked {LIFECYCLE_TAKEN}); "
        f"calling its successor {successor.name} instead"
    )
    return Resolution(model, backend, _id_on(successor, model, backend), info.name, successor.name, reason)


def resolve(model: str, backend: str) -> str:
    """The id to send to `backend` for `model` (a retired model's successor); unknown ids pass through."""
    return resolve_model(model, backend).model_id


def role_lines(roles: dict[str, str], backend: str) -> list[str]:
    """One line per role (e.g. {"user agent": "Claude 3 Sonnet"}) naming what will be called on `backend`."""
    return [resolve_model(model, backend).describe(role) for role, model in roles.items()]


CALLS = " -> "
"""Separates the own id of an assistant that calls a model of its own from that model's backend:id, in
its model id (`<own id> -> backend:id`)."""


def called_backend(model_id: str) -> str | None:
    """The backend a model id of that form says its model runs on, or None when it names none."""
    _, sep, called = model_id.rpartition(CALLS)
    return called.partition(":")[0] if sep else None


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
