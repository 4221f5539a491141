"""The user-agent audit: each flag's rule on dialogues written to trip it (and one that trips none), the
rates per model, and Table 3 beside itself without the flagged dialogues."""

from __future__ import annotations

import pytest
from support.records import dialogue
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants.reference_assistants import DESIGNED_ORDER
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures.scores import load_scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.trust.audit import (
    FLAGS,
    OPENING_CHECK,
    audit_dialogues,
    audit_rates,
    style_checks,
    table3_without_flagged,
    volunteered_opening,
)

SCENARIO = {"scenario_id": "user1/SD-Alarm-task-1", "user_id": 1, "task_id": "SD-Alarm-task-1"}
OPENING = "Hello, I need a new alarm for tomorrow."


def _talk(*user_lines: str) -> list[dict[str, str]]:
    turns = []
    for k, line in enumerate(user_lines):
        turns += [{"role": "user", "content": line}, {"role": "assistant", "content": f"Noted, step {k}."}]
    return turns


CASES = {
    "clean": ("terminated", _talk(OPENING, "It should go off at 2:30 PM with upbeat music.", "Thanks, bye.")),
    "states_preferences": ("terminated", _talk("Set an alarm at 2:30 PM with upbeat music on weekdays.",
                                               "Thanks.")),
    "contradicts_profile": ("terminated", _talk(OPENING, "Make it ring on weekends with loud beeping.")),
    "turn_cap": ("turn_cap", _talk(OPENING, "Which sounds are there?", "And the times?")),
    "repetition_loop": ("terminated", _talk(OPENING, "Can you set the alarm now please?",
                                            "Can you set the alarm now, please?",
                                            "Can you set the alarm now please")),
    "answers_as_assistant": ("terminated", _talk(OPENING, "Sure! How can I help you with your alarm today?")),
}


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark(n_users=3)


def _flags_of(bench, tmp_path, status, turns):
    store = RunStore(tmp_path / "one")
    store.append(dialogue("d1", status=status, turns=turns, n_turns=sum(t["role"] == "user" for t in turns),
                          **SCENARIO))
    return audit_dialogues(store, bench).iloc[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_flag_fires_on_its_own_case_and_no_other(bench, tmp_path, case):
    status, turns = CASES[case]
    row = _flags_of(bench, tmp_path, status, turns)
    raised = {name for name in FLAGS if row[name]}
    assert raised == (set() if case == "clean" else {case})
    assert row["any_flag"] == (case != "clean")


@pytest.fixture(scope="module")
def judged(bench, tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("audit") / "store")
    client = LLMClient("offline", progress=False)
    for model in DESIGNED_ORDER:
        run_simulation(bench, store, client, SimulationConfig(assistant_model=model, user_model="user-sim"))
    run_judging(store, client, benchmark_contexts(bench), JudgingConfig(judge_model="judge-sim"))
    return store, load_scores(store, judge_model="judge-sim"), audit_dialogues(store, bench)


def test_rates_per_model_count_the_flagged_dialogues(judged):
    _, _, audit = judged
    rates = audit_rates(audit)
    assert list(rates.frame["Assistant model"]) == sorted(DESIGNED_ORDER)
    for row in rates.frame.itertuples(index=False):
        mine = audit[audit["assistant_model"] == row[1]]
        assert row[2] == len(mine)
        assert row[-1] == pytest.approx(100 * mine["any_flag"].mean())
    assert "heuristics" in rates.caption and "offline" in rates.caption


def test_rates_print_across_acls_page_in_one_block_a_heading_per_user_agent(judged, tmp_path):
    """Seven rates beside the user agent and the model are wider than ACL's text at `\\small` (before
    issue 39 they printed 18.7 pt too wide); the user agent heads its rows instead of filling a column."""
    paths = audit_rates(judged[2]).save(tmp_path, OutputId("table", "T2", "user_agent_audit"))
    latex = paths["tex"].read_text(encoding="utf-8")
    assert latex.count("\\begin{tabular}{") == 1 and "\n\\small\n" in latex
    assert "\\textit{User agent: user-sim}" in latex and "User agent &" not in latex
    assert "User agent: " not in paths["md"].read_text(encoding="utf-8")  # the Markdown keeps its column


def test_table3_without_flagged_sits_beside_the_original_with_the_difference(judged):
    _, tidy, audit = judged
    assert audit["any_flag"].any()  # the offline user agent trips some flags
    result = table3_without_flagged(tidy, audit)
    data = result.data
    assert (data["n_kept"] <= data["n"]).all()
    difference = (data["mean_kept"] - data["mean"]).to_numpy()
    assert result.frame["Difference"].to_numpy() == pytest.approx(difference)
    flagged = set(audit.loc[audit["any_flag"], "dialogue_id"])
    kept = tidy[~tidy["dialogue_id"].isin(flagged) & (tidy["dimension"] == "personalization")
                & (tidy["assistant_setting"] == "base")]
    first = data[(data["dimension"] == "personalization")].iloc[0]
    mine = kept[(kept["assistant_model"] == first["assistant_model"])
                & (kept["task_type"] == first["task_type"])]
    assert first["mean_kept"] == pytest.approx(mine["score"].mean())
    nothing = audit.assign(any_flag=False)
    assert (table3_without_flagged(tidy, nothing).frame["Difference"] == 0).all()


def _said(*lines: str) -> list[dict[str, str]]:
    """A dialogue from its messages in order, the user's first."""
    return [{"role": ("user", "assistant")[k % 2], "content": line} for k, line in enumerate(lines)]


CHATTY = ("Hello there, I would really like some help setting up a new alarm for tomorrow morning please.",
          "Noted.", "Could you make sure it is all set up the way I usually like it, thank you so much?",
          "Done.", "Wonderful, that is exactly what I was hoping for, thanks a lot. TERMINATE")
STYLED = {
    "reticent": _said(OPENING, "What alarm time would you like?", "2:30 PM, please.",
                      "Set for 2:30 PM with loud beeping.", "I'd rather have upbeat music.",
                      "Done: 2:30 PM, upbeat music.", "Thanks. TERMINATE"),
    "terse": _said("Need an alarm.", "What alarm time?", "Alarm time: 2:30 PM.", "Set.", "Thanks. TERMINATE"),
    "impatient": _said(OPENING, "Noted.", "Okay.", "Noted again.", "This isn't going anywhere. TERMINATE"),
}
VIOLATIONS = {
    OPENING_CHECK: ("reticent", _said("Set an alarm at 2:30 PM.", "Done.", "Bye.")),
    "unprompted preference (share of later messages)": (
        "reticent", _said(OPENING, "Noted.", "It should repeat on weekdays.", "Done.", "Bye.")),
    "words per message, over cooperative's": ("terse", _said(*CHATTY)),
    "stays after 2 stalled assistant turns (share)": (
        "impatient", _said(OPENING, "Noted.", "Okay.", "Noted again.", "Well?", "Still noted.", "Bye.")),
}


def _checks(bench, folder, planted):
    store = RunStore(folder)
    for k, (style, turns) in enumerate(planted):
        store.append(dialogue(f"d{k}", turns=turns, n_turns=sum(t["role"] == "user" for t in turns),
                              user_style=style, **SCENARIO))
    frame = style_checks(audit_dialogues(store, bench)).frame
    return {row.Check: (row.Style, row.Verdict, row.Note) for row in frame.itertuples(index=False)}


def test_each_style_passes_when_it_took_effect(bench, tmp_path):
    checks = _checks(bench, tmp_path, [("cooperative", _said(*CHATTY)), *STYLED.items()])
    assert {verdict for _, verdict, _ in checks.values()} == {"pass"}
    assert {style for style, _, _ in checks.values()} == {"reticent", "terse", "impatient"}


@pytest.mark.parametrize("check", sorted(VIOLATIONS))
def test_each_style_check_fails_on_its_planted_violation_alone(bench, tmp_path, check):
    style, turns = VIOLATIONS[check]
    others = [(s, t) for s, t in STYLED.items() if s != style]
    checks = _checks(bench, tmp_path, [("cooperative", _said(*CHATTY)), *others, (style, turns)])
    assert {c for c, (_, verdict, _) in checks.items() if verdict == "fail"} == {check}


def test_an_absent_style_and_terse_without_cooperative_are_not_measured_with_the_reason(bench, tmp_path):
    checks = _checks(bench, tmp_path, [("terse", STYLED["terse"])])
    assert {verdict for _, verdict, _ in checks.values()} == {"not measured"}
    assert checks["words per message, over cooperative's"][2] == ("no cooperative dialogues in the store to "
                                                                  "compare with")
    assert checks[OPENING_CHECK][2] == "no reticent dialogues in the store"


def test_a_value_the_tasks_own_wording_carries_is_the_request_not_a_disclosure(bench):
    """A reticent user still has to say what it wants done; only a value beyond the task's wording is
    volunteered (the offline reticent user opens with its task's request, values and all)."""
    record = dialogue("d1", turns=_said("Set an alarm with upbeat music.", "Done.", "Bye."), n_turns=2,
                      **SCENARIO)
    context = benchmark_contexts(bench)(record)
    assert volunteered_opening(record, context)
    task = {**context["task"], "user_intent": "Set a new alarm that plays upbeat music."}
    assert not volunteered_opening(record, {**context, "task": task})
    told = dialogue("d2", turns=_said("Set an alarm with upbeat music on weekdays.", "Done.", "Bye."),
                    n_turns=2, **SCENARIO)
    assert volunteered_opening(told, {**benchmark_contexts(bench)(told), "task": task})
