"""The online judging run: judge every finished dialogue not yet judged, storing as it goes.

Each (dialogue, dimension, judge model, prompt version, judge backend and model id) gets exactly
one judgment record in the run store, so a rerun skips what is done, an interrupted run resumes,
and a second judge model (or the same judge on another backend) adds records beside the first.
The run goes through the stage engine: one work item per dialogue, its judgments appended the
moment they are made. A call that fails in the llm layer
is stored as `error` and is judged again on the next run (unless `retry_errors=False`); any
other exception is a bug and stops the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from personalens_utils import engine
from personalens_utils.engine import Item, StageReport
from personalens_utils.llm.client import LLMClient
from personalens_utils.prompts import judge as prompts
from personalens_utils.prompts.official import OfficialPrompts, prompts_for
from personalens_utils.records import Dialogue, Judgment, Record
from personalens_utils.shards import Shard
from personalens_utils.store import RunStore

from .answers import judgment_record
from .asking import judge_dimension
from .batch import run_judging_batch
from .dimensions import DEFAULT_JUDGE_MODEL, Dimension, judge_model_key
from .plan import Select, plan_judging, sharded
from .requests import ContextFor, judge_prompt_identity

STAGE = "judging"


async def judge_dialogue(
    client: LLMClient,
    dialogue: Dialogue,
    context: Mapping[str, Any],
    dimensions: Sequence[Dimension],
    judge_model: str,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
    official: OfficialPrompts | None = None,
) -> list[Judgment]:
    """Judgment records of one dialogue on the given dimensions, with the kit's prompts or the
    official ones (`official`); llm failures become error records."""
    model_key = judge_model_key(judge_model)
    fields = await asyncio.gather(*(judge_dimension(lambda _: client, d, context, judge_model, official)
                                    for d in dimensions))
    records = []
    for dimension, f in zip(dimensions, fields, strict=True):
        prompt_set, version = judge_prompt_identity(dimension, official, prompt_version)
        records.append(judgment_record(dialogue.id, dimension, model_key, version, client.backend_name, f,
                                       prompt_set))
    return records


def run_judging(
    store: RunStore,
    client: LLMClient,
    context_for: ContextFor,
    *,
    judge_model: str = DEFAULT_JUDGE_MODEL,
    dimensions: Iterable[str] | None = None,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
    select: Select | None = None,
    batch: bool = False,
    shard: str | Shard | None = None,
    max_cost_usd: float | None = None,
    retry_errors: bool = True,
    prompt_set: str = "kit",
    official_code: str | None = None,
    offline_dialogues: bool | None = None,
) -> StageReport:
    """Judge every finished dialogue in `store` not yet judged by `judge_model` on `dimensions`,
    with the kit's prompts or (`prompt_set="official"`) the official code's, read from
    `official_code` or `$PERSONALENS_CODE` (docs/judging.md; turn-level personalization stays the kit's).

    `context_for(dialogue)` gives that dialogue's judge context (see `judge_context` and
    `benchmark_contexts`); every context is made before the first call, so bad input fails early.
    An authentication failure stops the run after saving what was finished; other llm failures
    become error records, judged again by the next run unless `retry_errors=False`.
    `batch=True` sends the calls through the Message Batches API instead (`run_judging_batch`).
    `shard="i/n"` judges only the dialogues of that shard (see `shards`); `max_cost_usd` refuses new
    calls once this much is spent: judgments cut short are not stored, `report.status` says
    "budget reached", and a rerun with a higher limit does only what is left.
    A judge on a real backend leaves dialogues made on the offline backend alone unless
    `offline_dialogues=True` (the report's details count them; `skipped_offline_note` says so).
    """
    select = sharded(select, shard)
    official = prompts_for(prompt_set, official_code)
    if batch and max_cost_usd is not None:
        raise ValueError(
            "max_cost_usd cannot stop a Message Batch part-way (the whole batch is paid once submitted); "
            "check estimate_judging(..., batch=True) first, or judge online with a budget"
        )
    if batch:
        return run_judging_batch(store, client, context_for, judge_model=judge_model, dimensions=dimensions,
                                 prompt_version=prompt_version, select=select, retry_errors=retry_errors,
                                 official=official, offline_dialogues=offline_dialogues)
    planned = plan_judging(store, judge_model=judge_model, backend=client.backend_name, dimensions=dimensions,
                           prompt_version=prompt_version, select=select, retry_errors=retry_errors,
                           official=official, offline_dialogues=offline_dialogues)
    contexts = {item.payload.id: context_for(item.payload) for item in planned.plan.items}

    async def work(llm: LLMClient, item: Item[Dialogue]) -> list[Record]:
        todo = planned.todo(item.payload.id, item.ids)
        return list(await judge_dialogue(llm, item.payload, contexts[item.payload.id], todo, judge_model,
                                         prompt_version, official))

    report = StageReport(STAGE, shard=str(shard) if shard else None, details=planned.details())
    stage = engine.Stage(STAGE, Judgment, work)
    options = engine.StageOptions(max_cost_usd=max_cost_usd, desc=f"judging ({planned.model_key})")
    return engine.run_stage(stage, store, client, planned.plan, report=report, options=options)
