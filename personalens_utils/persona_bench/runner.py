"""Running PERSONA Bench items through any backend on the kit's client and stage engine.

Each item becomes one call of kind `PERSONA_BENCH` and one `PersonaPrediction` record, appended to
the run store the moment it is answered; a rerun plans only what is not stored (errored records
again unless `retry_errors=False`), so a killed run loses only the calls in flight. `shard="i/n"`
runs one part of the items (by item key), `max_cost_usd` stops before the limit is passed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from personalens_utils.llm import CallKind, LLMClient, Message, Request
from personalens_utils.llm.role import Role
from personalens_utils.persona_bench.answers import read_answer
from personalens_utils.persona_bench.items import PersonaItem
from personalens_utils.persona_bench.official import CALLS
from personalens_utils.persona_bench.prompts import SYSTEM
from personalens_utils.runstore import engine, run_card
from personalens_utils.runstore.engine import Item, StageReport
from personalens_utils.runstore.identity import prediction_id
from personalens_utils.runstore.records import ERROR, PersonaPrediction
from personalens_utils.runstore.shards import Shard
from personalens_utils.runstore.store import RunStore

STAGE = "persona_bench"
DEFAULT_MODEL = "claude-3-5-sonnet"
KIT_MAX_TOKENS = {"3.1": 10, "3.2": 25, "3.3": 256}


def build_request(item: PersonaItem, model: str) -> Request:
    """The call for one item. Official items are sent as the authors' evaluators send them: the prompt
    as the only user message, no system text, their max tokens and temperature. Kit items add the
    kit's system text and ask at temperature 0."""
    if not item.variant.kit:
        params = CALLS[item.task]
        return Request(
            kind=CallKind.PERSONA_BENCH,
            task=item.task,
            messages=(Message("user", item.prompt),),
            model=model,
            temperature=params.temperature,
            max_tokens=params.max_tokens,
            context=item.context,
        )
    return Request(
        kind=CallKind.PERSONA_BENCH,
        task=item.task,
        system=SYSTEM,
        messages=(Message("user", item.prompt),),
        model=model,
        temperature=0.0,
        max_tokens=KIT_MAX_TOKENS[item.task],
        context=item.context,
    )


def _record(item: PersonaItem, role: Role, **fields: object) -> PersonaPrediction:
    return PersonaPrediction(
        item=item.key,
        dataset=item.dataset,
        variant=item.variant,
        task=item.task,
        setting=item.setting,
        user=item.user,
        domain=item.domain,
        target=item.target,
        model=role.model,
        backend=role.backend,
        model_id=role.model_id,
        truth=item.truth,
        **fields,  # type: ignore[arg-type]
    )


async def predict(client: LLMClient, item: PersonaItem, model: str) -> PersonaPrediction:
    """One item's record: "ok" with the prediction, or "missing" with the raw answer; an llm failure
    propagates (the engine stores it as an error record)."""
    response = await client.acomplete(build_request(item, model))
    value = read_answer(item.task, response.text, official=not item.variant.kit)
    return _record(
        item,
        Role.on(client, model),
        status="ok" if value is not None else "missing",
        prediction=value,
        raw=response.text,
        usage=response.usage,
        cost_usd=response.cost_usd,
        retries=response.retries,
    )


def run_items(
    client: LLMClient,
    items: Iterable[PersonaItem],
    store: RunStore,
    model: str = DEFAULT_MODEL,
    *,
    retry_errors: bool = True,
    shard: str | Shard | None = None,
    limit: int | None = None,
    max_cost_usd: float | None = None,
) -> StageReport:
    """Ask `model` every item not yet answered in `store`; returns the stage's report."""
    part = Shard.parse(shard)
    role = Role.on(client, model)
    candidates = (((prediction_id(i.key, role, i.variant),), i) for i in items
                  if part is None or part.owns(i.key))
    planned = engine.plan(store, PersonaPrediction, candidates, retry_errors=retry_errors, limit=limit)

    async def work(llm: LLMClient, item: Item[PersonaItem]) -> Sequence[PersonaPrediction]:
        return [await predict(llm, item.payload, model)]

    def failed(item: Item[PersonaItem], message: str) -> Sequence[PersonaPrediction]:
        return [_record(item.payload, role, status=ERROR, error=message)]

    stage = engine.Stage(STAGE, PersonaPrediction, work, failed)
    report = StageReport(STAGE, shard=str(part) if part else None, max_cost_usd=max_cost_usd)
    report = engine.run_stage(
        stage,
        store,
        client,
        planned,
        report=report,
        options=engine.StageOptions(max_cost_usd=max_cost_usd, desc=f"PERSONA Bench ({model})"),
    )
    run_card.note_stage(store, report, run_card.role_entry(role))
    return report
