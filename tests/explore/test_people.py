"""A person as the user (issue 30): the widget driven through its Python objects, the loop's rules for a
person, the stored record judged and explored like a simulated one, and the fidelity table comparing
people's dialogues with the simulator's on an offline store."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support.latex_page import compile_problems, needs_tex
from support.synthetic_store import build_benchmark

from personalens_utils.assistants import PythonOptions, resolve_assistant
from personalens_utils.explore import explore, play_user
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm import LLMClient
from personalens_utils.llm.client import Clients
from personalens_utils.measures import bootstrap, stats
from personalens_utils.measures.scores import load_scores
from personalens_utils.measures.stats import MIN_CLUSTERS
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.run_card import read_card
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation
from personalens_utils.validity import (
    HUMAN,
    FidelityError,
    PersonError,
    fidelity_frame,
    fidelity_table,
    start_dialogue,
)

SCENARIO = "user1/SD-Movies-task-1"
SCRIPT = ("Hi, could you find me a movie for tonight?", "I like jazz and drama, nothing too loud.")
CLOSING = "Perfect, thanks!"
DIMENSIONS = ["task_completion", "personalization"]


@pytest.fixture(scope="module")
def benchmark():
    return build_benchmark(3)


@pytest.fixture
def assistant():
    return resolve_assistant("ref-dialogue-only", Clients())


def _judge(store: RunStore, benchmark):
    return run_judging(store, LLMClient("offline"), benchmark_contexts(benchmark),
                       JudgingConfig(dimensions=DIMENSIONS))


def _users(turns) -> list[str]:
    return [t["content"] for t in turns if t["role"] == "user"]


def test_a_person_plays_three_turns_in_the_widget_and_the_dialogue_is_stored_judged_and_explored(
        tmp_path, benchmark):
    store = RunStore(tmp_path / "run")
    widget = play_user(store, SCENARIO, person="alice", assistant="ref-dialogue-only", benchmark=benchmark)
    brief = widget.brief.value
    assert "jazz, drama" in brief and "You want help with SD-Movies-task-1." in brief  # profile and task
    assert "Evening" in brief and "User 1 often asks about movies" in brief  # situation, past requests
    assert "TERMINATE" in brief  # the user agent's prompt itself, folded
    assert widget.finish.disabled and not widget.send.disabled  # the opening cannot end it

    for number, text in enumerate(SCRIPT, start=1):
        widget.message.value = text
        widget.send.click()
        assert widget.message.value == ""
        assert widget.page.value.count("pl-turn-assistant") == number  # the reply came and is shown
        turns = widget.dialogue.turns
        assert len(_users(turns)) == number and turns[-1]["role"] == "assistant"
    assert not widget.finish.disabled and not store.path(Dialogue).exists()  # nothing stored mid-dialogue
    widget.message.value = CLOSING
    widget.finish.click()

    (record,) = store.read(Dialogue)
    assert (record.user_model, record.user_backend, record.user_model_id) == ("human:alice", HUMAN,
                                                                               "human:alice")
    assert record.status == "terminated" and record.n_turns == 3 and record.made_offline
    assert [t.content for t in record.turns if t.role == "user"] == [*SCRIPT, CLOSING]  # stored as typed
    assert record.turns[-1].role == "assistant"  # answered once after the ending, as the loop does
    assert record.assistant_model == "ref-dialogue-only" and record.sample == 0
    assert record.id in widget.status.value and widget.send.disabled and widget.finish.disabled

    report = _judge(store, benchmark)
    assert report.stored == 2
    judged = {j.dimension: j for j in store.read(Judgment)}
    assert set(judged) == set(DIMENSIONS) and all(j.dialogue_id == record.id for j in judged.values())

    view = explore(store, benchmark=benchmark)
    view.set_filters(judge_model=judged["personalization"].judge_model)
    view.select(record.id)
    page = view.page.value
    assert all(text in page for text in (*SCRIPT, CLOSING)) and "human:alice" in page
    assert judged["personalization"].explanation.splitlines()[0][:40] in page


def test_what_a_person_cannot_do_is_refused_and_nothing_typed_is_lost(tmp_path, benchmark):
    store = RunStore(tmp_path / "run")
    widget = play_user(store, SCENARIO, person="bob", assistant="ref-dialogue-only", benchmark=benchmark)
    widget.message.value = "   "
    widget.send.click()
    assert "empty" in widget.status.value and "pl-error" in widget.status.value
    with pytest.raises(PersonError, match="opening message cannot end"):
        widget.dialogue.end("bye")
    widget.message.value = SCRIPT[0]
    widget.send.click()
    widget.finish.click()  # an empty closing message: the button alone ends it
    (record,) = store.read(Dialogue)
    assert _users([t.as_dict() for t in record.turns]) == [SCRIPT[0], ""] and record.status == "terminated"
    with pytest.raises(PersonError, match="has ended"):
        widget.dialogue.say("one more")
    for name in ("", "a b", "x" * 41, "../etc"):
        with pytest.raises(PersonError, match="short name"):
            play_user(store, SCENARIO, person=name, assistant="ref-dialogue-only", benchmark=benchmark)
    with pytest.raises(PersonError, match="not in the benchmark"):
        play_user(store, "user9/SD-Movies-task-1", person="bob", assistant="ref-dialogue-only",
                  benchmark=benchmark)
    assert len(store.read(Dialogue)) == 1


def test_an_assistant_that_fails_stops_the_dialogue_or_leaves_an_error_record_with_the_turns(
        tmp_path, benchmark):
    store = RunStore(tmp_path / "run")
    spec = "python:support.assistants:Raises"
    widget = play_user(store, SCENARIO, person="gus", assistant=spec, benchmark=benchmark)
    widget.message.value = SCRIPT[0]
    widget.send.click()  # the run's default: a failing reply stops it, shown in the widget
    assert "the notes index is empty" in widget.status.value and "pl-error" in widget.status.value
    assert widget.send.disabled and widget.finish.disabled and widget.message.value == SCRIPT[0]
    with pytest.raises(PersonError, match="stopped"):
        widget.dialogue.say(SCRIPT[1])
    assert not store.path(Dialogue).exists()

    recording = resolve_assistant(spec, Clients(), options=PythonOptions(on_error="record"))
    dialogue = start_dialogue(benchmark, store, SCENARIO, "gus", recording)
    dialogue.say(SCRIPT[0])
    (record,) = store.read(Dialogue)
    assert dialogue.record == record and record.status == "error" and "notes index" in record.error
    assert [t.content for t in record.turns] == [SCRIPT[0]]  # what the person typed is kept


def test_the_turn_cap_ends_a_persons_dialogue_as_it_ends_a_simulated_one(tmp_path, benchmark, assistant):
    store = RunStore(tmp_path / "run")
    dialogue = start_dialogue(benchmark, store, SCENARIO, "carol", assistant, max_turns=2)
    dialogue.say(SCRIPT[0])
    assert not dialogue.done
    dialogue.say(SCRIPT[1])
    assert dialogue.done and dialogue.record.status == "turn_cap" and dialogue.record.n_turns == 2
    assert store.read(Dialogue) == [dialogue.record]


def test_people_on_one_scenario_are_samples_of_one_run_and_score_together(tmp_path, benchmark, assistant):
    store = RunStore(tmp_path / "run")
    both = [start_dialogue(benchmark, store, SCENARIO, name, assistant) for name in ("dana", "erik")]
    for dialogue in both:  # two widgets open at once: each ends after the other started
        dialogue.say(SCRIPT[0])
        dialogue.end(CLOSING)
    assert sorted((d.user_model, d.sample) for d in store.read(Dialogue)) == [("human:dana", 0),
                                                                            ("human:erik", 1)]
    _judge(store, benchmark)
    tidy = load_scores(store)  # no clash between the two people's dialogues of one scenario
    assert len(tidy) == 4 and set(tidy["user_backend"]) == {HUMAN}


def _people_and_simulator(root, benchmark, assistant, people_root=None) -> RunStore:
    """The offline simulator on every SD scenario, three people on three of them (into `people_root`
    when given), all judged offline."""
    store = RunStore(root)
    run_simulation(benchmark, store, LLMClient("offline"),
                   SimulationConfig(task_types=["SD"], assistant=assistant))
    people = RunStore(people_root) if people_root else store
    for user, name in ((1, "ann"), (2, "ben"), (3, "cat")):
        dialogue = start_dialogue(benchmark, people, f"user{user}/SD-Movies-task-1", name, assistant)
        for text in SCRIPT:
            dialogue.say(text)
        dialogue.end(CLOSING)
    for judged in {store.root: store, people.root: people}.values():
        _judge(judged, benchmark)
    return store


def _words(text: str) -> int:
    return len(re.findall(r"[a-z0-9]+", text.lower()))


def _allow_intervals_on_three_users(monkeypatch) -> None:
    """The interval path of the table, which the thin-data rule keeps from three users."""
    monkeypatch.setattr(bootstrap, "MIN_CLUSTERS", 1)
    monkeypatch.setattr(stats, "MIN_CLUSTERS", 1)


def test_the_fidelity_table_compares_people_and_the_simulator_on_the_scenarios_both_cover(
        tmp_path, benchmark, assistant, monkeypatch):
    store = _people_and_simulator(tmp_path / "run", benchmark, assistant)
    frame = fidelity_frame(store, benchmark)
    assert sorted(frame["cell"].str.split(" | ", regex=False).str[0].unique()) == [
        f"user{u}/SD-Movies-task-1" for u in (1, 2, 3)]  # only what both cover
    assert (frame["arm"] == "people").sum() == 3 and (frame["arm"] == "simulator").sum() == 3

    simulated = {d.id: d for d in store.read(Dialogue) if d.user_backend != HUMAN}
    sim = [simulated[i] for i in frame.loc[frame["arm"] == "simulator", "dialogue_id"]]
    table = fidelity_table(frame, n_resamples=200)
    rows = table.frame.set_index("Measure")
    assert rows.loc["Turns", "People"] == "3.00"
    assert rows.loc["Turns", "Simulator"] == f"{np.mean([d.n_turns for d in sim]):.2f}"
    said = [*SCRIPT, CLOSING]
    assert rows.loc["Words per user turn", "People"] == f"{np.mean([_words(t) for t in said]):.2f}"
    assert rows.loc["Preferences stated in first message", "People"] == "0.00"  # jazz and drama come later
    assert rows.loc["Preferences disclosed overall", "People"] == "1.00"
    scores = load_scores(store)
    people_tc = scores[(scores["user_backend"] == HUMAN) & (scores["dimension"] == "task_completion")]
    assert rows.loc["TC (%)", "People"] == f"{100 * people_tc['score'].mean():.1f}"
    data = table.data.set_index("measure")
    assert data.loc["turns", "difference"] == pytest.approx(3 - np.mean([d.n_turns for d in sim]))
    # three users: means only, and the caption says why
    shown = rows[["People", "Simulator", "People - simulator"]]
    assert not shown.apply(lambda column: column.str.contains("[", regex=False)).any().any()
    assert f"fewer than {MIN_CLUSTERS} benchmark users" in table.caption
    assert "offline" in table.caption and "3 dialogues by 3 people" in table.caption
    assert rows["Users"].max() == 3 and rows.loc["Turns", "Scenarios"] == 3

    assert fidelity_table(frame, n_resamples=200).frame.equals(table.frame)  # same input, same table
    _allow_intervals_on_three_users(monkeypatch)
    wide = fidelity_table(frame, n_resamples=200).frame.set_index("Measure")
    assert wide.loc["Turns", "People"] == "3.00"  # every person took three turns: no spread, no interval
    assert wide.loc["Words per user turn", "People"] == rows.loc["Words per user turn", "People"]  # 1 script
    assert re.fullmatch(r"\d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\]", wide.loc["Words per user turn", "Simulator"])


def test_people_in_a_run_folder_of_their_own_compare_with_the_simulators_folder(tmp_path, benchmark,
                                                                                 assistant):
    together = fidelity_table(fidelity_frame(_people_and_simulator(tmp_path / "one", benchmark, assistant),
                                             benchmark), n_resamples=200)
    simulated = _people_and_simulator(tmp_path / "sim", benchmark, assistant, people_root=tmp_path / "people")
    assert {d.user_backend for d in simulated.read(Dialogue)} == {"offline"}  # the simulator's, unchanged
    apart = fidelity_table(fidelity_frame([simulated.root, tmp_path / "people"], benchmark), n_resamples=200)
    assert apart.frame.equals(together.frame)
    assert "sim+people" in apart.source.origin


def test_the_fidelity_table_says_what_it_lacks(tmp_path, benchmark, assistant):
    store = RunStore(tmp_path / "run")
    run_simulation(benchmark, store, LLMClient("offline"),
                   SimulationConfig(task_types=["SD"], assistant=assistant, limit=2))
    with pytest.raises(FidelityError, match="no finished dialogues played by people"):
        fidelity_frame(store, benchmark)
    dialogue = start_dialogue(benchmark, store, "user3/SD-Music-task-2", "fay", assistant)
    dialogue.say(SCRIPT[0])
    dialogue.end()
    people = [e for e in read_card(store.root)["stages"] if e["stage"] == "people"]
    assert [e["role"]["model"] for e in people] == ["human:fay"]  # the card names who typed
    with pytest.raises(FidelityError, match=r"no scenario .* was played by a person and by the simulator"):
        fidelity_frame(store, benchmark)


@needs_tex
def test_the_fidelity_table_prints_at_its_natural_size_on_an_acl_page(tmp_path, benchmark, assistant,
                                                                     monkeypatch):
    store = _people_and_simulator(tmp_path / "run", benchmark, assistant)
    thin = fidelity_table(fidelity_frame(store, benchmark), n_resamples=200)
    _allow_intervals_on_three_users(monkeypatch)
    for name, table in (("thin", thin), ("wide", fidelity_table(fidelity_frame(store, benchmark),
                                                                n_resamples=200))):
        paths = table.save(tmp_path / name, OutputId("table", "V4", "people_fidelity"))
        tex = paths["tex"]
        text = tex.read_text(encoding="utf-8")
        assert "resizebox" not in text and "scalebox" not in text and "adjustbox" not in text
        assert compile_problems(tex) == []


FROZEN_ROWS = [  # the cooperative-only table before styles came in (issue 41), for _people_and_simulator
    ("Turns", "3.00", "4.00", "-1.00"), ("Words per user turn", "6.33", "14.42", "-8.08"),
    ("Preferences stated in first message", "0.00", "0.00", "0.00"),
    ("Preferences disclosed overall", "1.00", "1.00", "0.00"),
    *((flag, "0.0", "0.0", "0.0") for flag in ("Opening states preferences (%)", "Contradicts profile (%)",
                                               "Turn cap, no TERMINATE (%)", "Repetition loop (%)",
                                               "Answers as assistant (%)")),
    ("TC (%)", "0.0", "100.0", "-100.0"), ("P (1-4)", "1.00", "2.00", "-1.00"),
]
FROZEN_CAPTION = (
    "People as the user against the simulated user on the scenarios both played with the same assistant, "
    "setting and prompts: means per arm, each scenario's dialogues averaged first. 3 dialogues by 3 people, "
    "3 simulated; preferences stated or disclosed count the task's relevant preference types whose values "
    "the user wrote; flags are the user-agent audit's (heuristics); TC and P are the judge's (a row's "
    "scenarios are those judged in both arms). Cells resting on fewer than 10 benchmark users (or whose "
    "resamples all agree) show means only: a bootstrap over so few users does not hold its stated coverage. "
    "Made in part with the offline backend (rule-based simulation, not a language model), in part with human."
)


def test_a_cooperative_only_store_gives_the_table_it_gave_before_styles(tmp_path, benchmark, assistant):
    table = fidelity_table(fidelity_frame(_people_and_simulator(tmp_path / "run", benchmark, assistant),
                                          benchmark), n_resamples=200)
    assert list(table.frame.columns) == ["Measure", "People", "Simulator", "People - simulator", "Scenarios",
                                         "Users"]
    assert [tuple(r) for r in table.frame.iloc[:, :4].itertuples(index=False)] == FROZEN_ROWS
    assert set(table.frame["Scenarios"]) == set(table.frame["Users"]) == {3}
    assert table.caption == FROZEN_CAPTION
    assert "style" not in table.data.columns


def test_the_fidelity_table_compares_people_with_each_style_and_names_the_closer_one(
        tmp_path, benchmark, assistant, monkeypatch):
    store = _people_and_simulator(tmp_path / "run", benchmark, assistant)
    run_simulation(benchmark, store, LLMClient("offline"),
                   SimulationConfig(task_types=["SD"], assistant=assistant, user_style="terse"))
    _judge(store, benchmark)
    frame = fidelity_frame(store, benchmark)
    assert frame.groupby(["arm", "user_style"]).size().to_dict() == {
        ("people", "cooperative"): 3, ("simulator", "cooperative"): 3, ("simulator", "terse"): 3}

    thin = fidelity_table(frame, n_resamples=200)
    rows = thin.frame.set_index(["Style", "Measure"])
    assert list(thin.frame["Style"].unique()) == ["cooperative", "terse"]
    assert [tuple(r) for r in rows.loc["cooperative"].iloc[:, :3].itertuples()] == FROZEN_ROWS  # unchanged
    words = rows.xs("Words per user turn", level="Measure")
    assert words.loc["terse", "People"] == words.loc["cooperative", "People"] == "6.33"
    assert float(words.loc["terse", "Simulator"]) < float(words.loc["cooperative", "Simulator"])  # shorter
    assert "6 simulated (cooperative 3, terse 3)" in thin.caption
    assert "too small to name the style closest to people" in thin.caption  # three users: no verdict
    assert "Closest to people" not in thin.caption
    tex = thin.save(tmp_path / "out", OutputId("table", "V6", "fidelity"))["tex"].read_text()
    assert "User style: cooperative" in tex and "User style: terse" in tex  # a heading per style
    assert "terse &" not in tex  # not a column repeated on every row

    _allow_intervals_on_three_users(monkeypatch)
    wide = fidelity_table(frame, n_resamples=200)
    assert "its interval of |people - style| below every other style's): terse on words per user turn." \
        in wide.caption
    assert "too small" not in wide.caption
    # turns tie (4 each), so no style is named there
    assert "on turns" not in wide.caption
