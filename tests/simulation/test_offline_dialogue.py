"""The offline dialogue responders: how the simulated user and assistant behave, turn by turn."""

from __future__ import annotations

import asyncio
import random
import re

import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import load_benchmark
from personalens_utils.llm import CallKind, Request
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.reference.schema import load_schema
from personalens_utils.simulation import (
    AssistantSetting,
    ScenarioContext,
    assistant_request,
    simulate_dialogue,
    user_request,
)
from personalens_utils.simulation.offline import assistant_turn, user_turn

SENTENCE = re.compile(r"(?<=[.!?])\s+")


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark()


def ctx_of(bench, task_id: str, user_id: int = 0) -> ScenarioContext:
    return ScenarioContext.of(bench.scenario(f"user{user_id}/{task_id}"), bench.user(user_id))


def relevant_values(ctx: ScenarioContext) -> dict[tuple[str, str], list[str]]:
    schema = load_schema()
    out = {}
    for name in ctx.scenario.relevant_preferences:
        for pref in schema.resolve_preference(name, ctx.scenario.domains):
            value = ctx.preferences.get(pref.domain, {}).get(pref.name)
            if value:
                out[(pref.domain, pref.name)] = value if isinstance(value, list) else [value]
    return out


def user_says(ctx: ScenarioContext, turns: list[dict[str, str]], seed: int = 0) -> str:
    return user_turn(user_request(ctx, turns, "u"), random.Random(seed))


def assistant_says(ctx: ScenarioContext, setting: str, turns: list[dict[str, str]], seed: int = 0) -> str:
    return assistant_turn(assistant_request(AssistantSetting.parse(setting), ctx, turns, "a"),
                          random.Random(seed))


def proactive_share(record: dict, ctx: ScenarioContext) -> float:
    """Share of the relevant preferences whose value the assistant used before the user said it."""
    texts = [(t["role"], t["content"].lower()) for t in record["turns"]]
    hits = 0
    items = relevant_values(ctx)
    for values in items.values():
        def first(role, values=values):
            return next((i for i, (r, text) in enumerate(texts)
                         if r == role and any(v.lower() in text for v in values)), None)
        by_assistant, by_user = first("assistant"), first("user")
        hits += by_assistant is not None and (by_user is None or by_assistant < by_user)
    return hits / len(items) if items else 0.0


# -- the simulated user ----------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", ["SD-Alarm-task-1", "SD-Movies-task-1", "MD-task-1"])
@pytest.mark.parametrize("seed", range(4))
def test_opening_is_short_and_states_no_preference(bench, task_id, seed):
    ctx = ctx_of(bench, task_id)
    opening = user_says(ctx, [], seed)
    assert 1 <= len(SENTENCE.split(opening)) <= 2
    assert "TERMINATE" not in opening
    for values in relevant_values(ctx).values():
        assert not any(v.lower() in opening.lower() for v in values), (opening, values)


def test_user_answers_what_the_assistant_asks_with_the_values_verbatim(bench):
    ctx = ctx_of(bench, "SD-Alarm-task-1")
    turns = [{"role": "user", "content": "Hi, can you set an alarm?"},
             {"role": "assistant",
              "content": "Sure. What would you like for the alarm time and alarm sound?"}]
    reply = user_says(ctx, turns)
    prefs = ctx.preferences["Alarm"]
    assert prefs["Alarm Time Preference"] in reply and prefs["Alarm Sound Preference"] in reply
    assert prefs["Alarm Recurring Preference"] not in reply  # gradual: only what was asked
    assert "TERMINATE" not in reply and len(SENTENCE.split(reply)) <= 3


def test_user_corrects_a_wrong_value(bench):
    ctx = ctx_of(bench, "SD-Alarm-task-1")
    prefs = ctx.preferences["Alarm"]
    wrong = next(o for o in load_schema().preference("Alarm", "Alarm Sound Preference").options
                 if o != prefs["Alarm Sound Preference"])
    turns = [{"role": "user", "content": "Hi, can you set an alarm?"},
             {"role": "assistant",
              "content": f"Done: {prefs['Alarm Time Preference']} for the alarm time and {wrong} for the "
                         "alarm sound."}]
    reply = user_says(ctx, turns)
    assert prefs["Alarm Sound Preference"] in reply
    assert reply.startswith(("Actually", "Hmm"))


def test_user_volunteers_a_missing_preference_when_not_asked(bench):
    ctx = ctx_of(bench, "SD-Restaurants-task-1")
    turns = [{"role": "user", "content": "Can you book dinner?"},
             {"role": "assistant", "content": "Sure, I booked a table for you."}]
    reply = user_says(ctx, turns)
    revealed = [k for k, values in relevant_values(ctx).items() if any(v in reply for v in values)]
    assert 1 <= len(revealed) <= 2


def test_user_is_satisfied_once_every_relevant_value_was_applied(bench):
    ctx = ctx_of(bench, "SD-Movies-task-1")
    applied = "; ".join(", ".join(v) for v in relevant_values(ctx).values())
    done = [{"role": "user", "content": "Find me a movie?"},
            {"role": "assistant", "content": f"All booked with {applied}."}]
    assert user_says(ctx, done).endswith("TERMINATE")
    asking = [done[0], {"role": "assistant", "content": f"I used {applied}. Anything for the seat type?"}]
    reply = user_says(ctx, asking)
    assert "TERMINATE" not in reply and "go ahead" in reply


def test_user_gives_up_after_stating_a_preference_twice_in_vain(bench):
    ctx = ctx_of(bench, "SD-Alarm-task-1")
    turns = [{"role": "user", "content": "Set an alarm please."}]
    for _ in range(3):
        turns.append({"role": "assistant", "content": "What would you like for the alarm time?"})
        reply = user_says(ctx, turns)
        turns.append({"role": "user", "content": reply})
    assert turns[-1]["content"].endswith("TERMINATE")
    assert "TERMINATE" not in turns[-3]["content"]


def test_user_turns_are_deterministic_per_seed(bench):
    ctx = ctx_of(bench, "MD-task-1")
    backend = OfflineBackend(seed=3)
    request = user_request(ctx, [], "u")
    assert backend.respond(request, "u").text == backend.respond(request, "u").text
    openings = {OfflineBackend(seed=s).respond(request, "u").text for s in range(12)}
    assert len(openings) > 1


# -- the simulated assistant -----------------------------------------------------------------------


def test_assistant_without_context_asks_and_applies_nothing_unasked(bench):
    ctx = ctx_of(bench, "SD-Alarm-task-1")
    reply = assistant_says(ctx, "base", [{"role": "user", "content": "Hi, can you set an alarm?"}])
    assert reply.endswith("?") and "alarm" in reply.lower()
    for values in ctx.preferences["Alarm"].values():
        assert str(values) not in reply


def test_assistant_with_history_applies_values_found_there(bench):
    ctx = ctx_of(bench, "SD-Alarm-task-1")
    turns = [{"role": "user", "content": "Hi, can you set an alarm?"}]
    reply = assistant_says(ctx, "base+I", turns)
    prefs = ctx.preferences["Alarm"]
    summary = ctx.interactions["Alarm"]
    in_summary = [v for v in prefs.values() if v in summary]
    assert in_summary and all(v in reply for v in in_summary)
    assert "past requests" in reply or "asked me before" in reply


def test_assistant_only_uses_the_context_its_setting_gives(bench):
    ctx = ctx_of(bench, "SD-Alarm-task-1")
    turns = [{"role": "user", "content": "Hi, can you set an alarm?"}]
    request = assistant_request(AssistantSetting.parse("base"), ctx, turns, "a")
    leaked = Request(kind=CallKind.ASSISTANT_TURN, system=request.system + ctx.interactions["Alarm"],
                     messages=request.messages, context=request.context)
    assert assistant_turn(leaked, random.Random(0)) == assistant_turn(request, random.Random(0))
    situated = assistant_says(ctx, "base+S", turns)
    profiled = assistant_says(ctx, "base+D", turns)
    assert "smartphone" in situated.lower() and "France" in profiled


def test_assistant_applies_what_the_user_states(bench):
    ctx = ctx_of(bench, "SD-Alarm-task-1")
    turns = [{"role": "user", "content": "Hi, can you set an alarm?"},
             {"role": "assistant", "content": "What would you like for the alarm time?"},
             {"role": "user", "content": "For the alarm time, I'd like 6:30 AM, please."}]
    reply = assistant_says(ctx, "vanilla", turns)
    assert "6:30 AM for the alarm time" in reply
    assert reply.count("?") == 1  # vanilla asks one thing at a time


def test_assistant_finishes_when_told_to_go_ahead_and_says_goodbye_after(bench):
    ctx = ctx_of(bench, "SD-Movies-task-1")
    turns = [{"role": "user", "content": "Find me a movie"},
             {"role": "assistant", "content": "What would you like for the preferred genres?"},
             {"role": "user",
              "content": "That covers everything I need, so please go ahead and finalize it."}]
    done = assistant_says(ctx, "base", turns)
    assert "All set" in done and "?" not in done
    turns += [{"role": "assistant", "content": done}, {"role": "user", "content": "Perfect, thanks!"}]
    bye = assistant_says(ctx, "base", turns)
    assert "All set" not in bye and "?" not in bye


# -- whole dialogues -------------------------------------------------------------------------------


def run_dialogue(ctx: ScenarioContext, setting: str, seed: int = 0) -> dict:
    """One offline dialogue as the run store keeps it."""
    client = LLMClient("offline", progress=False, seed=seed)
    return asyncio.run(simulate_dialogue(client, ctx, AssistantSetting.parse(setting),
                                         user_model="u", assistant="a")).to_json()


@pytest.mark.parametrize("task_id", ["SD-Alarm-task-1", "SD-Restaurants-task-1", "MD-task-1"])
def test_dialogues_end_with_every_relevant_value_applied(bench, task_id):
    for user_id in bench.users:
        ctx = ctx_of(bench, task_id, user_id)
        for setting in ("vanilla", "base", "base+I", "base+all"):
            record = run_dialogue(ctx, setting)
            assert record["status"] == "terminated", record["turns"]
            assistant_text = " ".join(t["content"] for t in record["turns"] if t["role"] == "assistant")
            for values in relevant_values(ctx).values():
                assert any(v in assistant_text for v in values)
            for turn in record["turns"][2::2]:
                assert 1 <= len(SENTENCE.split(turn["content"])) <= 3


def test_more_context_means_more_proactive_personalization_on_official_users(official_data):
    bench = load_benchmark(official_data, users=[7, 66, 132, 139, 207])
    shares: dict[str, list[float]] = {s: [] for s in ("base", "base+D", "base+S", "base+I", "base+all")}
    turns: dict[str, list[int]] = {s: [] for s in shares}
    for scenario in list(bench.iter_scenarios())[::3]:
        ctx = ScenarioContext.of(scenario, bench.user(scenario.user_id))
        for setting in shares:
            record = run_dialogue(ctx, setting)
            assert record["status"] == "terminated"
            shares[setting].append(proactive_share(record, ctx))
            turns[setting].append(record["n_turns"])
    mean = {s: sum(v) / len(v) for s, v in shares.items()}
    assert mean["base"] < 0.05
    assert mean["base+I"] > mean["base"] + 0.3
    assert mean["base+all"] >= mean["base+I"] - 0.02
    assert mean["base+D"] < mean["base+I"] and mean["base+S"] < mean["base+I"]
    assert sum(turns["base+I"]) < sum(turns["base"])


def test_user_reads_applied_values_as_whole_words_like_the_judge():
    from personalens_utils.simulation.offline import _Item

    pref = load_schema().domain("Travel").preferences[0]
    item = _Item(pref, "destination", ("Europe", "1-2 weeks"))
    assert not item.seen_in("I picked European cities for you.")
    assert item.seen_in("I picked Europe.") and item.seen_in("Set for 1-2 weeks, as you like.")
