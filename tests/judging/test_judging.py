"""The judge stage over hand-made dialogue records: prompts, offline evidence, records, resume, missing."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.records import dialogue_json, put, write_lines

from personalens_utils import judging
from personalens_utils.judging import (
    ALL_DIMENSIONS,
    DIMENSIONS,
    JudgingConfig,
    JudgingError,
    judge_request,
    missing_rate,
    run_judging,
)
from personalens_utils.judging.offline import judge_answer
from personalens_utils.llm import CallKind, FatalError, Request, Response, RetryableError, Usage
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.runstore.records import Dialogue, Judgment, RecordError
from personalens_utils.runstore.store import RunStore

TASK = {
    "task_id": "SD-Alarm-task-1",
    "task_type": "SD",
    "domains": ["Alarm"],
    "user_intent": "Set an alarm for tomorrow.",
    "task_description": "The user wants a new alarm for tomorrow morning.",
    "task_goal": "An alarm is set with the user's usual time, sound and repetition.",
    "relevant_preferences": ["Alarm Time Preference", "Alarm Sound Preference", "Alarm Recurring Preference"],
}
PREFERENCES = {
    "Alarm": {
        "Alarm Time Preference": "6:30 AM",
        "Alarm Sound Preference": "gentle nature",
        "Alarm Recurring Preference": "weekdays",
    }
}
SITUATION = {"location": "Leeds, United Kingdom", "time_of_day": "Evening", "environment": "Quiet"}

OPENING = "Hi, could you help me set an alarm for tomorrow?"
PROACTIVE = [
    {"role": "user", "content": OPENING},
    {"role": "assistant", "content": "Of course! Shall I set it for 6:30 AM with the gentle nature sound, "
                                     "repeating on weekdays like usual? It's a quiet evening in Leeds, "
                                     "a good time to plan."},
    {"role": "user", "content": "Yes, that's exactly right, thanks."},
    {"role": "assistant", "content": "Done: your alarm is set for 6:30 AM, gentle nature, on weekdays."},
]
REACTIVE = [
    {"role": "user", "content": OPENING},
    {"role": "assistant", "content": "Sure. What time would you like to wake up?"},
    {"role": "user", "content": "6:30 AM please, with a gentle nature sound."},
    {"role": "assistant", "content": "Got it, 6:30 AM with gentle nature. Should it repeat?"},
    {"role": "user", "content": "Yes, on weekdays."},
    {"role": "assistant", "content": "Your alarm is set for 6:30 AM on weekdays with gentle nature."},
]
IGNORING = [
    {"role": "user", "content": OPENING},
    {"role": "assistant", "content": "Sure. What time would you like to wake up?"},
    {"role": "user", "content": "6:30 AM please, with a gentle nature sound."},
    {"role": "assistant", "content": "I have set an alarm for 7:00 with the default beep."},
]


def context(turns: list[dict[str, str]], ended: str = "terminated", **extra: Any) -> dict[str, Any]:
    return {"task": TASK, "demographics": {"age": "25-34 years old"}, "preferences": PREFERENCES,
            "interactions": {"Alarm": "The user usually wakes at 6:30 AM on weekdays."},
            "situation": SITUATION, "dialogue": turns, "ended": ended, **extra}


def score(dimension: str, ctx: dict[str, Any]) -> float | None:
    return DIMENSIONS[dimension].parse(judge_answer({**ctx, "dimension": dimension})).score


# -- the offline judge --------------------------------------------------------------------------------


def test_offline_personalization_follows_when_preferences_were_applied() -> None:
    assert score("personalization", context(PROACTIVE)) == 4.0  # all proactive, situation used
    assert score("personalization", context(REACTIVE)) == 2.0  # applied only once told
    assert score("personalization", context(IGNORING)) == 1.0  # told and still not applied
    no_situation = [dict(t) for t in PROACTIVE]
    no_situation[1] = {"role": "assistant", "content": "Shall I use 6:30 AM, gentle nature, weekdays?"}
    assert score("personalization", context(no_situation)) == 3.0


def test_offline_turn_personalization_reads_only_the_prefix() -> None:
    ctx = context(REACTIVE, dimension="turn_personalization")
    first = DIMENSIONS["turn_personalization"].parse(judge_answer({**ctx, "dialogue": REACTIVE[:2]}))
    last = DIMENSIONS["turn_personalization"].parse(judge_answer(ctx))
    assert first.score == 1.0  # nothing applied yet
    assert last.score == 2.0


def test_offline_task_completion() -> None:
    assert score("task_completion", context(PROACTIVE)) == 1.0
    assert score("task_completion", context(PROACTIVE, ended="turn_cap")) == 0.0
    assert score("task_completion", context(IGNORING)) == 0.0
    assert score("task_completion", context(PROACTIVE[:3])) == 0.0  # last user message unanswered


def test_offline_quality_scores_see_repetition_and_unanswered_questions() -> None:
    good = context(REACTIVE)
    assert score("naturalness_assistant", good) == 5.0
    assert score("coherence_user", good) == 5.0
    looping = [dict(t) for t in REACTIVE]
    for turn in looping:
        if turn["role"] == "assistant":
            turn["content"] = "As an AI language model, what time would you like to wake up?"
    assert score("naturalness_assistant", context(looping)) <= 2.0
    assert score("coherence_assistant", context(looping)) < 5.0
    dodging = [dict(t) for t in REACTIVE]
    dodging[2] = {"role": "user", "content": "Bananas grow in tropical climates."}
    dodging[4] = {"role": "user", "content": "Bananas grow in tropical climates."}
    assert score("coherence_user", context(dodging)) <= 3.0
    assert score("naturalness_user", context(dodging)) < score("naturalness_user", good)


def test_offline_judge_ignores_an_empty_closing_message() -> None:
    closed = [*PROACTIVE, {"role": "user", "content": ""}, {"role": "assistant", "content": "Sleep well!"}]
    assert score("naturalness_user", context(closed)) == 5.0
    assert score("coherence_user", context(closed)) == 5.0
    assert score("naturalness_user", context(closed, ended="turn_cap")) < 5.0


def test_offline_judge_rejects_unknown_dimension() -> None:
    with pytest.raises(FatalError, match="unknown dimension 'politeness'"):
        judge_answer(context(PROACTIVE, dimension="politeness"))


# -- prompts and requests ---------------------------------------------------------------------------


def test_requests_carry_prompt_context_and_temperature_zero() -> None:
    ctx = context(PROACTIVE)
    request = judge_request(DIMENSIONS["personalization"], ctx, "Claude 3.5 Sonnet")
    prompt = request.messages[0].content
    assert request.kind == CallKind.JUDGE and request.task == "personalization"
    assert request.temperature == 0.0
    for fact in ("gentle nature", "6:30 AM on weekdays", "Leeds, United Kingdom", "Time of Day: Evening",
                 "4 - EXCEPTIONAL", "Personalization Score:", TASK["task_description"], "USER: " + OPENING):
        assert fact in prompt
    assert request.context["dimension"] == "personalization"
    tc = judge_request(DIMENSIONS["task_completion"], ctx, "m").messages[0].content
    assert TASK["task_goal"] in tc and "VERDICT:" in tc and "EXPLANATION:" in tc
    nat = judge_request(DIMENSIONS["naturalness_user"], ctx, "m").messages[0].content
    assert "USER's messages" in nat and "Naturalness Score:" in nat and "gentle nature" in nat


def test_unknown_dimension_is_named() -> None:
    with pytest.raises(JudgingError, match="unknown judge dimensions"):
        judging.dimensions_from(["personalization", "empathy"])


# -- the runner -------------------------------------------------------------------------------------


def dialogue_record(index: int, turns: list[dict[str, str]], status: str = "terminated",
                    setting: str = "base") -> dict[str, Any]:
    return dialogue_json(f"dlg{index}", scenario_id=f"user{index}/SD-Alarm-task-1", user_id=index,
                         task_id="SD-Alarm-task-1", task_type="SD", domains=["Alarm"], user_model="u",
                         assistant_model="a", assistant_setting=setting, status=status,
                         error=None if status != "error" else "boom", turns=turns,
                         n_turns=sum(t["role"] == "user" for t in turns))


def store_with_dialogues(tmp_path: Path) -> RunStore:
    store = RunStore(tmp_path / "run")
    put(store, Dialogue, [dialogue_record(1, PROACTIVE), dialogue_record(2, REACTIVE),
                               dialogue_record(3, IGNORING, status="turn_cap"),
                               dialogue_record(4, PROACTIVE[:1], status="error")])
    return store


def context_for(dialogue: Dialogue) -> dict[str, Any]:
    return context([t.as_dict() for t in dialogue.turns], ended=dialogue.status)


def offline_client() -> LLMClient:
    return LLMClient("offline", progress=False, max_concurrency=4)


def test_run_judging_writes_one_record_per_dimension_and_resumes(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)
    report = run_judging(store, offline_client(), context_for)
    assert report.details["dialogues_in_store"] == 4 and report.details["dialogues_judgeable"] == 3
    assert report.details["dialogues_skipped_error"] == 1
    assert report.stored == 3 * len(ALL_DIMENSIONS)
    records = store.records(Judgment)
    assert len(records) == 3 * len(ALL_DIMENSIONS)
    assert {r["status"] for r in records} == {"ok"}
    by = {(r["dialogue_id"], r["dimension"]): r for r in records}
    assert by["dlg1", "personalization"]["score"] > by["dlg2", "personalization"]["score"]
    assert by["dlg3", "task_completion"]["score"] == 0.0
    turn = by["dlg2", "turn_personalization"]
    assert turn["turn_scores"] == [1.0, 2.0, 2.0] and turn["attempts"] == 3
    assert turn["score"] == pytest.approx(5 / 3)
    assert set(records[0]) == {"id", "dialogue_id", "dimension", "judge_model", "prompt_version", "backend",
                               "judge_model_id", "status", "score", "turn_scores", "explanation", "raw",
                               "attempts"}
    assert records[0]["judge_model"] == "Claude 3.5 Sonnet" and records[0]["backend"] == "offline"

    again = run_judging(store, offline_client(), context_for)
    assert again.stored == 0 and again.details["judgments_done_before"] == 3 * len(ALL_DIMENSIONS)

    alias = run_judging(store, offline_client(), context_for,
                        JudgingConfig(judge_model="claude-3-5-sonnet-20241022"))
    assert alias.stored == 0, "an alias of the same judge model must find its records"

    second = run_judging(store, offline_client(), context_for,
                         JudgingConfig(judge_model="Claude Sonnet 4.5", dimensions=["personalization"]))
    assert second.stored == 3
    assert len(store.records(Judgment)) == 3 * len(ALL_DIMENSIONS) + 3


def test_select_limits_which_dialogues_are_judged(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)
    report = run_judging(store, offline_client(), context_for,
                         JudgingConfig(dimensions=["task_completion"], select=lambda d: d.user_id == 2))
    assert report.stored == 1
    assert store.records(Judgment)[0]["dialogue_id"] == "dlg2"


class Scripted:
    """A backend answering judge calls from a script: fn(request, call number) -> text or exception."""

    name = "scripted"

    def __init__(self, fn: Callable[[Request, int], str | Exception]):
        self.fn = fn
        self.requests: list[Request] = []

    async def acomplete(self, request: Request, model: str) -> Response:
        self.requests.append(request)
        answer = self.fn(request, len(self.requests))
        if isinstance(answer, Exception):
            raise answer
        return Response(text=answer, usage=Usage(10, 5), backend=self.name, model=model, latency_s=0.0)


def scripted_client(fn: Callable[[Request, int], str | Exception]) -> tuple[LLMClient, Scripted]:
    backend = Scripted(fn)
    return LLMClient(backend, progress=False, use_cache=False, max_retries=0, retry_base_s=0.0), backend


def same_backend_answering(text: str) -> LLMClient:
    """A client of the scripted backend (the judge's run identity) that answers every call with `text`:
    a rerun on the backend that stored the errors."""
    return scripted_client(lambda r, n: text)[0]


def test_unreadable_answer_is_retried_once_then_stored_as_missing(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)
    client, backend = scripted_client(lambda r, n: "The assistant did a fine job overall.")
    run_judging(store, client, context_for,
                JudgingConfig(dimensions=["personalization", "task_completion"],
                              select=lambda d: d.id == "dlg1"))
    records = {r["dimension"]: r for r in store.records(Judgment)}
    for rec in records.values():
        assert rec["status"] == "missing" and rec["score"] is None and rec["attempts"] == 2
        assert rec["raw"].count("The assistant did a fine job overall.") == 2
        assert rec["explanation"].startswith("no valid score")
    assert len(backend.requests) == 4
    retry = next(r for r in backend.requests if len(r.messages) == 3)
    assert retry.messages[1].role == "assistant" and "could not be read" in retry.messages[2].content

    rates = missing_rate(store).set_index("dimension")
    assert rates.loc["personalization", "missing"] == 1 and rates.loc["personalization", "ok"] == 0
    assert rates.loc["personalization", "missing_rate"] == 1.0


def test_retry_that_succeeds_is_ok_with_two_attempts(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)

    def answer(request: Request, n: int) -> str:
        return "Personalization Score: 3" if len(request.messages) == 3 else "Personalization Score: 9"

    client, _ = scripted_client(answer)
    run_judging(store, client, context_for,
                JudgingConfig(dimensions=["personalization"], select=lambda d: d.id == "dlg1"))
    (rec,) = store.records(Judgment)
    assert (rec["status"], rec["score"], rec["attempts"]) == ("ok", 3.0, 2)
    assert "Personalization Score: 9" in rec["raw"] and "Personalization Score: 3" in rec["raw"]


def test_turn_level_keeps_unreadable_turns_as_null(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)

    def answer(request: Request, n: int) -> str:
        turn = request.context["turn"]
        return "no idea" if turn == 2 else f"Personalization Score: {turn}"

    client, _ = scripted_client(answer)
    run_judging(store, client, context_for,
                JudgingConfig(dimensions=["turn_personalization"], select=lambda d: d.id == "dlg2"))
    (rec,) = store.records(Judgment)
    assert rec["status"] == "ok" and rec["turn_scores"] == [1.0, None, 3.0]
    assert rec["score"] == 2.0 and rec["attempts"] == 4
    rates = missing_rate(store).set_index("dimension")
    assert rates.loc["turn_personalization", "turns"] == 3
    assert rates.loc["turn_personalization", "turns_missing"] == 1


def test_missing_is_never_counted_as_a_score(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)

    def answer(request: Request, n: int) -> str:
        return "VERDICT: True\nEXPLANATION: ok" if request.context["dialogue"][-1]["content"].startswith(
            "Done") else "VERDICT: maybe"

    client, _ = scripted_client(answer)
    run_judging(store, client, context_for, JudgingConfig(dimensions=["task_completion"]))
    frame = store.frame(Judgment)
    assert sorted(frame["status"]) == ["missing", "missing", "ok"]
    assert frame.loc[frame["status"] == "missing", "score"].isna().all()
    assert frame["score"].mean() == 1.0  # the mean over valid scores only
    rate = missing_rate(store).iloc[0]
    assert math.isclose(rate["missing_rate"], 2 / 3)


def test_llm_errors_become_error_records_that_a_rerun_replaces(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)
    client, _ = scripted_client(lambda r, n: RetryableError("overloaded", status=529))
    report = run_judging(store, client, context_for, JudgingConfig(dimensions=["coherence_user"]))
    assert report.statuses == {"error": 3}
    assert all("overloaded" in r["explanation"] for r in store.records(Judgment))
    rates = missing_rate(store).iloc[0]
    assert rates["error"] == 3 and math.isnan(rates["missing_rate"])

    fixed = run_judging(store, same_backend_answering("Coherence Score: 4"), context_for,
                        JudgingConfig(dimensions=["coherence_user"]))
    assert fixed.stored == 3
    assert {r["status"] for r in store.records(Judgment)} == {"ok"}
    assert len(store.records(Judgment)) == 3


def test_bad_key_stops_the_run_and_keeps_finished_records(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)

    def answer(request: Request, n: int) -> str | Exception:
        if request.context["dialogue"][0]["content"] == OPENING and request.context["ended"] == "turn_cap":
            return FatalError("invalid x-api-key; set ANTHROPIC_API_KEY", status=401)
        return "Coherence Score: 4"

    client = LLMClient(Scripted(answer), progress=False, use_cache=False, max_concurrency=1)
    with pytest.raises(FatalError, match="invalid x-api-key"):
        run_judging(store, client, context_for, JudgingConfig(dimensions=["coherence_user"]))
    kept = store.records(Judgment)
    assert kept and all(r["status"] == "ok" for r in kept)
    rerun = run_judging(store, same_backend_answering("Coherence Score: 4"), context_for,
                        JudgingConfig(dimensions=["coherence_user"]))
    assert rerun.stored == 3 - len(kept)


def test_malformed_dialogue_record_is_named(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    write_lines(store, Dialogue, [dialogue_record(1, PROACTIVE),
                                  dialogue_record(2, [{"role": "narrator", "content": "x"}])])
    with pytest.raises(RecordError, match=r"dialogues.jsonl:2: Dialogue record field 'turns' item 0"):
        run_judging(store, offline_client(), context_for)
    assert not store.path(Judgment).exists()


def test_llm_errors_are_kept_when_retry_errors_is_false(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)
    client, _ = scripted_client(lambda r, n: RetryableError("overloaded", status=529))
    run_judging(store, client, context_for, JudgingConfig(dimensions=["coherence_user"]))
    kept = run_judging(store, same_backend_answering("Coherence Score: 4"), context_for,
                       JudgingConfig(dimensions=["coherence_user"], retry_errors=False))
    assert kept.planned == 0 and kept.already_done == 3
    assert {r.status for r in store.read(Judgment)} == {"error"}


def test_a_bug_in_a_parser_stops_the_run_and_stores_nothing_for_it(tmp_path: Path, monkeypatch) -> None:
    store = store_with_dialogues(tmp_path)

    def broken(self: Any, text: str) -> Any:
        raise KeyError("label")

    monkeypatch.setattr(judging.Dimension, "parse", broken)
    with pytest.raises(KeyError, match="label"):
        run_judging(store, offline_client(), context_for, JudgingConfig(dimensions=["coherence_user"]))
    assert store.read(Judgment) == []


def test_empty_store_judges_nothing(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    report = run_judging(store, offline_client(), context_for)
    assert report.details["dialogues_in_store"] == 0 and report.stored == 0
    assert missing_rate(store).empty


def test_offline_backend_answers_judge_calls_deterministically() -> None:
    request = judge_request(DIMENSIONS["personalization"], context(REACTIVE), "Claude 3.5 Sonnet")
    backend = OfflineBackend(seed=1)
    first = backend.respond(request, "claude-3-5-sonnet-20241022").text
    assert first == OfflineBackend(seed=2).respond(request, "x").text
    assert DIMENSIONS["personalization"].parse(first).score == 2.0


# -- official data ----------------------------------------------------------------------------------


def test_contexts_from_the_official_benchmark(official_data: Path) -> None:
    from personalens_utils.data import load_benchmark

    benchmark = load_benchmark(official_data, users=[7])
    context_of = judging.benchmark_contexts(benchmark)
    record = Dialogue.from_json(dialogue_record(7, PROACTIVE))
    ctx = context_of(record)
    assert ctx["task"]["task_id"] == "SD-Alarm-task-1"
    assert set(ctx["preferences"]) == {"Alarm"} and set(ctx["interactions"]) == {"Alarm"}
    assert set(ctx["situation"]) <= {"location", "device", "time_of_day", "day_of_week", "environment"}
    assert ctx["ended"] == "terminated" and ctx["dialogue"] == PROACTIVE
    prompt = judge_request(DIMENSIONS["personalization"], ctx, "m").messages[0].content
    assert str(ctx["preferences"]["Alarm"]["Alarm Sound Preference"]) in prompt
    with pytest.raises(JudgingError, match="does not hold"):
        context_of(dataclasses.replace(record, scenario_id="user7/SD-Alarm-task-99"))


def test_task_completion_needs_every_relevant_preference_applied() -> None:
    partial = [
        {"role": "user", "content": OPENING},
        {"role": "assistant", "content": "Set for 6:30 AM with gentle nature. Anything else?"},
        {"role": "user", "content": "No, that's all, thanks."},
        {"role": "assistant", "content": "You're welcome!"},
    ]
    answer = judge_answer({**context(partial), "dimension": "task_completion"})
    assert DIMENSIONS["task_completion"].parse(answer).score == 0.0
    assert "Alarm Recurring Preference" in answer


def test_dialogue_filter_and_judged_users(tmp_path: Path) -> None:
    store = store_with_dialogues(tmp_path)
    assert judging.judged_users(store) == [1, 2, 3]  # the errored dialogue of user 4 needs no profile
    assert judging.judged_users(store, judging.dialogue_filter([2, 3, 4], ["SD"])) == [2, 3]
    assert judging.judged_users(store, judging.dialogue_filter(None, ["MD"])) == []
    with pytest.raises(JudgingError, match="unknown task types"):
        judging.dialogue_filter(None, ["XD"])
