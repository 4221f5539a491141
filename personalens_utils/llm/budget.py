"""Cost control: what a run will cost before it starts, and the error a spending limit raises.

An estimate counts calls and tokens from the prompts a run would send (rendered with the kit's own
templates) and prices them with the registry's table, so a researcher sees the bill before paying
it. Tokens are counted with the kit's rough rule (words x 4/3, `llm.offline.count_tokens`), not a
model tokenizer; every estimate lists the assumptions it rests on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from . import registry
from .offline import count_tokens
from .types import LLMError, Request, Usage

TOKEN_RULE = "tokens counted as whitespace words x 4/3 (no model tokenizer), typically within 20% for English"
COLUMNS = ["stage", "kind", "backend", "model", "calls", "input_tokens", "output_tokens", "cost_usd"]


class BudgetReachedError(LLMError):
    """A new call was refused because the spending limit was reached; calls already in flight finish."""


def request_tokens(request: Request) -> int:
    """Input tokens of a request by the kit's rough rule: system text plus every message."""
    return count_tokens(request.system) + sum(count_tokens(m.content) for m in request.messages)


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
class _Group:
    calls: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0


class Tally:
    """Adds expected calls and tokens per (stage, kind, backend, model); `estimate()` prices each group
    on its own backend (`backend` is the default one; a role on another backend names its own)."""

    def __init__(self, backend: str = "", *, batch: bool = False):
        self.backend = backend
        self.batch = batch
        self._groups: dict[tuple[str, str, str, str], _Group] = {}

    def add(self, stage: str, kind: str, model: str, *, calls: float, input_tokens: float,
            output_tokens: float, backend: str | None = None) -> None:
        key = (stage, kind, self.backend if backend is None else backend, model)
        group = self._groups.setdefault(key, _Group())
        group.calls += calls
        group.input_tokens += input_tokens
        group.output_tokens += output_tokens

    def add_requests(self, stage: str, requests: Iterable[Request], output_tokens: int,
                     weight: float = 1.0) -> None:
        """Each request counted `weight` times, with `output_tokens` assumed for its answer."""
        for request in requests:
            self.add(stage, str(request.kind), request.model, calls=weight,
                     input_tokens=weight * request_tokens(request),
                     output_tokens=weight * min(output_tokens, request.max_tokens))

    def _cost(self, backend: str, model: str, group: _Group) -> float:
        if backend == "offline":
            return 0.0
        called = registry.resolve(model, backend) if backend else model  # successor if retired
        cost = registry.cost_usd(called, Usage(round(group.input_tokens), round(group.output_tokens)),
                                 batch=self.batch)
        return math.nan if cost is None else cost

    def estimate(self, assumptions: Iterable[str]) -> CostEstimate:
        rows = [
            {"stage": stage, "kind": kind, "backend": backend, "model": model, "calls": round(g.calls),
             "input_tokens": round(g.input_tokens), "output_tokens": round(g.output_tokens),
             "cost_usd": self._cost(backend, model, g)}
            for (stage, kind, backend, model), g in sorted(self._groups.items())
        ]
        table = pd.DataFrame(rows, columns=COLUMNS)
        unpriced = sorted(set(table.loc[table["cost_usd"].isna(), "model"]))
        total = {"stage": "total", "kind": "", "backend": "", "model": "",
                 **table[["calls", "input_tokens", "output_tokens"]].sum().to_dict(),
                 "cost_usd": math.nan if unpriced else float(table["cost_usd"].sum())}
        table = pd.concat([table, pd.DataFrame([total])], ignore_index=True) if rows else table
        notes = [TOKEN_RULE, *assumptions]
        used = {row["backend"] for row in rows} or {self.backend}
        if used == {"offline"}:
            notes.append("offline backend: no money is spent; the counts show what a priced model would need")
        elif unpriced:
            notes.append(f"no price known for {unpriced} (self-hosted?): their cost and the total are NaN")
        else:
            discount = ", batch discount applied" if self.batch else ""
            notes.append(f"list prices of {registry.PRICES_TAKEN}{discount}; prompt caching not counted "
                         "(it only lowers the cost)")
        if "offline" in used and len(used) > 1:
            notes.append("calls on the offline backend cost nothing")
        counts = {"calls": "int64", "input_tokens": "int64", "output_tokens": "int64"}
        return CostEstimate(table.astype(counts), notes)
