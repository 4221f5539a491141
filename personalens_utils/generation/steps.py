"""Running generation steps through the stage engine: reuse a stored result, or ask, parse, retry, store.

Every step result is a `GenerationStep` record (one table per step) keyed by a stable id, appended
as soon as the step finishes, so a killed run loses only the steps in flight and a rerun skips
what is done. An answer the parser rejects is sent back with the reasons (up to `max_attempts`
answers in all); if none is usable, or the llm layer fails, the record is stored with status
"error", the raw answer and the reasons, and nothing is invented. A later run retries errored
steps with the response cache bypassed, so it gets fresh answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from personalens_utils.generation.requests import StepCall, retry_request
from personalens_utils.llm import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.prompt_templates.generation import GENERATION_PROMPT_VERSION
from personalens_utils.runstore import engine, run_card
from personalens_utils.runstore.engine import Item
from personalens_utils.runstore.records import ERROR, GENERATION_STEPS, GenerationStep, Record
from personalens_utils.runstore.store import RunStore

OK = "ok"
STAGE = "generation"


@dataclass(frozen=True)
class StepSpec:
    """One step to have a result for: its id, what it is about, how to ask, and what to do with the value
    (`done` gets the parsed value, or None when the step failed)."""

    step: str
    id: str
    about: dict[str, Any]
    build: Callable[[], StepCall]
    done: Callable[[Any], None]


@dataclass
class StepRunner:
    """Runs generation steps through one client into one run store, counting what it reused and did."""

    client: LLMClient
    store: RunStore
    model: str
    max_attempts: int = 3
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    failures: list[GenerationStep] = field(default_factory=list)
    """The error records stored by this runner."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")

    def record_id(self, step: str, *key: Any) -> str:
        """Stable id of one step result: what it is about, plus everything that changes the answer."""
        backend = self.client.backend_name
        return GenerationStep.make_id(step, key, backend, self.model, GENERATION_PROMPT_VERSION)

    def run(self, specs: Sequence[StepSpec], desc: str) -> None:
        """Give every spec its value: stored ones at once, the others after running them concurrently."""
        todo: list[Item[StepSpec]] = []
        for step in dict.fromkeys(s.step for s in specs):
            kind = GENERATION_STEPS[step]
            mine = [s for s in specs if s.step == step]
            stored = {r.id: r for r in self.store.read(kind)}
            for spec in mine:
                prior = stored.get(spec.id)
                if prior is not None and prior.status == OK:
                    self.counts[step, "reused"] += 1
                    spec.done(prior.value)
            todo += engine.plan(self.store, kind, [((s.id,), s) for s in mine], retry_errors=True).items
        stage = engine.Stage(STAGE, GenerationStep, self._work)
        report = engine.run_stage(stage, self.store, self.client, engine.Plan(todo, 0, 0),
                                  options=engine.StageOptions(desc=f"generation: {desc}"))
        run_card.note_stage(self.store, report, run_card.role_entry(Role.on(self.client, self.model)),
                            prompt_version=GENERATION_PROMPT_VERSION, steps=[s.step for s in specs])

    async def _work(self, client: LLMClient, item: Item[StepSpec]) -> list[Record]:
        spec = item.payload
        call = spec.build()
        asked = await engine.ask_parsed(client, call.request, call.parse, retry_request,
                                        attempts=self.max_attempts, use_cache=False if item.retry else None)
        attempts = len(asked.answers) + (asked.error is not None)
        record = GENERATION_STEPS[call.step](
            id=spec.id, status=OK if asked.ok else ERROR, about=spec.about, value=asked.value,
            raw=None if asked.ok else (asked.answers[-1] if asked.answers else ""),
            error=None if asked.ok else " | ".join(
                [*asked.problems, *([f"model call failed: {asked.error}"] if asked.error else [])]),
            attempts=attempts, input_tokens=asked.usage.input_tokens, output_tokens=asked.usage.output_tokens,
            cost_usd=asked.cost_usd, backend=client.backend_name, model=self.model,
            prompt_version=GENERATION_PROMPT_VERSION,
        )
        if record.is_error:
            self.failures.append(record)
        self.counts[call.step, "failed" if record.is_error else "generated"] += 1
        spec.done(asked.value if asked.ok else None)
        return [record]
