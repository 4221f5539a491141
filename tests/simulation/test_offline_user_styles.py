"""The offline user agent's styles (issue 41): reticent, terse and impatient beside the paper's
cooperative user, driven turn by turn against the offline reference assistants."""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import replace
from statistics import mean

import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants.reference_assistants import VIEWS
from personalens_utils.base.words import words_of
from personalens_utils.judging.offline import preference_use
from personalens_utils.prompt_templates.user_styles import STYLE_KEY, USER_STYLES, UserStyleError
from personalens_utils.simulation import (
    TURN_CAPS,
    AssistantSetting,
    ScenarioContext,
    assistant_request,
    user_request,
)
from personalens_utils.simulation.offline import _PLAYED, DEFER, _topics, assistant_turn, user_turn

COOPERATIVE_DIGEST = "92dfc60554675d581035fd315e7731fe8ddfd55c12622496cf569766d6ea3745"
"""Transcripts of `simulate` with no style, for every tiny scenario and three reference assistants,
frozen from the code before styles existed: the cooperative user must not change."""
SENTENCE = re.compile(r"(?<=[.!?])\s+")


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark()


def contexts(bench) -> list[ScenarioContext]:
    return [ScenarioContext.of(s, bench.user(s.user_id)) for s in bench.iter_scenarios()]


def user_says(ctx: ScenarioContext, turns: list[dict[str, str]], style: str | None, seed: int = 0) -> str:
    request = user_request(ctx, turns, "u")
    if style is not None:
        request = replace(request, context={**request.context, STYLE_KEY: style})
    return user_turn(request, random.Random(f"{seed}:user:{len(turns)}"))


def simulate(ctx: ScenarioContext, assistant: str, style: str | None, seed: int = 0,
             setting: str = "base") -> list[dict[str, str]]:
    """One dialogue of the offline user and a reference assistant, as the simulation loop runs it."""
    turns: list[dict[str, str]] = []
    for index in range(TURN_CAPS[ctx.scenario.task_type]):
        request = user_request(ctx, turns, "u")
        if style is not None:
            request = replace(request, context={**request.context, STYLE_KEY: style})
        said = user_turn(request, random.Random(f"{seed}:user:{index}"))
        turns.append({"role": "user", "content": said})
        reply = assistant_request(AssistantSetting.parse(setting), ctx, turns, "a")
        reply = replace(reply, context={**reply.context, **VIEWS[assistant].context()})
        turns.append({"role": "assistant",
                      "content": assistant_turn(reply, random.Random(f"{seed}:assistant:{index}"))})
        if "TERMINATE" in said:
            break
    return turns


def applied_share(ctx: ScenarioContext, turns: list[dict[str, str]]) -> float:
    """Share of the task's relevant preferences the assistant applied, as the offline judge reads it."""
    context = {"dialogue": turns, "task": ctx.scenario.task_context(), "preferences": ctx.preferences}
    use = preference_use(context)
    return (len(use.proactive) + len(use.reactive)) / use.total


def mean_share(bench, assistant: str, style: str, setting: str = "base") -> float:
    return mean(applied_share(ctx, simulate(ctx, assistant, style, seed, setting))
                for ctx in contexts(bench) for seed in range(3))


def test_cooperative_user_is_unchanged(bench):
    for style in (None, "cooperative"):
        digest = hashlib.sha256()
        for ctx in contexts(bench):
            for assistant in ("ref-dialogue-only", "ref-past-interactions", "ref-all-preferences"):
                digest.update(json.dumps(simulate(ctx, assistant, style)).encode())
        assert digest.hexdigest() == COOPERATIVE_DIGEST, style


def test_every_style_the_kit_defines_is_played_offline():
    assert set(_PLAYED) == set(USER_STYLES)


def test_an_unknown_style_is_named_in_the_error(bench):
    with pytest.raises(UserStyleError, match="'chatty'"):
        user_says(contexts(bench)[0], [], "chatty")


@pytest.mark.parametrize("setting", ["base", "vanilla"])
@pytest.mark.parametrize("assistant", ["ref-dialogue-only", "ref-past-interactions", "ref-ignores-context"])
def test_reticent_states_a_preference_only_when_asked_or_contradicted(bench, assistant, setting):
    for ctx in contexts(bench):
        topics = dict(_topics(tuple(ctx.scenario.domains)))
        turns = simulate(ctx, assistant, "reticent", setting=setting)
        assert "TERMINATE" not in turns[0]["content"]
        for before, message in zip(turns[1::2], turns[2::2], strict=False):
            for pref, topic in topics.items():
                value = ctx.preferences[pref.domain][pref.name]
                values = value if isinstance(value, list) else [value]
                if not any(words_of(v) in words_of(message["content"]) for v in values):
                    continue
                prompted = [s for s in SENTENCE.split(before["content"]) if topic in s.lower()
                            and (s.rstrip().endswith("?") or not any(v.lower() in s.lower() for v in values))]
                assert prompted, (before["content"], message["content"], topic)


def test_reticent_accepts_a_done_assistant_instead_of_volunteering(bench):
    ctx = next(c for c in contexts(bench) if c.scenario.task_id == "SD-Restaurants-task-1")
    turns = [{"role": "user", "content": "Can you book dinner?"},
             {"role": "assistant", "content": "All set: I booked a table for you."}]
    assert user_says(ctx, turns, "reticent").endswith("TERMINATE")
    assert "TERMINATE" not in user_says(ctx, turns, "cooperative")
    cuisine = ctx.preferences["Restaurants"]["Cuisine Preference"]
    wrong = "Italian" if "Italian" not in cuisine else "Mexican"
    contradicted = [turns[0], {"role": "assistant", "content": f"I've set {wrong} for the cuisine."}]
    named_only = [turns[0], {"role": "assistant", "content": "I'll look at the cuisine next."}]
    assert all(c in user_says(ctx, contradicted, "reticent") for c in cuisine)
    assert not any(c in user_says(ctx, named_only, "reticent") for c in cuisine)
    asked_nothing = [turns[0], {"role": "assistant", "content": "Shall I carry on?"}]
    reply = user_says(ctx, asked_nothing, "reticent")
    assert reply == DEFER  # asked nothing its task needs: it lets the assistant finish, without ending


def test_terse_messages_are_shorter_than_cooperative_ones(bench):
    def words(style: str) -> float:
        return mean(len(t["content"].split()) for ctx in contexts(bench) for seed in range(3)
                    for t in simulate(ctx, "ref-dialogue-only", style, seed)[2::2])
    assert words("terse") < 0.6 * words("cooperative")
    for ctx in contexts(bench):
        turns = simulate(ctx, "ref-dialogue-only", "terse")
        assert turns[-2]["content"] in ("Thanks. TERMINATE", "Never mind. TERMINATE")
        assert applied_share(ctx, turns) == 1.0  # the assistant still reads every terse answer


def test_impatient_leaves_after_two_assistant_turns_without_progress(bench):
    ctx = next(c for c in contexts(bench) if c.scenario.task_id == "SD-Alarm-task-1")
    turns = simulate(ctx, "ref-ignores-context", "impatient")
    assert len(turns) == 6 and turns[-2]["content"].endswith("TERMINATE")
    cooperative = simulate(ctx, "ref-ignores-context", "cooperative")
    assert len(cooperative) > len(turns)
    stalled = [{"role": "user", "content": "Set an alarm please."},
               {"role": "assistant", "content": "Sure. Anything else?"}]
    assert "TERMINATE" not in user_says(ctx, stalled, "impatient")
    stalled += [{"role": "user", "content": "Also, my alarm sound would be Beep."},
                {"role": "assistant", "content": "Okay, still working on it."}]
    assert user_says(ctx, stalled, "impatient").endswith("TERMINATE")


def test_reticent_leaves_the_all_preferences_assistant_unaffected(bench):
    assert mean_share(bench, "ref-all-preferences", "reticent") == mean_share(
        bench, "ref-all-preferences", "cooperative") == 1.0
    for setting in ("base", "vanilla"):
        assert mean_share(bench, "ref-dialogue-only", "reticent", setting) <= mean_share(
            bench, "ref-dialogue-only", "cooperative", setting)


def test_reticent_lowers_dialogue_only_personalization_by_a_clear_margin(bench):
    assert mean_share(bench, "ref-dialogue-only", "reticent") < mean_share(
        bench, "ref-dialogue-only", "cooperative") - 0.2
