"""Running many dialogues into a run store: concurrent, resumable, and safe to interrupt.

Each finished dialogue is appended to `dialogues.jsonl` the moment it ends, so a killed run loses
only the dialogues in flight; a rerun plans again from the store and skips every stored dialogue.
Dialogues stored with status "error" are redone only when asked (`retry_errors=True`).
A dialogue is keyed by its run identity (`records.Dialogue`): the same scenarios simulated on
another backend or model id are new dialogues, so an offline run is never reused for a real model.
A dialogue stored before run identity counts as done when it was made on the backend asked for.
`shard="i/n"` runs one machine's share of the dialogues; `max_cost_usd` stops new calls once that
much is spent, stores nothing for the dialogues it cut short, and leaves them for the next run.
`estimate_simulation` shows the calls, tokens and cost of a run before it starts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from personalens_utils import engine
from personalens_utils.data import MD, SD, Benchmark
from personalens_utils.engine import Item, Plan, StageReport
from personalens_utils.llm import CallKind, LLMClient
from personalens_utils.llm.budget import CostEstimate, Tally, request_tokens
from personalens_utils.llm.python_assistant import PythonAssistant, load
from personalens_utils.llm.specs import PYTHON
from personalens_utils.prompts.dialogue import DIALOGUE_PROMPT_VERSION
from personalens_utils.prompts.official import OfficialPrompts, prompts_for
from personalens_utils.records import Dialogue, Record, current_id, resolved_model
from personalens_utils.shards import Shard
from personalens_utils.store import RunStore

from .loop import TURN_CAPS, dialogue_id, prompt_identity, simulate_dialogue
from .prompting import ScenarioContext, assistant_family, assistant_request, user_request
from .settings import AssistantSetting

STAGE = "simulation"
DEFAULT_MODEL = "Claude 3 Sonnet"
"""The paper's user agent and main assistant (Claude 3 Sonnet)."""

PAPER_TURNS = {SD: 4.74, MD: 5.64}
"""Average turns per dialogue in the paper's Table 13 (Claude 3 Sonnet as assistant)."""
PAPER_TOKENS_PER_TURN = {SD: 149.87, MD: 149.32}
"""Average tokens per turn (user message + assistant reply) in the paper's Table 13."""
USER_SHARE = 1 / 3
"""Assumed share of the user's message in a turn's tokens (the paper does not split them)."""


@dataclass(frozen=True)
class PlannedDialogue:
    ctx: ScenarioContext
    setting: AssistantSetting


def _store(run: RunStore | str | os.PathLike[str]) -> RunStore:
    return run if isinstance(run, RunStore) else RunStore(run)


def planned_ids(
    store: RunStore, scenario_ids: Sequence[str], settings: Sequence[str], *, backend: str, user_model: str,
    assistant_model: str, assistant_backend: str | None = None, prompts: OfficialPrompts | None = None,
) -> dict[tuple[str, str], str]:
    """(scenario id, setting name) -> the id of the dialogue that stands for it in `store` when the user
    agent runs on `backend` and the assistant on `assistant_backend` (default: the same) with the
    kit's prompts or the official ones (`prompts`): its run-identity id, or the id of a dialogue stored
    before run identity with the same backends and model ids (those were all made with the kit's)."""
    assistant_backend = assistant_backend or backend
    prompt_set, prompt_version = prompt_identity(prompts)
    stored = store.ids(Dialogue)
    legacy = {d.id: (d.user, d.assistant) for d in store.read(Dialogue) if d.legacy and prompts is None}
    identity = ((backend, resolved_model(user_model, backend)),
                (assistant_backend, resolved_model(assistant_model, assistant_backend)))
    out = {}
    for sid in scenario_ids:
        for name in settings:
            new = dialogue_id(sid, user_model, assistant_model, name, backend=backend,
                              assistant_backend=assistant_backend, prompt_version=prompt_version,
                              prompt_set=prompt_set)
            old = Dialogue.legacy_id(sid, user_model, assistant_model, name, DIALOGUE_PROMPT_VERSION)
            out[sid, name] = current_id(new, old, stored, legacy, identity)
    return out


def plan_dialogues(
    benchmark: Benchmark,
    store: RunStore,
    *,
    backend: str,
    settings: Sequence[str | AssistantSetting] = ("base",),
    task_types: Sequence[str] = (SD, MD),
    user_model: str = DEFAULT_MODEL,
    assistant_model: str = DEFAULT_MODEL,
    retry_errors: bool = False,
    shard: str | Shard | None = None,
    limit: int | None = None,
    assistant_backend: str | None = None,
    prompts: OfficialPrompts | None = None,
) -> Plan[PlannedDialogue]:
    """The dialogues still to run (scenario x setting, in benchmark order) and how many are stored,
    for a user agent on `backend` and an assistant on `assistant_backend` (default: the same), with
    the kit's prompts or the official templates `prompts`; dialogues of other backends or prompt
    sets are not this work. A setting the official code has no prompt for is refused here.

    With `shard="i/n"` only that shard's dialogues are planned (and counted as already done).
    Stored dialogues with status "error" are redone only with `retry_errors=True`.
    """
    part = Shard.parse(shard)
    unknown = sorted(set(task_types) - {SD, MD})
    if unknown:
        raise ValueError(f"unknown task type(s) {unknown}; use 'SD' and/or 'MD'")
    parsed = list(dict.fromkeys(AssistantSetting.parse(s) for s in settings))
    if not parsed:
        raise ValueError("settings is empty: give at least one assistant setting, e.g. ['base']")
    if prompts is not None:
        for setting in parsed:
            prompts.assistant_templates(setting.name, assistant_family(assistant_model))
    scenarios = list(benchmark.iter_scenarios(task_types))
    ids = planned_ids(store, [s.scenario_id for s in scenarios], [s.name for s in parsed], backend=backend,
                      user_model=user_model, assistant_model=assistant_model,
                      assistant_backend=assistant_backend, prompts=prompts)
    candidates = []
    for scenario in scenarios:
        ctx = ScenarioContext.of(scenario, benchmark.user(scenario.user_id))
        for setting in parsed:
            did = ids[scenario.scenario_id, setting.name]
            if part is None or part.owns(did):
                candidates.append(((did,), PlannedDialogue(ctx, setting)))
    return engine.plan(store, Dialogue, candidates, retry_errors=retry_errors, limit=limit)


def _stage(user_model: str, assistant_model: str, max_turns: int | None, assistant_client: LLMClient | None,
           prompts: OfficialPrompts | None) -> engine.Stage[PlannedDialogue]:
    async def work(client: LLMClient, item: Item[PlannedDialogue]) -> list[Record]:
        assistant = assistant_client or client
        with assistant.stage(client.current_stage):  # the assistant's calls are booked under this stage too
            return [await simulate_dialogue(client, item.payload.ctx, item.payload.setting,
                                            user_model=user_model, assistant_model=assistant_model,
                                            max_turns=max_turns, assistant_client=assistant,
                                            prompts=prompts)]

    return engine.Stage(STAGE, Dialogue, work)


def _prepare(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: LLMClient, *,
             assistant_client: LLMClient | None = None, assistant_backend: str | None = None,
             settings: Sequence[str | AssistantSetting] = ("base",), task_types: Sequence[str] = (SD, MD),
             user_model: str = DEFAULT_MODEL, assistant_model: str = DEFAULT_MODEL,
             retry_errors: bool = False, max_turns: int | None = None,
             limit: int | None = None, shard: str | Shard | None = None,
             max_cost_usd: float | None = None, prompt_set: str = "kit",
             official_code: str | os.PathLike[str] | None = None,
             ) -> tuple[RunStore, engine.Stage[PlannedDialogue], Plan[PlannedDialogue], StageReport]:
    if assistant_client is client:
        assistant_client = None
    if assistant_backend not in (None, (assistant_client or client).backend_name):
        raise ValueError(f"assistant_backend={assistant_backend!r} but the assistant's client calls "
                         f"{(assistant_client or client).backend_name!r}: pass the assistant's own client "
                         "as assistant_client")
    store = _store(run)
    prompts = prompts_for(prompt_set, official_code)
    planned = plan_dialogues(benchmark, store, backend=client.backend_name, settings=settings,
                             task_types=task_types, user_model=user_model, assistant_model=assistant_model,
                             retry_errors=retry_errors, shard=shard, limit=limit,
                             assistant_backend=(assistant_client or client).backend_name, prompts=prompts)
    report = StageReport(STAGE, shard=str(shard) if shard else None, max_cost_usd=max_cost_usd,
                         details={"prompt_set": prompt_set, "prompt_version": prompt_identity(prompts)[1]})
    return store, _stage(user_model, assistant_model, max_turns, assistant_client, prompts), planned, report


def _others(client: LLMClient, assistant: Any) -> list[LLMClient]:
    """The clients besides the user agent's that the assistant's calls go to (a Python assistant's
    are those of the model it calls): their spending counts against `max_cost_usd` and in the report."""
    if assistant is None:
        return []
    found = assistant.llm_clients() if isinstance(assistant, PythonAssistant) else [assistant]
    return [c for c in found if c is not client]


def _pool_size(client: LLMClient, assistant: LLMClient | None) -> int:
    """Dialogues in progress at once: a dialogue makes one call at a time, alternating between the user
    agent's and the assistant's client, so the sum of their call bounds keeps every slot busy (also
    while some dialogues wait out a retry) without spreading the calls over more dialogues than
    needed; fewer dialogues in flight means less lost to a kill or cut by a budget."""
    return client.max_concurrency + (assistant or client).max_concurrency


def _stage_options(report: StageReport, client: LLMClient, assistant: LLMClient | None,
                   others: list[LLMClient]) -> engine.StageOptions:
    """The engine's options of a simulation run: its budget over every role's client, its pool."""
    return engine.StageOptions(max_cost_usd=report.max_cost_usd, pool_size=_pool_size(client, assistant),
                               desc=Dialogue.table, others=others)


async def arun_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: LLMClient,
                          **options: Any) -> StageReport:
    """Simulate every planned dialogue into the run store; see `run_simulation`."""
    store, stage, planned, report = _prepare(benchmark, run, client, **options)
    assistant = options.get("assistant_client")
    others = _others(client, assistant)
    before = [c.totals() for c in others]
    await engine.arun_stage(stage, store, client, planned, report=report,
                            options=_stage_options(report, client, assistant, others))
    for other, totals in zip(others, before, strict=True):
        report.spent(totals, other.totals())
    return report


def run_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: LLMClient,
                   **options: Any) -> StageReport:
    """Simulate every planned dialogue into the run store: the user agent through `client` (an
    `LLMClient`), the assistant through `assistant_client` (another `LLMClient`; default: `client`).

    Options: `assistant_client`, `assistant_backend` (a check: the backend `assistant_client` must
    call), `settings` (assistant settings, default ["base"]), `task_types`,
    `user_model`, `assistant_model`, `prompt_set` ("kit" or "official") and `official_code` (where the
    official code is; docs/simulation.md), `retry_errors` (redo dialogues stored as errors), `max_turns`
    (overrides the 20/30 caps), `limit` (run at most that many of the planned dialogues; the rest stay
    for a later call), `shard` ("i/n": this machine's share) and `max_cost_usd` (stop new calls once
    this much is spent in this call by the user agent's and the assistant's clients together; the
    report's `status` is then "budget reached" and a rerun continues where it stopped). The report
    counts the calls of both clients. `assistant_client` may be a `PythonAssistant` (a `python:`
    spec's client): its model's calls are counted and limited the same way. Works in scripts and in
    notebooks with a running event loop.
    """
    store, stage, planned, report = _prepare(benchmark, run, client, **options)
    assistant = options.get("assistant_client")
    others = _others(client, assistant)
    before = [c.totals() for c in others]
    engine.run_stage(stage, store, client, planned, report=report,
                     options=_stage_options(report, client, assistant, others))
    for other, totals in zip(others, before, strict=True):
        report.spent(totals, other.totals())
    return report


def estimate_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], *,
                        backend: str = "", sample: int = 200, **options: Any) -> CostEstimate:
    """Calls, tokens and cost of the dialogues a `run_simulation` call with these options would run.

    Only dialogues not yet stored count (so it also prices the rest of an interrupted run). Turns per
    dialogue and tokens per turn are the paper's Table 13 averages (`PAPER_TURNS`,
    `PAPER_TOKENS_PER_TURN`), capped by `max_turns`; the fixed part of each prompt (instructions,
    profile, assistant context) is rendered for up to `sample` dialogues per task type and setting
    and scaled up. `backend` is the user agent's and `assistant_backend` (an option, default the same)
    the assistant's: they decide which dialogues are already stored, and each role's calls are priced
    on its own backend ("offline": nothing is spent; a `python:` assistant on the model it declares).
    """
    max_turns = options.pop("max_turns", None)
    limit = options.pop("limit", None)
    options.pop("max_cost_usd", None)
    prompts = prompts_for(options.pop("prompt_set", "kit"), options.pop("official_code", None))
    user_model = options.get("user_model", DEFAULT_MODEL)
    assistant_model = options.get("assistant_model", DEFAULT_MODEL)
    assistant_backend, priced_model, note = _assistant_pricing(backend, options.get("assistant_backend"),
                                                               assistant_model)
    todo = [item.payload
            for item in plan_dialogues(benchmark, _store(run), backend=backend, limit=limit, prompts=prompts,
                                       **options).items]
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
            opening += request_tokens(user_request(item.ctx, [], user_model, prompts))
            next_turn += request_tokens(user_request(item.ctx, _EMPTY_TURN, user_model, prompts))
            system += request_tokens(assistant_request(item.setting, item.ctx, [], assistant_model, prompts))
        n, scale = len(items), len(items) / len(picked)
        history = per_turn * turns * (turns - 1) / 2  # both parties' earlier turns, summed over the turns
        tally.add(STAGE, str(CallKind.USER_TURN), user_model, calls=n * turns,
                  input_tokens=scale * (opening + (turns - 1) * next_turn) + n * history,
                  output_tokens=n * turns * user_out)
        if priced_model is not None:
            tally.add(STAGE, str(CallKind.ASSISTANT_TURN), priced_model, calls=n * turns,
                      input_tokens=scale * turns * system + n * (history + turns * user_out),
                      output_tokens=n * turns * (per_turn - user_out), backend=assistant_backend)
    counts = ", ".join(f"{kind} {setting}: {len(items)}" for (kind, setting), items in groups.items())
    return tally.estimate([
        f"{len(todo)} dialogues still to run ({counts or 'none'})",
        f"turns per dialogue from the paper's Table 13: SD {PAPER_TURNS[SD]}, MD {PAPER_TURNS[MD]}"
        + (f", capped at max_turns={max_turns}" if max_turns else ""),
        f"tokens per turn from Table 13: SD {PAPER_TOKENS_PER_TURN[SD]}, MD {PAPER_TOKENS_PER_TURN[MD]}; "
        f"the user's message taken as {USER_SHARE:.0%} of a turn",
        "every turn re-sends the dialogue so far to both the user agent and the assistant",
        f"each role priced on its own backend: user agent {backend}:{user_model}, assistant {note}",
    ])


def _assistant_pricing(
    backend: str, assistant_backend: str | None, model: str
) -> tuple[str, str | None, str]:
    """The backend and model an estimate prices the assistant's turns on, and how to say so: a Python
    assistant's are its declared model's, sized like a prompt-based assistant's turns."""
    assistant_backend = assistant_backend or backend
    if assistant_backend != PYTHON:
        return assistant_backend, model, f"{assistant_backend}:{model}"
    inner = load(model).inner
    if inner is None:
        return PYTHON, None, f"python:{model} (calls no model through the kit: nothing priced)"
    return inner.backend, inner.model, (f"python:{model} through {inner.backend}:{inner.model}, one call "
                                        "per turn sized like the prompt-based assistant's")


_EMPTY_TURN = ({"role": "user", "content": ""}, {"role": "assistant", "content": ""})


def dialogue_frame(run: RunStore | str | os.PathLike[str]) -> pd.DataFrame:
    """The stored dialogues, one row each (turns kept as lists)."""
    return _store(run).frame(Dialogue)
