"""The simulation stage: settings, prompts, the dialogue loop and the resumable runner."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from support.roles import user_of
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.llm import CallKind, FatalError, Request, Response, RetryableError, Usage
from personalens_utils.llm.client import LLMClient
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import (
    PAPER_SETTINGS,
    AssistantSetting,
    ScenarioContext,
    SettingError,
    SimulationConfig,
    assistant_request,
    dialogue_frame,
    plan_dialogues,
    run_simulation,
    simulate_dialogue,
    split_terminate,
    user_request,
)


class ScriptBackend:
    """Answers from a function of the request; counts calls per scenario."""

    name = "script"

    def __init__(self, answer: Callable[[Request], str]):
        self.answer = answer
        self.calls: Counter[str] = Counter()

    async def acomplete(self, request: Request, model: str) -> Response:
        task = request.context.get("task", {})
        key = task.get("task_id") if task else request.context.get("domains", [""])[0]
        self.calls[f"{request.kind}:{key}"] += 1
        text = self.answer(request)
        return Response(text=text, usage=Usage(10, len(text.split())), backend=self.name, model=model,
                        latency_s=0.0)


def client_for(answer: Callable[[Request], str], **kw) -> tuple[LLMClient, ScriptBackend]:
    backend = ScriptBackend(answer)
    return LLMClient(backend, progress=False, use_cache=False, max_retries=0, **kw), backend


def polite(request: Request) -> str:
    if request.kind == CallKind.ASSISTANT_TURN:
        return "Here you go."
    turn = request.context["turn"]
    if turn == 0:
        return "Could you help me?"
    return "Thanks, all done. TERMINATE" if turn == 2 else "And then?"


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark()


def ctx_of(bench, index: int = 0) -> ScenarioContext:
    scenario = list(bench.iter_scenarios())[index]
    return ScenarioContext.of(scenario, bench.user(scenario.user_id))


# -- settings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "name"), [
    ("base", "base"), ("vanilla", "vanilla"), ("base+D", "base+D"), ("base+i", "base+I"),
    ("base+S+D", "base+D+S"), ("BASE+DIS", "base+all"), ("base+all", "base+all"), ("vanilla+I", "vanilla+I"),
])
def test_setting_names_are_canonical(raw, name):
    setting = AssistantSetting.parse(raw)
    assert setting.name == name
    assert AssistantSetting.parse(setting.name) == setting


@pytest.mark.parametrize("raw", ["", "chatty", "base+X", "base+D+D", "base+", 3])
def test_bad_setting_names_raise(raw):
    with pytest.raises(SettingError):
        AssistantSetting.parse(raw)


def test_assistant_prompt_is_composed_from_the_setting_parts(bench):
    ctx = ctx_of(bench)
    alarm_summary = ctx.interactions["Alarm"]
    systems = {}
    for name in PAPER_SETTINGS:
        setting = AssistantSetting.parse(name)
        request = assistant_request(setting, ctx, [{"role": "user", "content": "hi"}], "m")
        systems[name] = request.system
        assert ("25-34 years old" in request.system) == setting.sees("D")
        assert (alarm_summary in request.system) == setting.sees("I")
        assert ("Lyon, France" in request.system) == setting.sees("S")
        expected = {"setting", "task_type", "domains", "oracle", *setting.context_keys}
        assert set(request.context) == expected
        assert request.context["oracle"]["interactions"] == ctx.interactions  # reference assistants only
        assert request.context["oracle"]["task"]["task_id"] == ctx.scenario.task_id
        assert request.temperature == 0.0
        assert request.kind == CallKind.ASSISTANT_TURN
    assert systems["vanilla"] != systems["base"]
    # base+all is base plus the three sections, not a separate prompt
    for section in ("Demographic profile", "earlier conversations", "situation right now"):
        assert section in systems["base+all"]
        assert section not in systems["base"]
    assert systems["base+all"].startswith(systems["base"].split("Reply with")[0].rstrip())


def test_user_request_carries_profile_and_dialogue(bench):
    ctx = ctx_of(bench, 3)  # the MD task
    opening = user_request(ctx, [], "u")
    assert opening.temperature == 0.5 and opening.kind == CallKind.USER_TURN
    assert opening.context["turn"] == 0 and opening.context["dialogue"] == []
    assert set(opening.context["preferences"]) == {"Restaurants", "Hotels", "Events"}
    assert "one or two sentences" in opening.messages[0].content
    turns = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "how can I help?"}]
    later = user_request(ctx, turns, "u")
    assert later.context["turn"] == 1 and later.context["dialogue"] == turns
    assert "ASSISTANT: how can I help?" in later.messages[0].content
    assert "TERMINATE" in later.messages[0].content


@pytest.mark.parametrize(("text", "clean", "done"), [
    ("Thanks! TERMINATE", "Thanks!", True),
    ("Perfect, thank you. 'TERMINATE'", "Perfect, thank you.", True),
    ("Great [TERMINATE].", "Great", True),
    ("TERMINATE", "", True),
    ("Not yet, what about Friday?", "Not yet, what about Friday?", False),
    ("please terminate my subscription", "please terminate my subscription", False),
])
def test_split_terminate(text, clean, done):
    assert split_terminate(text) == (clean, done)


# -- the loop --------------------------------------------------------------------------------------


def stored(dialogue: Any) -> dict[str, Any]:
    """A simulated dialogue as the run store keeps it."""
    return asyncio.run(dialogue).to_json()


def test_terminate_is_removed_and_the_assistant_answers_once_more(bench):
    client, backend = client_for(polite)
    record = stored(simulate_dialogue(client, ctx_of(bench), AssistantSetting.parse("base"),
                                           user_model="u", assistant="a"))
    assert record["status"] == "terminated" and record["error"] is None
    assert [t["role"] for t in record["turns"]] == ["user", "assistant"] * 3
    assert record["turns"][4]["content"] == "Thanks, all done."
    assert record["turns"][5]["content"] == "Here you go."
    assert record["n_turns"] == 3
    assert record["usage"]["input_tokens"] == 60
    assert sum(backend.calls.values()) == 6


@pytest.mark.parametrize(("index", "cap"), [(0, 20), (3, 30)])
def test_turn_cap_by_task_type(bench, index, cap):
    client, _ = client_for(lambda r: "ok" if r.kind == CallKind.ASSISTANT_TURN else "Go on.")
    ctx = ctx_of(bench, index)
    record = stored(simulate_dialogue(client, ctx, AssistantSetting(), user_model="u",
                                           assistant="a"))
    assert record["status"] == "turn_cap"
    assert record["n_turns"] == cap and len(record["turns"]) == 2 * cap


def test_terminate_in_the_opening_does_not_end_the_dialogue(bench):
    def answer(request: Request) -> str:
        if request.kind == CallKind.ASSISTANT_TURN:
            return "Sure."
        return "Hi, help me TERMINATE" if request.context["turn"] == 0 else "Done, thanks TERMINATE"

    client, _ = client_for(answer)
    record = stored(simulate_dialogue(client, ctx_of(bench), AssistantSetting(), user_model="u",
                                           assistant="a"))
    assert record["turns"][0]["content"] == "Hi, help me"
    assert record["status"] == "terminated" and record["n_turns"] == 2


# -- the runner ------------------------------------------------------------------------------------


def test_rerun_skips_finished_dialogues(bench, tmp_path):
    client, backend = client_for(polite)
    first = run_simulation(bench, tmp_path, client, SimulationConfig(settings=["base", "base+I"]))
    assert first.planned == 24 and first.statuses == {"terminated": 24}
    calls = sum(backend.calls.values())
    again = run_simulation(bench, tmp_path, client, SimulationConfig(settings=["base", "base+I"]))
    assert again.planned == 0 and again.already_done == 24
    assert sum(backend.calls.values()) == calls
    frame = dialogue_frame(tmp_path)
    assert len(frame) == 24 and frame["id"].is_unique
    assert set(frame["assistant_setting"]) == {"base", "base+I"}


def test_a_failing_dialogue_is_stored_as_error_and_retried_on_demand(bench, tmp_path):
    broken = {"on": True}

    def answer(request: Request) -> str:
        domains = request.context.get("domains") or request.context["task"]["domains"]
        if broken["on"] and domains == ["Movies"] and request.kind == CallKind.ASSISTANT_TURN:
            raise RetryableError("server overloaded", status=529)
        return polite(request)

    client, _ = client_for(answer)
    summary = run_simulation(bench, tmp_path, client)
    assert summary.statuses == {"terminated": 9, "error": 3} and summary.errors == 3
    assert len(summary.first_errors) == 3 and all(
        "SD-Movies-task-1 (base): RetriesExhaustedError" in e for e in summary.first_errors)
    errors = [r for r in RunStore(tmp_path).records(Dialogue) if r["status"] == "error"]
    assert {r["task_id"] for r in errors} == {"SD-Movies-task-1"}
    assert all("529" in r["error"] or "overloaded" in r["error"] for r in errors)
    assert run_simulation(bench, tmp_path, client).planned == 0
    broken["on"] = False
    retried = run_simulation(bench, tmp_path, client, SimulationConfig(retry_errors=True))
    assert retried.planned == 3 and retried.statuses == {"terminated": 3}
    records = RunStore(tmp_path).records(Dialogue)
    assert len(records) == 12 and all(r["status"] == "terminated" for r in records)


def test_an_authentication_failure_stops_the_run(bench, tmp_path):
    def answer(request: Request) -> str:
        raise FatalError("invalid x-api-key: set ANTHROPIC_API_KEY", status=401)

    client, _ = client_for(answer)
    with pytest.raises(FatalError, match="ANTHROPIC_API_KEY"):
        run_simulation(bench, tmp_path, client)
    assert RunStore(tmp_path).records(Dialogue) == []


def test_plan_rejects_unknown_task_types(bench, tmp_path):
    with pytest.raises(ValueError, match="task type"):
        config = SimulationConfig(task_types=["XD"])
        plan_dialogues(bench, RunStore(tmp_path), config, user=user_of(config, "offline"))


def test_offline_runs_repeat_exactly_for_a_seed(bench, tmp_path):
    runs = []
    for name, seed in (("a", 0), ("b", 0), ("c", 7)):
        client = LLMClient("offline", progress=False, seed=seed)
        run_simulation(bench, tmp_path / name, client, SimulationConfig(settings=["base", "base+I"]))
        runs.append(sorted(RunStore(tmp_path / name).records(Dialogue), key=lambda r: r["id"]))
    assert runs[0] == runs[1]
    assert [r["turns"] for r in runs[0]] != [r["turns"] for r in runs[2]]
    assert {r["status"] for r in runs[0]} == {"terminated"}
    assert all(r["backend"] == "offline" for r in runs[0])
