"""Running many dialogues into a run store: concurrent, resumable, and safe to interrupt.

Each finished dialogue is appended to `dialogues.jsonl` the moment it ends, so a killed run loses
only the dialogues in flight; a rerun plans again from the store and skips every stored dialogue.
Dialogues stored with status "error" are redone only when asked (`retry_errors=True`).
A dialogue is keyed by its run identity (`records.Dialogue`): the same scenarios simulated on
another backend or model id are new dialogues, so an offline run is never reused for a real model.
`shard="i/n"` runs one machine's share of the dialogues; `max_cost_usd` stops new calls once that
much is spent, stores nothing for the dialogues it cut short, and leaves them for the next run.
`estimate_simulation` shows the calls, tokens and cost of a run before it starts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from personalens_utils.assistants import Assistant, Pricing, assistant_on
from personalens_utils.assistants.python import AssistantError, AssistantStopped
from personalens_utils.data import MD, SD, Benchmark, Scenario
from personalens_utils.llm import CallKind, LLMClient
from personalens_utils.llm.budget import CostEstimate, Tally, Volume, cacheable_prefix, request_tokens
from personalens_utils.llm.role import Role, role_of
from personalens_utils.prompt_sets import ScenarioContext, in_style
from personalens_utils.prompt_templates.user_styles import UserAgent
from personalens_utils.runstore import engine, run_card
from personalens_utils.runstore.columnar import Columnar
from personalens_utils.runstore.engine import Item, Plan, StageReport
from personalens_utils.runstore.identity import dialogue_ids, samples
from personalens_utils.runstore.records import Dialogue, Record
from personalens_utils.runstore.shards import Shard
from personalens_utils.runstore.store import RunStore, StoredBatches
from personalens_utils.simulation.batch import BatchedAssistant, BatchedUser, RoundFailed, Rounds
from personalens_utils.simulation.config import SimulationConfig
from personalens_utils.simulation.loop import TURN_CAPS, simulate_dialogue
from personalens_utils.simulation.settings import AssistantSetting

STAGE = "simulation"
log = logging.getLogger(__name__)

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
    sample: int = 0
    """Which of the run's `repeats` independent simulations of this scenario and setting it is."""


def _store(run: RunStore | str | os.PathLike[str]) -> RunStore:
    return run if isinstance(run, RunStore) else RunStore(run)


def planned_ids(scenario_ids: Sequence[str], settings: Sequence[str], config: SimulationConfig,
                user: Role) -> dict[tuple[str, str, int], str]:
    """(scenario id, setting name, sample) -> the id of its dialogue when `user` plays the user agent and
    the configured assistant (`SimulationConfig.assistant_for`) answers, with the configured prompts, for
    each of the `repeats` samples."""
    if (user.model, user.style) != (config.user_model, config.user_style):
        raise ValueError(f"the user agent {user} playing {user.style!r} is not the configured one "
                         f"({config.user_model!r} playing {config.user_style!r}): make it with "
                         "SimulationConfig.user_on, or configure the same model and style")
    prompts, assistant = config.prompts, role_of(config.assistant_for(user))
    made = {(name, k): dialogue_ids(name, user=user, assistant=assistant, variant=prompts.variant(k))
            for name in settings for k in samples(config.repeats, "repeats")}
    return {(sid, name, k): make(sid) for sid in scenario_ids for (name, k), make in made.items()}


def plan_dialogues(benchmark: Benchmark, store: RunStore, config: SimulationConfig, *,
                   user: Role) -> Plan[PlannedDialogue]:
    """The dialogues still to run (scenario x setting, in benchmark order) and how many are stored,
    for `user` as the user agent and the configured assistant (`SimulationConfig.assistant_for`), with
    the configured prompts; dialogues of other backends, endpoints or prompt sets are not this work. A setting
    the prompt set has no prompt for is refused here.

    With `shard="i/n"` only that shard's dialogues are planned (and counted as already done).
    Stored dialogues with status "error" are redone only with `retry_errors=True`. What is stored is
    read as ids and statuses from the columnar copy; profiles and tasks are looked up for the
    dialogues to run only.
    """
    part = Shard.parse(config.shard)
    unknown = sorted(set(config.task_types) - {SD, MD})
    if unknown:
        raise ValueError(f"unknown task type(s) {unknown}; use 'SD' and/or 'MD'")
    parsed = list(dict.fromkeys(AssistantSetting.parse(s) for s in config.settings))
    if not parsed:
        raise ValueError("settings is empty: give at least one assistant setting, e.g. ['base']")
    for setting in parsed:
        config.prompts.check_setting(setting.name, config.assistant_model)
    frame = benchmark.scenarios[benchmark.scenarios["task_type"].isin(list(config.task_types))]
    scenario_ids = frame["scenario_id"].tolist()
    ids = planned_ids(scenario_ids, [s.name for s in parsed], config, user)
    candidates = []
    for row, sid in enumerate(scenario_ids):
        for setting in parsed:
            for k in samples(config.repeats, "repeats"):
                did = ids[sid, setting.name, k]
                if part is None or part.owns(did):
                    candidates.append(((did,), (row, setting, k)))
    with Columnar(store, tables=[Dialogue]) as source:  # ids and statuses only, not every dialogue's text
        stored = source.stored(Dialogue)
    planned = engine.plan(store, Dialogue, candidates, retry_errors=config.retry_errors, limit=config.limit,
                          stored=stored)
    rows = sorted({row for row, _, _ in (item.payload for item in planned.items)})
    contexts = {}  # the profiles and tasks of the dialogues to run only
    for row, record in zip(rows, frame.iloc[rows].to_dict("records"), strict=True):
        scenario = Scenario.from_row(record)
        contexts[row] = ScenarioContext.of(scenario, benchmark.user(scenario.user_id))
    items = [Item(item.ids, PlannedDialogue(contexts[row], setting, k), item.retry)
             for item in planned.items for row, setting, k in [item.payload]]
    return Plan(items, planned.already_done, planned.errors_kept)


def _stage(config: SimulationConfig, assistant: Assistant, rounds: Rounds | None = None,
           ) -> engine.Stage[PlannedDialogue]:
    """The stage: one dialogue per item, its calls made live, or, with `rounds`, waiting in the batch
    rounds (a dialogue whose round failed is left pending for a rerun)."""

    async def simulate(client: LLMClient, item: Item[PlannedDialogue]) -> Dialogue:
        ctx, setting, sample = item.payload.ctx, item.payload.setting, item.payload.sample
        kwargs: dict[str, Any] = dict(user_model=UserAgent(config.user_model, config.user_style),
                                      max_turns=config.max_turns, prompts=config.prompts, sample=sample)
        if rounds is None:
            return await simulate_dialogue(client, ctx, setting, assistant=assistant, **kwargs)
        async with rounds.dialogue():
            try:
                return await simulate_dialogue(BatchedUser(client, rounds), ctx, setting,
                                               assistant=BatchedAssistant(assistant, rounds), **kwargs)
            except RoundFailed as exc:
                log.warning("dialogue %s left for a rerun: %s", item.ids[0], exc)
                raise engine.Pending([], 1) from exc

    async def work(client: LLMClient, item: Item[PlannedDialogue]) -> list[Record]:
        ctx, setting = item.payload.ctx, item.payload.setting
        with assistant.stage(client.current_stage):  # the assistant's calls are booked under this stage too
            try:
                return [await simulate(client, item)]
            except AssistantStopped as exc:
                raise AssistantError(
                    f"{exc} (user {ctx.scenario.user_id}, task {ctx.scenario.task_id}, "
                    f"setting {setting.name}). Dialogues finished before this are kept; fix the assistant "
                    "and run again, or set on_assistant_error='record' to store such dialogues as errors "
                    "and go on") from exc

    return engine.Stage(STAGE, Dialogue, work)


def with_assistant(config: SimulationConfig, client: LLMClient) -> SimulationConfig:
    """`config` with its assistant under test made: the one given (`config.assistant`, whose model
    name then is `assistant_model`; a `Role` on its own client), or `assistant_model` on the user agent's
    client. A role without a client names whom to price and plan for, and cannot be run."""
    given = config.assistant
    if given is None:
        return replace(config, assistant=assistant_on(client, config.assistant_model))
    if isinstance(given, Role):
        return replace(config, assistant=assistant_on(given.serves, given.model, given.spec),
                       assistant_model=given.model)
    return replace(config, assistant_model=given.model)


def _prepare(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: LLMClient,
             config: SimulationConfig) -> tuple[RunStore, engine.Stage[PlannedDialogue],
                                                Plan[PlannedDialogue], StageReport, Rounds | None]:
    config = with_assistant(config, client)
    store = _store(run)
    planned = plan_dialogues(benchmark, store, config, user=config.user_on(client))
    shard = config.shard
    report = StageReport(STAGE, shard=str(shard) if shard else None, max_cost_usd=config.max_cost_usd,
                         details=config.prompts.details())
    rounds = None
    if config.batch:
        clients = [client, *_others(client, config.assistant)]
        rounds = Rounds(StoredBatches(store), total=len(planned.items),
                        poll_interval_s=config.poll_interval_s, max_rounds=config.max_rounds,
                        progress=client.progress, spent=lambda: sum(c.totals()["cost_usd"] for c in clients))
    return store, _stage(config, config.assistant, rounds), planned, report, rounds


def _others(client: LLMClient, assistant: Assistant) -> list[LLMClient]:
    """The clients besides the user agent's that the assistant's calls go to (`Assistant.clients`):
    their spending counts against `max_cost_usd` and in the report."""
    return [c for c in assistant.clients() if c is not client]


def _pool_size(client: LLMClient, assistant: Assistant) -> int:
    """Dialogues in progress at once: a dialogue makes one call at a time, alternating between the user
    agent's and the assistant's client, so the sum of their call bounds keeps every slot busy (also
    while some dialogues wait out a retry) without spreading the calls over more dialogues than
    needed; fewer dialogues in flight means less lost to a kill or cut by a budget."""
    return client.max_concurrency + assistant.max_concurrency


def _stage_options(report: StageReport, client: LLMClient, assistant: Assistant, others: list[LLMClient],
                   planned: Plan[PlannedDialogue], batch: bool) -> engine.StageOptions:
    """The engine's options of a simulation run: its budget over every role's client, its pool (in a
    batch run every dialogue at once, so each round holds the next call of all of them, and the rounds'
    line is the run's one progress line)."""
    pool = max(1, len(planned.items)) if batch else _pool_size(client, assistant)
    return engine.StageOptions(max_cost_usd=report.max_cost_usd, pool_size=pool, desc=Dialogue.table,
                               others=others, show_bar=not batch)


async def arun_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: LLMClient,
                          config: SimulationConfig | None = None) -> StageReport:
    """Simulate every planned dialogue into the run store; see `run_simulation`."""
    config = with_assistant(config or SimulationConfig(), client)
    store, stage, planned, report, rounds = _prepare(benchmark, run, client, config)
    others = _others(client, config.assistant)
    before = [(c.totals(), c.calls_by_kind()) for c in others]
    try:
        await engine.arun_stage(stage, store, client, planned, report=report,
                                options=_stage_options(report, client, config.assistant, others, planned,
                                                       config.batch))
    finally:
        if rounds is not None:
            rounds.close()
    for other, (totals, kinds) in zip(others, before, strict=True):
        report.spent(totals, other.totals())
        report.spent_by_kind(kinds, other.calls_by_kind())
    _update_card(benchmark, store, client, config, report)
    return report


def run_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str], client: LLMClient,
                   config: SimulationConfig | None = None) -> StageReport:
    """Simulate every planned dialogue into the run store: the user agent through `client` (an
    `LLMClient`), the assistant under test is `config.assistant` (an `assistants.Assistant`, e.g.
    `Session.assistant(...)`; default: `config.assistant_model` on `client`), as configured
    (`SimulationConfig`: settings, task types, models, prompt set, limits).

    `max_cost_usd` stops new calls once this much is spent in this call by the user agent's client and
    every client the assistant's calls go through (`Assistant.clients`) together; the report's
    `status` is then "budget reached" and a rerun continues where it stopped. The report counts the
    calls of all of them. Works in scripts and in notebooks with a running event loop.

    With `batch=True` the dialogues run in rounds through the roles' batch APIs (`simulation.batch`):
    the same requests and rules, at batch prices; dialogues whose batches could not be collected are
    the report's `pending`, finished by a rerun.
    """
    config = with_assistant(config or SimulationConfig(), client)
    store, stage, planned, report, rounds = _prepare(benchmark, run, client, config)
    others = _others(client, config.assistant)
    before = [(c.totals(), c.calls_by_kind()) for c in others]
    try:
        engine.run_stage(stage, store, client, planned, report=report,
                         options=_stage_options(report, client, config.assistant, others, planned,
                                                config.batch))
    finally:
        if rounds is not None:
            rounds.close()
    for other, (totals, kinds) in zip(others, before, strict=True):
        report.spent(totals, other.totals())
        report.spent_by_kind(kinds, other.calls_by_kind())
    _update_card(benchmark, store, client, config, report)
    return report


def _update_card(benchmark: Benchmark, store: RunStore, client: LLMClient, config: SimulationConfig,
                 report: StageReport) -> None:
    """Note this run in the store's run card (a store this run never wrote into stays without one)."""
    if not store.root.is_dir():
        return
    entry = run_card.simulation_entry(
        config.prompts, max_turns=config.max_turns, repeats=config.repeats,
        user=run_card.role_entry(config.user_on(client)), assistant=run_card.role_entry(config.assistant),
        settings=[s if isinstance(s, str) else s.name for s in config.settings], task_types=config.task_types,
        calls=run_card.role_calls(report, run_card.SIMULATION_CALLS))
    read = run_card.benchmark_entry(benchmark.root, benchmark.users)
    run_card.update_card(store, simulation=entry, benchmark=read, spent=run_card.stage_spent(report),
                         stage=STAGE)


def estimate_simulation(benchmark: Benchmark, run: RunStore | str | os.PathLike[str],
                        config: SimulationConfig | None = None, *, user: Role, sample: int = 200,
                        ) -> CostEstimate:
    """Calls, tokens and cost of the dialogues a `run_simulation` call with this configuration would run.

    Only dialogues not yet stored count (so it also prices the rest of an interrupted run). Turns per
    dialogue and tokens per turn are the paper's Table 13 averages (`PAPER_TURNS`,
    `PAPER_TOKENS_PER_TURN`), capped by `max_turns`; the fixed part of each prompt (instructions,
    profile, assistant context) is rendered for up to `sample` dialogues per task type and setting
    and scaled up. `user` is the user agent and `SimulationConfig.assistant_for` the assistant under
    test: they decide which dialogues are already stored, and each role's calls are priced on its own
    backend ("offline": nothing is spent; an assistant as `Assistant.pricing` says, e.g. a Python
    assistant on the model it declares).
    """
    config = config or SimulationConfig()
    assistant = config.assistant_for(user)
    config = replace(config, assistant_model=assistant.model)
    pricing = (Pricing(assistant.backend, assistant.model, f"{assistant.backend}:{assistant.model}")
               if isinstance(assistant, Role) else assistant.pricing())
    backend = user.backend
    max_turns, prompts = config.max_turns, config.prompts
    user_model, assistant_model = config.user_model, config.assistant_model
    todo = [item.payload
            for item in plan_dialogues(benchmark, _store(run), config, user=user).items]
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
        opening = next_turn = system = user_head = assistant_head = 0.0
        for item in picked:
            first = in_style(prompts.user_request(item.ctx, [], user_model), config.user_style)
            opening += request_tokens(first)
            later = in_style(prompts.user_request(item.ctx, _EMPTY_TURN, user_model), config.user_style)
            next_turn += request_tokens(later)
            answer = prompts.assistant_request(item.setting, item.ctx, [], assistant_model)
            system += request_tokens(answer)
            user_head += cacheable_prefix(first, backend)[1]
            assistant_head += cacheable_prefix(answer, pricing.backend)[1]
        n, scale = len(items), len(items) / len(picked)
        history = per_turn * turns * (turns - 1) / 2  # both parties' earlier turns, summed over the turns
        tally.add(STAGE, str(CallKind.USER_TURN), user_model, Volume(
            calls=n * turns, input_tokens=scale * (opening + (turns - 1) * next_turn) + n * history,
            output_tokens=n * turns * user_out,  # the stable head: written on turn 1, read after
            cache_write_tokens=scale * user_head, cache_read_tokens=scale * (turns - 1) * user_head))
        if pricing.model is not None:
            tally.add(STAGE, str(CallKind.ASSISTANT_TURN), pricing.model, Volume(
                calls=n * turns, input_tokens=scale * turns * system + n * (history + turns * user_out),
                output_tokens=n * turns * (per_turn - user_out), cache_write_tokens=scale * assistant_head,
                cache_read_tokens=scale * (turns - 1) * assistant_head), backend=pricing.backend)
    counts = ", ".join(f"{kind} {setting}: {len(items)}" for (kind, setting), items in groups.items())
    return tally.estimate([
        f"{len(todo)} dialogues still to run ({counts or 'none'})",
        f"turns per dialogue from the paper's Table 13: SD {PAPER_TURNS[SD]}, MD {PAPER_TURNS[MD]}"
        + (f", capped at max_turns={max_turns}" if max_turns else ""),
        f"tokens per turn from Table 13: SD {PAPER_TOKENS_PER_TURN[SD]}, MD {PAPER_TOKENS_PER_TURN[MD]}; "
        f"the user's message taken as {USER_SHARE:.0%} of a turn",
        "every turn re-sends the dialogue so far to both the user agent and the assistant",
        "caching: each role's stable head (user agent: instructions and profile; assistant: its system "
        "prompt) written on a dialogue's first turn and read on each later one",
        f"each role priced on its own backend: user agent {backend}:{user_model}, assistant {pricing.note}",
    ])


_EMPTY_TURN = ({"role": "user", "content": ""}, {"role": "assistant", "content": ""})


def dialogue_frame(run: RunStore | str | os.PathLike[str]) -> pd.DataFrame:
    """The stored dialogues, one row each (turns kept as lists)."""
    return _store(run).frame(Dialogue)
