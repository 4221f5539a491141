"""The stage engine: planning against the store, ask-parse-ask-again, and one error policy in every stage.

An llm failure becomes an error record that `retry_errors=True` redoes; any other exception (here a
parser raising KeyError) stops the run with that exception and stores nothing for the item it broke.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from support.records import dialogue
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.benchmark_validation import consistency
from personalens_utils.benchmark_validation.consistency import ProfileToCheck, run_consistency
from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.generation import parsing as generation_parsing
from personalens_utils.llm import (
    CallKind,
    FatalError,
    LLMClient,
    Message,
    Request,
    Response,
    RetryableError,
    Usage,
)
from personalens_utils.prompt_sets import KitPrompts
from personalens_utils.runstore import engine
from personalens_utils.runstore.engine import UnreadableAnswer
from personalens_utils.runstore.records import ConsistencyCheck, Dialogue, MaskStep
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

GOOD = """WITHIN-DOMAIN CONFLICT: 0
CROSS-DOMAIN CONFLICT: 0
DOMAINS: none
EXPLANATION: Nothing in this profile contradicts anything else."""


class Script:
    """A backend answering every call with `answer(request)`: a text, or an exception to raise."""

    name = "script"

    def __init__(self, answer):
        self.answer = answer
        self.calls = 0

    async def acomplete(self, request: Request, model: str) -> Response:
        self.calls += 1
        result = self.answer(request)
        if isinstance(result, Exception):
            raise result
        return Response(text=result, usage=Usage(3, 2), backend=self.name, model=model, latency_s=0.0)


def client(answer) -> LLMClient:
    return LLMClient(Script(answer), progress=False, use_cache=False, max_retries=0, max_concurrency=1)


def ask(text: str = "") -> Request:
    return Request(kind=CallKind.VALIDATION, messages=(Message("user", text or "question"),), model="m")


def profile(user_id: int) -> ProfileToCheck:
    return ProfileToCheck(user_id, {"age": "30"}, {"Alarm": {"Alarm Sound Preference": "birdsong"}})


# -- planning --------------------------------------------------------------------------------------


def test_plan_skips_finished_records_and_redoes_errors_only_when_asked(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.extend([dialogue("a"), dialogue("b", "error")])
    candidates = [(("a",), "A"), (("b",), "B"), (("c",), "C"), (("a", "d"), "AD")]
    kept = engine.plan(store, Dialogue, candidates, retry_errors=False)
    assert [(i.payload, i.ids, i.retry) for i in kept.items] == [("C", ("c",), False), ("AD", ("d",), False)]
    assert kept.already_done == 1 and kept.errors_kept == 1
    redo = engine.plan(store, Dialogue, candidates, retry_errors=True, limit=2)
    assert [(i.payload, i.ids, i.retry) for i in redo.items] == [("B", ("b",), True), ("C", ("c",), False)]
    assert redo.retried == 1


# -- ask, parse, ask again -------------------------------------------------------------------------


def strict(text: str) -> str:
    if not text.startswith("OK"):
        raise UnreadableAnswer(f"{text!r} does not start with OK")
    return text


def again(request: Request, answer: str, problem: str, attempt: int) -> Request:
    return Request(kind=request.kind, model=request.model,
                   messages=(*request.messages, Message("assistant", answer), Message("user", problem)))


def test_ask_parsed_asks_again_with_the_problem_then_gives_up():
    answers = iter(["maybe", "OK fine"])
    llm = client(lambda r: next(answers))
    asked = asyncio.run(engine.ask_parsed(llm, ask(), strict, again))
    assert asked.value == "OK fine" and asked.answers == ("maybe", "OK fine") and len(asked.problems) == 1
    assert asked.usage == Usage(6, 4)
    never = asyncio.run(engine.ask_parsed(client(lambda r: "no"), ask(), strict, again, attempts=3))
    assert never.value is None and never.answers == ("no",) * 3 and never.error is None


def test_ask_parsed_returns_llm_failures_and_raises_bugs_and_bad_keys():
    failed = asyncio.run(engine.ask_parsed(client(lambda r: RetryableError("overloaded", status=529)),
                                           ask(), strict, again))
    assert failed.value is None and "RetriesExhaustedError" in (failed.error or "")
    with pytest.raises(KeyError):
        asyncio.run(engine.ask_parsed(client(lambda r: "OK"), ask(), lambda t: {}["x"], again))
    with pytest.raises(FatalError, match="bad key"):
        bad_key = client(lambda r: FatalError("bad key", status=401))
        asyncio.run(engine.ask_parsed(bad_key, ask(), strict, again))


# -- a bug stops each stage, storing nothing for it ------------------------------------------------


def broken_parser(*args, **kwargs):
    raise KeyError("a bug in the parser")


def test_a_bug_stops_the_simulation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KitPrompts, "read_user_message", broken_parser)
    with pytest.raises(KeyError, match="a bug in the parser"):
        run_simulation(tiny_benchmark(1), tmp_path, LLMClient("offline", progress=False))
    assert RunStore(tmp_path).read(Dialogue) == []


def test_a_bug_stops_the_consistency_check_after_storing_what_finished(tmp_path, monkeypatch) -> None:
    real = consistency.parse_consistency_answer

    def parse(text: str):
        return broken_parser() if text == "BUG" else real(text)

    monkeypatch.setattr(consistency, "parse_consistency_answer", parse)
    llm = client(lambda r: "BUG" if r.context["demographics"]["id"] == "3" else GOOD)
    profiles = [ProfileToCheck(u, {"age": "30", "id": str(u)}, {}) for u in (1, 2, 3, 4)]
    with pytest.raises(KeyError, match="a bug in the parser"):
        run_consistency(llm, profiles, run_dir=tmp_path)
    stored = {c.user_id for c in RunStore(tmp_path).read(ConsistencyCheck)}
    assert {1, 2} <= stored and 3 not in stored  # what finished before the bug is kept, the broken one is not


def test_a_bug_stops_generation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generation_parsing, "parse_mask", broken_parser)
    config = GenerationConfig(n_users=2, sd_tasks_per_domain=1, md_tasks=0, domains=("Alarm", "Books"))
    with pytest.raises(KeyError, match="a bug in the parser"):
        generate_benchmark(config, client=LLMClient("offline", progress=False),
                           output_dir=tmp_path / "bench", run_dir=tmp_path / "run")
    assert RunStore(tmp_path / "run").read(MaskStep) == []
    assert not (tmp_path / "bench").exists()


# -- an llm failure is an error record, redone on request ------------------------------------------


def test_an_llm_failure_in_the_consistency_check_is_an_error_record_retried_on_request(tmp_path) -> None:
    down = client(lambda r: RetryableError("overloaded", status=529))
    [first] = run_consistency(down, [profile(1)], run_dir=tmp_path)
    assert first.status == "error" and "overloaded" in (first.problem or "") and first.label is None
    up = Script(lambda r: GOOD)
    with LLMClient(up, progress=False, use_cache=False) as llm:
        [kept] = run_consistency(llm, [profile(1)], run_dir=tmp_path, retry_errors=False)
        assert kept == first and up.calls == 0
        [fixed] = run_consistency(llm, [profile(1)], run_dir=tmp_path)
    assert fixed.status == "ok" and fixed.label == 0 and up.calls == 1
    assert len(RunStore(tmp_path).path(ConsistencyCheck).read_text().splitlines()) == 2


def test_a_stage_report_counts_what_it_stored(tmp_path: Path) -> None:
    report = run_simulation(tiny_benchmark(1), tmp_path, LLMClient("offline", progress=False),
                            SimulationConfig(task_types=["SD"], max_turns=2))
    assert report.planned == report.stored == report.finished == 3 and report.errors == 0
    assert report.calls == 12 and report.status == "complete"
    frame = report.frame()
    assert frame.loc[0, "finished"] == 3 and frame.loc[0, "stage"] == "simulation"
    assert "simulation complete: 3 records stored" in repr(report)
    again = run_simulation(tiny_benchmark(1), tmp_path, LLMClient("offline", progress=False),
                           SimulationConfig(task_types=["SD"], max_turns=2))
    assert again.planned == 0 and again.already_done == 3 and again.calls == 0


def test_a_write_under_way_when_a_bad_key_stops_the_run_lands_before_it_raises(tmp_path, monkeypatch) -> None:
    store = RunStore(tmp_path)
    writing = threading.Event()
    real_extend = RunStore.extend

    def slow_extend(self: RunStore, records) -> None:
        if records:
            writing.set()
            time.sleep(0.3)
        real_extend(self, records)

    async def work(llm: LLMClient, item: engine.Item[str]):
        if item.payload == "bad":
            await asyncio.to_thread(writing.wait, 5)
            raise FatalError("invalid x-api-key", status=401)
        return [dialogue(item.payload)]

    monkeypatch.setattr(RunStore, "extend", slow_extend)
    llm = client(lambda r: "unused")
    planned = engine.plan(store, Dialogue, [(("a",), "a"), (("bad",), "bad")], retry_errors=False)
    stage = engine.Stage("simulation", Dialogue, work)
    with pytest.raises(FatalError, match="simulation stopped"):
        engine.run_stage(stage, store, llm, planned)
    assert [r.id for r in store.read(Dialogue)] == ["a"]
