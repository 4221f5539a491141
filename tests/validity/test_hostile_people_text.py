"""A person's text kept whole (issue 40, part 6): a person ends a dialogue with the End button
(`PersonDialogue.end`), never with a word, so TERMINATE in what they type is stored as typed and ends
nothing; text that cannot be stored as UTF-8 is refused with one line and the dialogue goes on. The
user agent's TERMINATE still ends a simulated dialogue (also `tests/simulation/test_simulation.py`,
`test_terminate_is_removed_and_the_assistant_answers_once_more`)."""

from __future__ import annotations

import asyncio

import pytest
from support.synthetic_store import build_benchmark

from personalens_utils.assistants import Assistant, resolve_assistant
from personalens_utils.explore import play_user
from personalens_utils.llm import CallKind, Request, Response, Usage
from personalens_utils.llm.client import Clients
from personalens_utils.prompt_sets import ScenarioContext
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import AssistantSetting, simulate_dialogue
from personalens_utils.simulation.loop import EndFlagged
from personalens_utils.validity import PersonError, start_dialogue

SCENARIO = "user1/SD-Movies-task-1"
OPENING = "Hi! Please don't TERMINATE my old alarm, but find me a film for tonight."
MIDDLE = "TERMINATE is a word I use a lot. I like jazz and drama. TERMINATE"
CLOSING = "Thanks, you may TERMINATE the search now."
SURROGATE = "I like jazz \udcff and drama"


@pytest.fixture(scope="module")
def benchmark():
    return build_benchmark(3)


@pytest.fixture
def assistant() -> Assistant:
    return resolve_assistant("ref-dialogue-only", Clients())


def _said(turns) -> list[str]:
    return [t["content"] for t in turns if t["role"] == "user"]


def test_terminate_in_a_persons_text_is_kept_and_only_end_ends_the_dialogue(tmp_path, benchmark, assistant):
    store = RunStore(tmp_path / "run")
    dialogue = start_dialogue(benchmark, store, SCENARIO, "hana", assistant)
    dialogue.say(OPENING)
    dialogue.say(MIDDLE)
    assert not dialogue.done and not store.path(Dialogue).exists()  # the word ended nothing
    assert _said(dialogue.turns) == [OPENING, MIDDLE] and dialogue.turns[-1]["role"] == "assistant"
    assert "TERMINATE" in dialogue.request.context["dialogue"][0]["content"]  # the next prompt shows it

    dialogue.end(CLOSING)
    (record,) = store.read(Dialogue)
    assert record.status == "terminated" and record.n_turns == 3 and record.turns[-1].role == "assistant"
    assert _said([t.as_dict() for t in record.turns]) == [OPENING, MIDDLE, CLOSING]  # stored as typed


def test_a_lone_surrogate_is_refused_in_one_line_and_the_dialogue_goes_on(tmp_path, benchmark, assistant):
    store = RunStore(tmp_path / "run")
    dialogue = start_dialogue(benchmark, store, SCENARIO, "ivan", assistant)
    with pytest.raises(PersonError) as refused:
        dialogue.say(SURROGATE)
    line = str(refused.value)
    assert "\n" not in line and "UTF-8" in line and "surrogate" in line
    assert f"character {SURROGATE.index(chr(0xDCFF)) + 1} " in line  # where to look
    assert dialogue.failure is None and not dialogue.done and dialogue.opening  # still open, nothing sent

    opening = SURROGATE.replace("\udcff ", "")
    dialogue.say(opening)
    with pytest.raises(PersonError, match="UTF-8"):
        dialogue.end("bye \ud800")
    dialogue.end("Thanks!")
    (record,) = store.read(Dialogue)
    assert record.status == "terminated"
    assert _said([t.as_dict() for t in record.turns]) == [opening, "Thanks!"]  # the opening kept


def test_the_widget_shows_the_surrogate_refusal_and_keeps_the_text(tmp_path, benchmark):
    store = RunStore(tmp_path / "run")
    widget = play_user(store, SCENARIO, person="jo", assistant="ref-dialogue-only", benchmark=benchmark)
    widget.message.value = SURROGATE
    widget.send.click()
    assert "UTF-8" in widget.status.value and "pl-error" in widget.status.value
    assert widget.message.value == SURROGATE and not widget.send.disabled
    widget.message.value = OPENING
    widget.send.click()
    widget.finish.click()
    (record,) = store.read(Dialogue)
    assert _said([t.as_dict() for t in record.turns]) == [OPENING, ""] and record.status == "terminated"


class ScriptedUser:
    """A user role answering a fixed script, as a model (plain responses, ended by their text) or as
    a person would (`EndFlagged`, ended only by the flag)."""

    backend_name = "script"

    def __init__(self, script: list[str], *, flagged: bool, ends_at: int | None = None):
        self.script, self.flagged, self.ends_at = script, flagged, ends_at

    async def acomplete(self, request: Request, **_: object) -> Response:
        assert request.kind == CallKind.USER_TURN
        turn = request.context["turn"]
        text = self.script[turn]
        if self.flagged:
            return EndFlagged(text=text, usage=Usage(), backend="script", model="u", latency_s=0.0,
                              ends=turn == self.ends_at)
        return Response(text=text, usage=Usage(), backend="script", model="u", latency_s=0.0)


def _run(user: ScriptedUser, benchmark, assistant: Assistant) -> Dialogue:
    scenario = benchmark.scenario(SCENARIO)
    ctx = ScenarioContext.of(scenario, benchmark.user(scenario.user_id))
    return asyncio.run(simulate_dialogue(user, ctx, AssistantSetting(), user_model="u",
                                         assistant=assistant, max_turns=3))


def test_the_user_agents_terminate_still_ends_and_only_a_flagged_message_is_kept_whole(benchmark, assistant):
    script = ["Help me find a film.", "Something calm.", "Thanks! TERMINATE"]
    model = _run(ScriptedUser(script, flagged=False), benchmark, assistant)
    assert model.status == "terminated" and _said([t.as_dict() for t in model.turns])[-1] == "Thanks!"

    unended = _run(ScriptedUser(script, flagged=True), benchmark, assistant)
    assert unended.status == "turn_cap" and _said([t.as_dict() for t in unended.turns]) == script

    ended = _run(ScriptedUser(script, flagged=True, ends_at=1), benchmark, assistant)
    assert ended.status == "terminated" and _said([t.as_dict() for t in ended.turns]) == script[:2]
