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
from collections.abc import Mapping, Sequence
from typing import Any

from personalens_utils.judging.answers import judgment_record
from personalens_utils.judging.asking import judge_dimension
from personalens_utils.judging.batch import run_judging_batch
from personalens_utils.judging.config import JudgingConfig
from personalens_utils.judging.dimensions import Dimension, judge_model_key
from personalens_utils.judging.plan import plan_judging
from personalens_utils.judging.requests import ContextFor
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.prompt_sets import KIT, PromptSet
from personalens_utils.prompt_templates import judge as prompts
from personalens_utils.runstore import engine
from personalens_utils.runstore.engine import Item, StageReport
from personalens_utils.runstore.records import Dialogue, DialogueSummary, Judgment, Record
from personalens_utils.runstore.store import RunStore

STAGE = "judging"


async def judge_dialogue(
    client: LLMClient,
    dialogue: Dialogue,
    context: Mapping[str, Any],
    dimensions: Sequence[Dimension],
    judge_model: str,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
    prompts: PromptSet = KIT,
    judge_sample: int = 0,
) -> list[Judgment]:
    """Judgment records of one dialogue on the given dimensions, with the judge prompts of `prompt_templates`,
    as judge sample `judge_sample` (its calls carry it: `Request.sample`); llm failures become error
    records."""
    judge = Role.on(client, judge_model_key(judge_model))
    fields = await asyncio.gather(*(judge_dimension(lambda _: client, d, context, judge_model, prompts,
                                                    judge_sample) for d in dimensions))
    records = []
    for dimension, f in zip(dimensions, fields, strict=True):
        variant = prompts.judge_variant(dimension, prompt_version, judge_sample)
        records.append(judgment_record(dialogue.id, dimension, judge, variant, f))
    return records


def run_judging(
    store: RunStore, client: LLMClient, context_for: ContextFor, config: JudgingConfig | None = None
) -> StageReport:
    """Judge every finished dialogue in `store` not yet judged by the configured judge on its
    dimensions, with the judge prompts of `config.prompts` (docs/judging.md; under the official set
    turn-level personalization stays the kit's).

    `context_for(dialogue)` gives that dialogue's judge context (see `judge_context` and
    `benchmark_contexts`); planning reads no texts, so each dialogue is read in full and its context
    made when its judgments are about to be made (a context that cannot be made stops the run there,
    keeping the judgments already stored).
    An authentication failure stops the run after saving what was finished; other llm failures
    become error records, judged again by the next run unless `retry_errors=False`.
    `batch=True` sends the calls through the Message Batches API instead (`run_judging_batch`).
    `shard="i/n"` judges only the dialogues of that shard (see `shards`); `max_cost_usd` refuses new
    calls once this much is spent: judgments cut short are not stored, `report.status` says
    "budget reached", and a rerun with a higher limit does only what is left.
    A judge on a real backend leaves dialogues made on the offline backend alone unless
    `offline_dialogues=True` (the report's details count them; `skipped_offline_note` says so).
    """
    config = config or JudgingConfig()
    if config.batch and config.max_cost_usd is not None:
        raise ValueError(
            "max_cost_usd cannot stop a Message Batch part-way (the whole batch is paid once submitted); "
            "check estimate_judging(..., batch=True) first, or judge online with a budget"
        )
    if config.batch:
        return run_judging_batch(store, client, context_for, config)
    planned = plan_judging(store, config, config.judge_on(client))

    async def work(llm: LLMClient, item: Item[DialogueSummary]) -> list[Record]:
        dialogue = planned.dialogue(item.payload)
        context = context_for(dialogue)
        todo = planned.todo(item.payload.id, item.ids)
        by_sample = [(k, [d for d, s in todo if s == k]) for k in sorted({s for _, s in todo})]
        judged = await asyncio.gather(*(judge_dialogue(llm, dialogue, context, dims, config.judge_model,
                                                       config.prompt_version, config.prompts, k)
                                        for k, dims in by_sample))
        return [record for records in judged for record in records]

    shard = config.shard
    report = StageReport(STAGE, shard=str(shard) if shard else None, details=planned.details())
    stage = engine.Stage(STAGE, Judgment, work)
    options = engine.StageOptions(max_cost_usd=config.max_cost_usd, desc=f"judging ({planned.model_key})")
    engine.run_stage(stage, store, client, planned.plan, report=report, options=options)
    planned.note_on_card(store, report)
    return report
