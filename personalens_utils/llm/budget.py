"""Cost control: what a run will cost before it starts, and the error a spending limit raises.

An estimate counts calls and tokens from the prompts a run would send (rendered with the kit's own
templates) and prices them with the registry's table, so a researcher sees the bill before paying
it. Tokens are counted with the kit's rough rule (words x 4/3, `llm.offline.count_tokens`), not a
model tokenizer; every estimate lists the assumptions it rests on.

Every estimate prices each row three ways, side by side: live, through a batch API, and through a
batch API with prompt caching (the cacheable stable prefix of each call counted as cache writes and
reads, priced as the provider bills them), so the choice between them is made before paying.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, fields

import pandas as pd

from personalens_utils.llm import registry
from personalens_utils.llm.offline import count_tokens
from personalens_utils.llm.prompt_cache import min_cacheable_tokens, stable_prefix
from personalens_utils.llm.types import LLMError, Request, Usage

TOKEN_RULE = "tokens counted as whitespace words x 4/3 (no model tokenizer), typically within 20% for English"
PRICE_COLUMNS = ["live_usd", "batch_usd", "batch_cached_usd"]
"""The three ways of paying, side by side: live, a batch API, a batch API with prompt caching."""
COUNTS = ["calls", "input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens"]
COLUMNS = ["stage", "kind", "backend", "model", *COUNTS, "cost_usd", *PRICE_COLUMNS]
CACHING_BACKENDS = {
    "anthropic": "cache_control breakpoint after the stable prefix; writes 1.25x, reads 0.1x the input price",
    "openai": "automatic prefix caching; cached input at the model's cached-input price, no write surcharge",
}
"""Backends whose provider caches a prompt's stable prefix, and how it is billed."""
CACHE_ASSUMPTION = (
    "prompt caching: each call's stable prefix (system prompt, and the profile head the prompt builder "
    "marks) is written once per dialogue (judge heads: once per distinct head) and read by every later call "
    "that repeats it, if it reaches the model's minimum cacheable length; entries assumed warm while reused "
    "(Anthropic keeps one 5 minutes after each use; in batches a hit is best effort, so batch_cached_usd is "
    "the optimistic end)"
)


class BudgetReachedError(LLMError):
    """A new call was refused because the spending limit was reached; calls already in flight finish."""


def request_tokens(request: Request) -> int:
    """Input tokens of a request by the kit's rough rule: system text plus every message."""
    return count_tokens(request.system) + sum(count_tokens(m.content) for m in request.messages)


def cacheable_prefix(request: Request, backend: str) -> tuple[str, int]:
    """(text, tokens) of the stable prefix a provider's cache would hold for `request`, or ("", 0) when
    the backend does not cache or the prefix, counted by the kit's token rule, is shorter than the model's
    minimum cacheable length (`prompt_cache.min_cacheable_tokens`; OpenAI's starts at 1,024 too)."""
    if backend not in CACHING_BACKENDS:
        return "", 0
    system, head = stable_prefix(request)
    tokens = count_tokens(system) + count_tokens(head)
    called = registry.resolve(request.model, backend) if request.model else ""  # successor if retired
    if tokens < min_cacheable_tokens(called):
        return "", 0
    return f"{system}\x00{head}", tokens


@dataclass
class CostEstimate:
    """Calls, tokens and cost a run would need, per (stage, call kind, model), with its assumptions.

    `table` ends with a total row. `cost_usd` is NaN for models without a price (self-hosted) and 0
    for the offline backend. Notebooks display the object (table and assumptions); scripts print it.
    """

    table: pd.DataFrame
    assumptions: list[str] = field(default_factory=list)

    @property
    def total_cost_usd(self) -> float:
        return float(self.table["cost_usd"].iloc[-1]) if len(self.table) else 0.0

    @property
    def calls(self) -> int:
        return int(self.table["calls"].iloc[-1]) if len(self.table) else 0

    def __str__(self) -> str:
        notes = "\n".join(f"- {a}" for a in self.assumptions)
        return f"{self.table.to_string(index=False)}\nAssumptions:\n{notes}"

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{a}</li>" for a in self.assumptions)
        return f"{self.table.to_html(index=False)}<p>Assumptions:</p><ul>{notes}</ul>"


@dataclass
class Volume:
    """Calls and tokens expected of a group of requests; `cache_write_tokens` and `cache_read_tokens` are
    the part of `input_tokens` a prompt cache would write and serve."""

    calls: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    cache_write_tokens: float = 0.0
    cache_read_tokens: float = 0.0


class Tally:
    """Adds expected calls and tokens per (stage, kind, backend, model); `estimate()` prices each group
    on its own backend (`backend` is the default one; a role on another backend names its own)."""

    def __init__(self, backend: str = "", *, batch: bool = False):
        self.backend = backend
        self.batch = batch
        self._groups: dict[tuple[str, str, str, str], Volume] = {}

    def add(self, stage: str, kind: str, model: str, volume: Volume, *, backend: str | None = None) -> None:
        """Count `volume` toward its (stage, kind, backend, model) group."""
        key = (stage, kind, self.backend if backend is None else backend, model)
        group = self._groups.setdefault(key, Volume())
        for name in fields(Volume):
            setattr(group, name.name, getattr(group, name.name) + getattr(volume, name.name))

    def add_requests(self, stage: str, requests: Iterable[Request], output_tokens: int,
                     weight: float = 1.0, seen: set[str] | None = None) -> None:
        """Each request counted `weight` times, with `output_tokens` assumed for its answer. A cacheable
        prefix not in `seen` yet is a cache write (and joins `seen`), one in it a cache read."""
        seen = set() if seen is None else seen
        for request in requests:
            prefix, cached = cacheable_prefix(request, self.backend)
            written = cached if prefix not in seen else 0
            seen.add(prefix)
            self.add(stage, str(request.kind), request.model, Volume(
                calls=weight, input_tokens=weight * request_tokens(request),
                output_tokens=weight * min(output_tokens, request.max_tokens),
                cache_write_tokens=weight * written, cache_read_tokens=weight * (cached - written)))

    def _costs(self, backend: str, model: str, group: Volume) -> dict[str, float]:
        """The group's cost live, in batches and in batches with caching; NaN each when unpriced."""
        if backend == "offline":
            return dict.fromkeys(PRICE_COLUMNS, 0.0)
        called = registry.resolve(model, backend) if backend else model  # successor if retired
        price = registry.price_for(called)
        if price is None:
            return dict.fromkeys(PRICE_COLUMNS, math.nan)
        full = Usage(round(group.input_tokens), round(group.output_tokens))
        written, read = round(group.cache_write_tokens), round(group.cache_read_tokens)
        if backend != "anthropic":  # automatic caching: a first sighting is billed as plain input
            written = 0
        cached = Usage(full.input_tokens - written - read, full.output_tokens, read, written)
        return {"live_usd": price.cost(full), "batch_usd": price.cost(full, batch=True),
                "batch_cached_usd": price.cost(cached, batch=True)}

    def estimate(self, assumptions: Iterable[str]) -> CostEstimate:
        rows = []
        for (stage, kind, backend, model), g in sorted(self._groups.items()):
            costs = self._costs(backend, model, g)
            rows.append({"stage": stage, "kind": kind, "backend": backend, "model": model,
                         "calls": round(g.calls), "input_tokens": round(g.input_tokens),
                         "cache_write_tokens": round(g.cache_write_tokens),
                         "cache_read_tokens": round(g.cache_read_tokens),
                         "output_tokens": round(g.output_tokens),
                         "cost_usd": costs["batch_usd" if self.batch else "live_usd"], **costs})
        table = pd.DataFrame(rows, columns=COLUMNS)
        unpriced = sorted(set(table.loc[table["cost_usd"].isna(), "model"]))
        money = ["cost_usd", *PRICE_COLUMNS]
        total = {"stage": "total", "kind": "", "backend": "", "model": "",
                 **table[COUNTS].sum().to_dict(),
                 **{c: math.nan if unpriced else float(table[c].sum()) for c in money}}
        table = pd.concat([table, pd.DataFrame([total])], ignore_index=True) if rows else table
        notes = [TOKEN_RULE, *assumptions]
        used = {row["backend"] for row in rows} or {self.backend}
        if used == {"offline"}:
            notes.append("offline backend: no money is spent; the counts show what a priced model would need")
        elif unpriced:
            notes.append(f"no price known for {unpriced} (self-hosted?): their cost and the total are NaN")
        else:
            mode = "batch prices (50% off)" if self.batch else "live prices"
            notes.append(f"list prices of {registry.PRICES_TAKEN}; cost_usd at {mode}; live_usd, batch_usd "
                         "and batch_cached_usd price every row live, through a batch API (50% off) and "
                         "through a batch API with prompt caching")
            notes.append(CACHE_ASSUMPTION)
            notes.extend(f"{b}: {CACHING_BACKENDS[b]}" for b in sorted(used & set(CACHING_BACKENDS)))
            notes.extend(f"{b}: no prompt caching counted" for b in sorted(used - set(CACHING_BACKENDS)))
        if "offline" in used and len(used) > 1:
            notes.append("calls on the offline backend cost nothing")
        return CostEstimate(table.astype(dict.fromkeys(COUNTS, "int64")), notes)
