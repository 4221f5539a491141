"""Running many dialogues into a run store: concurrent, resumable, and safe to interrupt.

Each finished dialogue is appended to `dialogues.jsonl` the moment it ends, so a killed run loses
only the dialogues in flight; a rerun plans again from the store and skips every stored dialogue.
Dialogues stored with status "error" are redone only when asked (`retry_errors=True`).
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
from personalens_utils.store import ERROR_STATUS, RunStore

from .loop import dialogue_id, simulate_dialogue
from .prompting import ScenarioContext
from .settings import AssistantSetting

DIALOGUES = "dialogues"
STAGE = "simulation"
DEFAULT_MODEL = "Claude 3 Sonnet"
"""The paper's user agent and main assistant (Claude 3 Sonnet)."""

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

    @property
    def ran(self) -> int:
        return sum(self.statuses.values())

    def frame(self) -> pd.DataFrame:
        row = {"planned": self.planned, "skipped (already stored)": self.skipped, "ran": self.ran,
               **{f"status: {k}": v for k, v in sorted(self.statuses.items())},
               "retries": self.retries, "cost_usd": self.cost_usd, "elapsed_s": round(self.elapsed_s, 2)}
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
) -> tuple[list[PlannedDialogue], int]:
    """The dialogues still to run (scenario x setting, in benchmark order) and how many were skipped."""
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
            if did in done:
                skipped += 1
            else:
                todo.append(PlannedDialogue(did, ctx, setting))
    return todo, skipped


def _items(client: Any, store: RunStore, todo: Iterable[PlannedDialogue], summary: SimulationSummary,
           user_model: str, assistant_model: str, max_turns: int | None) -> list[Any]:
    async def run_one(item: PlannedDialogue) -> str:
        log.debug("dialogue start %s %s %s", item.id, item.ctx.scenario.scenario_id, item.setting.name)
        record = await simulate_dialogue(client, item.ctx, item.setting, user_model=user_model,
                                         assistant_model=assistant_model, max_turns=max_turns)
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
             limit: int | None = None) -> tuple[SimulationSummary, list[Any]]:
    store = _store(run)
    todo, skipped = plan_dialogues(benchmark, store, settings=settings, task_types=task_types,
                                   user_model=user_model, assistant_model=assistant_model,
                                   retry_errors=retry_errors)
    todo = todo[:limit] if limit is not None else todo
    summary = SimulationSummary(planned=len(todo), skipped=skipped)
    return summary, _items(client, store, todo, summary, user_model, assistant_model, max_turns)


async def arun_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: Any,
                          **options: Any) -> SimulationSummary:
    """Simulate every planned dialogue through `client` (an `LLMClient`) into the run store.

    Options: `settings` (assistant settings, default ["base"]), `task_types`, `user_model`,
    `assistant_model`, `retry_errors`, `max_turns` (overrides the 20/30 caps) and `limit` (run at
    most that many of the planned dialogues; the rest stay for a later call).
    """
    start = time.perf_counter()
    summary, items = _prepare(benchmark, run, client, **options)
    await client.arun_all(items, desc="dialogues", stage=STAGE)
    summary.elapsed_s = time.perf_counter() - start
    return summary


def run_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: Any,
                   **options: Any) -> SimulationSummary:
    """Blocking `arun_simulation` (works in scripts and in notebooks with a running event loop)."""
    start = time.perf_counter()
    summary, items = _prepare(benchmark, run, client, **options)
    client.run_all(items, desc="dialogues", stage=STAGE)
    summary.elapsed_s = time.perf_counter() - start
    return summary


def dialogue_frame(run: RunStore | str | os.PathLike[str]) -> pd.DataFrame:
    """The stored dialogues, one row each (turns kept as lists)."""
    return _store(run).frame(DIALOGUES)
