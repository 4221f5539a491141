"""Running many dialogues into a run store: concurrent, resumable, and safe to interrupt.

Each finished dialogue is appended to `dialogues.jsonl` the moment it ends, so a killed run loses
only the dialogues in flight; a rerun plans again from the store and skips every stored dialogue.
Dialogues stored with status "error" are redone only when asked (`retry_errors=True`).
`shard="i/n"` runs one machine's share of the dialogues; `max_cost_usd` stops new calls once that
much is spent, stores nothing for the dialogues it cut short, and leaves them for the next run.
`estimate_simulation` shows the calls, tokens and cost of a run before it starts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from personalens_utils.data import MD, SD, Benchmark
from personalens_utils.llm import CallKind
from personalens_utils.llm.budget import CostEstimate, Tally, request_tokens
from personalens_utils.shards import Shard
from personalens_utils.store import ERROR_STATUS, RunStore

from .loop import TURN_CAPS, dialogue_id, simulate_dialogue
from .prompting import ScenarioContext, assistant_request, user_request
from .settings import AssistantSetting

DIALOGUES = "dialogues"
STAGE = "simulation"
DEFAULT_MODEL = "Claude 3 Sonnet"
"""The paper's user agent and main assistant (Claude 3 Sonnet)."""

PAPER_TURNS = {SD: 4.74, MD: 5.64}
"""Average turns per dialogue in the paper's Table 13 (Claude 3 Sonnet as assistant)."""
PAPER_TOKENS_PER_TURN = {SD: 149.87, MD: 149.32}
"""Average tokens per turn (user message + assistant reply) in the paper's Table 13."""
USER_SHARE = 1 / 3
"""Assumed share of the user's message in a turn's tokens (the paper does not split them)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedDialogue:
    id: str
    ctx: ScenarioContext
    setting: AssistantSetting


@dataclass
class SimulationSummary:
    """What one call of `run_simulation` did."""

    planned: int
    skipped: int
    statuses: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    first_errors: list[str] = field(default_factory=list)
    shard: str | None = None
    max_cost_usd: float | None = None
    left_by_budget: int = 0
    """Planned dialogues not stored because the spending limit was reached (not started, or cut short)."""

    @property
    def ran(self) -> int:
        return sum(self.statuses.values())

    @property
    def budget_reached(self) -> bool:
        return self.left_by_budget > 0

    @property
    def status(self) -> str:
        """"complete", or "budget reached" when dialogues were left for a run with a higher limit."""
        return "budget reached" if self.budget_reached else "complete"

    def message(self) -> str:
        if not self.budget_reached:
            return f"complete: {self.ran} dialogues run, {self.skipped} already stored"
        return (f"budget reached: max_cost_usd={self.max_cost_usd} spent (${self.cost_usd:.4f} in stored "
                f"dialogues); {self.ran} dialogues stored, {self.left_by_budget} left for a later run. "
                "Run again with a higher max_cost_usd to continue; stored dialogues are not redone.")

    def frame(self) -> pd.DataFrame:
        row = {"status": self.status, "shard": self.shard or "all", "planned": self.planned,
               "skipped (already stored)": self.skipped, "ran": self.ran,
               **{f"status: {k}": v for k, v in sorted(self.statuses.items())},
               "left by budget": self.left_by_budget, "retries": self.retries, "cost_usd": self.cost_usd,
               "elapsed_s": round(self.elapsed_s, 2)}
        return pd.DataFrame([row])


def _store(run: RunStore | str | os.PathLike[str]) -> RunStore:
    return run if isinstance(run, RunStore) else RunStore(run)


def plan_dialogues(
    benchmark: Benchmark,
    store: RunStore,
    *,
    settings: Sequence[str | AssistantSetting] = ("base",),
    task_types: Sequence[str] = (SD, MD),
    user_model: str = DEFAULT_MODEL,
    assistant_model: str = DEFAULT_MODEL,
    retry_errors: bool = False,
    shard: str | Shard | None = None,
) -> tuple[list[PlannedDialogue], int]:
    """The dialogues still to run (scenario x setting, in benchmark order) and how many were skipped.

    With `shard="i/n"` only that shard's dialogues are planned (and counted as skipped).
    """
    part = Shard.parse(shard)
    unknown = sorted(set(task_types) - {SD, MD})
    if unknown:
        raise ValueError(f"unknown task type(s) {unknown}; use 'SD' and/or 'MD'")
    parsed = list(dict.fromkeys(AssistantSetting.parse(s) for s in settings))
    if not parsed:
        raise ValueError("settings is empty: give at least one assistant setting, e.g. ['base']")
    done = store.ids(DIALOGUES, include_errors=not retry_errors)
    todo: list[PlannedDialogue] = []
    skipped = 0
    for scenario in benchmark.iter_scenarios(task_types):
        ctx = ScenarioContext.of(scenario, benchmark.user(scenario.user_id))
        for setting in parsed:
            did = dialogue_id(scenario.scenario_id, user_model, assistant_model, setting.name)
            if part is not None and not part.owns(did):
                continue
            if did in done:
                skipped += 1
            else:
                todo.append(PlannedDialogue(did, ctx, setting))
    return todo, skipped


def _items(client: Any, store: RunStore, todo: Iterable[PlannedDialogue], summary: SimulationSummary,
           user_model: str, assistant_model: str, max_turns: int | None) -> list[Any]:
    async def run_one(item: PlannedDialogue) -> str:
        if client.budget_reached:
            summary.left_by_budget += 1
            return "budget"
        log.debug("dialogue start %s %s %s", item.id, item.ctx.scenario.scenario_id, item.setting.name)
        record = await simulate_dialogue(client, item.ctx, item.setting, user_model=user_model,
                                         assistant_model=assistant_model, max_turns=max_turns)
        if record["status"] == ERROR_STATUS and client.budget_reached:
            summary.left_by_budget += 1  # cut short by the limit (its answers stay in the response cache)
            log.debug("dialogue left %s budget reached", item.id)
            return "budget"
        await asyncio.to_thread(store.append, DIALOGUES, record)
        summary.statuses[record["status"]] += 1
        summary.retries += record["retries"]
        summary.cost_usd += record["cost_usd"]
        if record["status"] == ERROR_STATUS and len(summary.first_errors) < 5:
            summary.first_errors.append(f"{record['scenario_id']}: {record['error']}")
        log.debug("dialogue end %s %s", item.id, record["status"])
        return record["status"]

    return [lambda item=item: run_one(item) for item in todo]


def _prepare(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: Any, *,
             settings: Sequence[str | AssistantSetting] = ("base",), task_types: Sequence[str] = (SD, MD),
             user_model: str = DEFAULT_MODEL, assistant_model: str = DEFAULT_MODEL,
             retry_errors: bool = False, max_turns: int | None = None,
             limit: int | None = None, shard: str | Shard | None = None,
             max_cost_usd: float | None = None) -> tuple[SimulationSummary, list[Any]]:
    store = _store(run)
    todo, skipped = plan_dialogues(benchmark, store, settings=settings, task_types=task_types,
                                   user_model=user_model, assistant_model=assistant_model,
                                   retry_errors=retry_errors, shard=shard)
    todo = todo[:limit] if limit is not None else todo
    summary = SimulationSummary(planned=len(todo), skipped=skipped, shard=str(shard) if shard else None,
                                max_cost_usd=max_cost_usd)
    return summary, _items(client, store, todo, summary, user_model, assistant_model, max_turns)


def _pool_size(client: Any) -> int:
    """Dialogues in progress at once: a dialogue makes one call at a time, so twice the call bound keeps
    every slot busy (also while some dialogues wait out a retry) without spreading the calls over more
    dialogues than needed; fewer dialogues in flight means less lost to a kill or cut by a budget."""
    return 2 * client.max_concurrency


def _finish(summary: SimulationSummary, start: float) -> SimulationSummary:
    summary.elapsed_s = time.perf_counter() - start
    if summary.budget_reached:
        log.warning("simulation %s", summary.message())
    return summary


async def arun_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: Any,
                          **options: Any) -> SimulationSummary:
    """Simulate every planned dialogue through `client` (an `LLMClient`) into the run store.

    Options: `settings` (assistant settings, default ["base"]), `task_types`, `user_model`,
    `assistant_model`, `retry_errors`, `max_turns` (overrides the 20/30 caps), `limit` (run at
    most that many of the planned dialogues; the rest stay for a later call), `shard` ("i/n": this
    machine's share) and `max_cost_usd` (stop new calls once this much is spent in this call; the
    summary's `status` is then "budget reached" and a rerun continues where it stopped).
    """
    start = time.perf_counter()
    summary, items = _prepare(benchmark, run, client, **options)
    with client.spending_limit(summary.max_cost_usd):
        await client.arun_all(items, desc="dialogues", stage=STAGE, pool_size=_pool_size(client))
    return _finish(summary, start)


def run_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: Any,
                   **options: Any) -> SimulationSummary:
    """Blocking `arun_simulation` (works in scripts and in notebooks with a running event loop)."""
    start = time.perf_counter()
    summary, items = _prepare(benchmark, run, client, **options)
    with client.spending_limit(summary.max_cost_usd):
        client.run_all(items, desc="dialogues", stage=STAGE, pool_size=_pool_size(client))
    return _finish(summary, start)


def estimate_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], *,
                        backend: str = "", sample: int = 200, **options: Any) -> CostEstimate:
    """Calls, tokens and cost of the dialogues a `run_simulation` call with these options would run.

    Only dialogues not yet stored count (so it also prices the rest of an interrupted run). Turns per
    dialogue and tokens per turn are the paper's Table 13 averages (`PAPER_TURNS`,
    `PAPER_TOKENS_PER_TURN`), capped by `max_turns`; the fixed part of each prompt (instructions,
    profile, assistant context) is rendered for up to `sample` dialogues per task type and setting
    and scaled up. `backend` prices the calls ("offline": nothing is spent).
    """
    max_turns = options.pop("max_turns", None)
    limit = options.pop("limit", None)
    options.pop("max_cost_usd", None)
    user_model = options.get("user_model", DEFAULT_MODEL)
    assistant_model = options.get("assistant_model", DEFAULT_MODEL)
    todo, _ = plan_dialogues(benchmark, _store(run), **options)
    todo = todo[:limit] if limit is not None else todo
    groups: dict[tuple[str, str], list[PlannedDialogue]] = {}
    for item in todo:
        groups.setdefault((item.ctx.scenario.task_type, item.setting.name), []).append(item)
    tally = Tally(backend)
    for (task_type, _setting), items in groups.items():
        turns = min(PAPER_TURNS[task_type], max_turns or TURN_CAPS[task_type])
        per_turn = PAPER_TOKENS_PER_TURN[task_type]
        user_out = per_turn * USER_SHARE
        step = max(1, len(items) // sample)
        picked = items[::step]
        opening = next_turn = system = 0.0
        for item in picked:
            opening += request_tokens(user_request(item.ctx, [], user_model))
            next_turn += request_tokens(user_request(item.ctx, _EMPTY_TURN, user_model))
            system += request_tokens(assistant_request(item.setting, item.ctx, [], assistant_model))
        n, scale = len(items), len(items) / len(picked)
        history = per_turn * turns * (turns - 1) / 2  # both parties' earlier turns, summed over the turns
        tally.add(STAGE, str(CallKind.USER_TURN), user_model, calls=n * turns,
                  input_tokens=scale * (opening + (turns - 1) * next_turn) + n * history,
                  output_tokens=n * turns * user_out)
        tally.add(STAGE, str(CallKind.ASSISTANT_TURN), assistant_model, calls=n * turns,
                  input_tokens=scale * turns * system + n * (history + turns * user_out),
                  output_tokens=n * turns * (per_turn - user_out))
    counts = ", ".join(f"{kind} {setting}: {len(items)}" for (kind, setting), items in groups.items())
    return tally.estimate([
        f"{len(todo)} dialogues still to run ({counts or 'none'})",
        f"turns per dialogue from the paper's Table 13: SD {PAPER_TURNS[SD]}, MD {PAPER_TURNS[MD]}"
        + (f", capped at max_turns={max_turns}" if max_turns else ""),
        f"tokens per turn from Table 13: SD {PAPER_TOKENS_PER_TURN[SD]}, MD {PAPER_TOKENS_PER_TURN[MD]}; "
        f"the user's message taken as {USER_SHARE:.0%} of a turn",
        "every turn re-sends the dialogue so far to both the user agent and the assistant",
    ])


_EMPTY_TURN = ({"role": "user", "content": ""}, {"role": "assistant", "content": ""})


def dialogue_frame(run: RunStore | str | os.PathLike[str]) -> pd.DataFrame:
    """The stored dialogues, one row each (turns kept as lists)."""
    return _store(run).frame(DIALOGUES)
