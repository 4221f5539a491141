"""Planning reads ids only: a judging plan comes from the columnar copy's summary rows and judgment ids,
a resume reads no dialogue in full, and a run reads each dialogue when it judges it. The plan is the one
the stored records give (the same items, ids and order as planning over every record read in full)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.records import dialogue_json, put, write_lines
from support.roles import judge_of

from personalens_utils.judging import (
    JUDGEABLE_STATUSES,
    JudgingConfig,
    dimensions_from,
    judge_model_key,
    judged_users,
    run_judging,
    skipped_offline_line,
)
from personalens_utils.judging.plan import dialogue_summaries, plan_judging
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.runstore import columnar, engine
from personalens_utils.runstore.columnar import Columnar, TableSpec
from personalens_utils.runstore.identity import judgment_id
from personalens_utils.runstore.records import Dialogue, DialogueSummary, Judgment
from personalens_utils.runstore.store import RunStore

TURNS = [{"role": "user", "content": "Could you make me a playlist?"},
         {"role": "assistant", "content": "Sure! Some jazz on Spotify?"},
         {"role": "user", "content": "Yes, jazz please."},
         {"role": "assistant", "content": "Done: a jazz playlist on Spotify."}]
TASK = {"task_id": "SD-Music-task-1", "task_type": "SD", "domains": ["Music"], "user_intent": "Find music.",
        "task_description": "The user wants a playlist.", "task_goal": "A playlist is made.",
        "relevant_preferences": ["Preferred Genres"]}


def context_for(dialogue: Dialogue) -> dict[str, Any]:
    return {"task": TASK, "demographics": {}, "preferences": {"Music": {"Preferred Genres": ["jazz"]}},
            "interactions": {}, "situation": {"device": "Laptop"},
            "dialogue": [t.as_dict() for t in dialogue.turns], "ended": dialogue.status}


def row(did: str, user: int, status: str = "terminated", **fields: Any) -> dict[str, Any]:
    return dialogue_json(did, **{"scenario_id": f"user{user}/SD-Music-task-1", "user_id": user,
                                 "task_id": "SD-Music-task-1", "task_type": "SD", "domains": ["Music"],
                                 "status": status, "turns": TURNS, "n_turns": 2,
                                 "error": "boom" if status == "error" else None, **fields})


def offline() -> LLMClient:
    return LLMClient("offline", progress=False, max_concurrency=4, use_cache=False)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """What is read: dialogues in full (by offset, or the whole table) and lines parsed into the copy."""
    seen: dict[str, list[str]] = {"dialogues": [], "copied": []}
    by_offset, copy_rows, read = Columnar.lines, columnar._rows, RunStore.read

    def lines(self: Columnar, kind: Any, rows: Any) -> Iterator[dict[str, Any]]:
        for rec in by_offset(self, kind, rows):
            seen["dialogues" if kind is Dialogue else kind.table].append(rec["id"])
            yield rec

    def parsed(spec: TableSpec, source: Path, data: bytes, offset: int, lineno: int) -> Any:
        seen["copied"].append(spec.kind.table)
        return copy_rows(spec, source, data, offset, lineno)

    def whole(self: RunStore, kind: Any) -> Any:
        assert kind is not Dialogue, "a planner read every dialogue in full"
        return read(self, kind)

    monkeypatch.setattr(Columnar, "lines", lines)
    monkeypatch.setattr(columnar, "_rows", parsed)
    monkeypatch.setattr(RunStore, "read", whole)
    yield seen


def test_a_resume_reads_no_dialogue_and_a_run_reads_each_when_it_judges_it(
        tmp_path: Path, reads: dict[str, list[str]]) -> None:
    store = RunStore(tmp_path / "run")
    put(store, Dialogue, [row(f"d{i}", i) for i in range(5)] + [row("d5", 5, status="error")])
    first = run_judging(store, offline(), context_for)
    assert sorted(reads["dialogues"]) == [f"d{i}" for i in range(5)]  # each read once, when judged
    assert first.details["dialogues_in_store"] == 6 and first.details["dialogues_skipped_error"] == 1

    reads["dialogues"].clear()
    reads["copied"].clear()
    again = plan_judging(store, JudgingConfig(), judge_of(JudgingConfig(), "offline"))
    assert again.plan.items == [] and again.plan.already_done == 5
    assert again.details() == {**first.details, "judgments_done_before": 5 * len(again.dimensions)}
    rerun = run_judging(store, offline(), context_for)
    assert rerun.stored == 0 and rerun.already_done == 5
    assert judged_users(store) == [0, 1, 2, 3, 4]
    hosted = judge_of(JudgingConfig(), "anthropic")
    assert skipped_offline_line(store, judge=hosted).startswith("5 finished dialogue(s)")
    assert reads["dialogues"] == []
    assert "dialogues" not in reads["copied"]  # the copy had every dialogue: no dialogue line parsed again

    put(store, Dialogue, [row("d6", 6)])
    added = run_judging(store, offline(), context_for)
    assert added.stored == len(again.dimensions) and reads["dialogues"] == ["d6"]


def old_plan(store: RunStore, config: JudgingConfig, backend: str) -> engine.Plan[str]:
    """The plan as it was made before: every dialogue read in full, every judgment id made in Python and
    looked up in the store's own index."""
    dims = dimensions_from(config.dimensions)
    judge = Role.of(judge_model_key(config.judge_model), backend)
    finished = [d for d in store.read(Dialogue) if d.status in JUDGEABLE_STATUSES]
    candidates = [([judgment_id(d.id, dim.name, judge=judge,
                                variant=config.prompts.judge_variant(dim, config.prompt_version, k))
                    for k in range(config.judge_samples) for dim in dims], d.id) for d in finished]
    return engine.plan(store, Judgment, candidates, retry_errors=config.retry_errors)


@pytest.mark.parametrize("odd_id", [None, 'd "quoted" é'], ids=["ids made in SQL", "an id made in Python"])
def test_the_plan_is_the_one_every_stored_record_gives(tmp_path: Path, odd_id: str | None) -> None:
    store = RunStore(tmp_path / "run")
    put(store, Dialogue, [row("d3", 3), row("d1", 1, status="error"), row("d0", 0),
                          row("d2", 2, status="turn_cap"), *([row(odd_id, 7)] if odd_id else [])])
    put(store, Dialogue, [row("d1", 1)])  # re-simulated: a later line for an errored id keeps its place
    dims = ["task_completion", "personalization", "coherence_user"]
    run_judging(store, offline(), context_for, JudgingConfig(dimensions=dims, judge_samples=2))
    made = {(j.dialogue_id, j.dimension, j.sample): j for j in store.read(Judgment)}
    failed = dataclasses.replace(made["d2", "personalization", 1], status="error", score=None, raw="")
    write_lines(store, Judgment, [failed.to_json()])  # a later error line: the judgment is to redo
    other = dataclasses.replace(made["d0", "coherence_user", 1], id="x", status="error", score=None, raw="")
    store.append(other)  # an errored record of another id (another judge's): not this plan's
    put(store, Dialogue, [row("d4", 4)])  # not judged yet
    for retry in (True, False):
        config = JudgingConfig(dimensions=dims, judge_samples=2, retry_errors=retry)
        planned = plan_judging(store, config, judge_of(config, "offline")).plan
        before = old_plan(store, config, "offline")
        assert [(i.ids, i.payload.id, i.retry) for i in planned.items] == \
            [(i.ids, i.payload, i.retry) for i in before.items]
        assert (planned.already_done, planned.errors_kept) == (before.already_done, before.errors_kept)
        assert [i.payload.id for i in planned.items] == (["d2", "d4"] if retry else ["d4"])
        assert planned.errors_kept == (not retry)
    fresh_config = JudgingConfig(dimensions=["naturalness_user"])
    fresh = plan_judging(store, fresh_config, judge_of(fresh_config, "offline"))
    order = [item.payload.id for item in fresh.plan.items]
    assert order == ["d3", "d1", "d0", "d2", *([odd_id] if odd_id else []), "d4"]  # the store's order


def test_summaries_answer_what_the_dialogues_do(tmp_path: Path) -> None:
    """Select callables read summaries: every field, the variant's parts and the filled-in backends and
    model ids are the full record's."""
    store = RunStore(tmp_path / "run")
    put(store, Dialogue, [row("a", 1), row("b", 2, prompt_set="official", sample=1, task_type="MD",
                                            domains=["Music", "Books"])])
    write_lines(store, Dialogue, [row("c", 3, status="error", user_backend="", user_model_id="",
                                      assistant_model_id="")])  # as older lines left them: filled on reading
    put(store, Dialogue, [row("d", 4, backend="anthropic", user_model="Claude 3.5 Sonnet")])
    with Columnar(store) as source:
        summaries, where = dialogue_summaries(source)
        assert [d.id for d in source.records(Dialogue, where)] == ["a", "b", "c", "d"]
    for summary, dialogue in zip(summaries, store.read(Dialogue), strict=True):
        for name in (*DialogueSummary._fields, "variant", "made_offline", "user", "assistant"):
            assert getattr(summary, name) == getattr(dialogue, name), (dialogue.id, name)
