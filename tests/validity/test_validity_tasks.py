"""The task audit on a small benchmark written here, with planted tasks where every option suits every
user: those tasks are flagged and at most 10% of the others are; by domain; the blind assistant at the
top of the scale; the ablation's settings as the two arms; Table 3 on unflagged tasks beside all.

The planted tasks ask about preference types every user holds as "No preference", and their scenarios
give a situation with nothing to fit (no device, no time of day): nothing about the user can change
their result. A task with no preference at stake but an ordinary situation is not flagged: the
offline assistant that knows the situation remarks on it, which the offline judge counts as one level
of personalization (`judging.offline.personalization_score`), and that gap is real.
"""

from __future__ import annotations

import pandas as pd
import pytest
from support.latex_page import PDFLATEX, compile_problems
from support.tiny_benchmark import SITUATION, TASKS, tiny_users

from personalens_utils.data import Benchmark
from personalens_utils.data.types import TaskDefinition
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures.bootstrap import paired_difference
from personalens_utils.measures.design import design_frame
from personalens_utils.measures.scores import load_scores
from personalens_utils.measures.stats import FEW_CLUSTERS, MIN_CLUSTERS
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.validity.tasks import (
    OFFLINE_BLIND,
    OFFLINE_FULL,
    Arm,
    TaskAuditError,
    flagged_units,
    table3_on_measuring_tasks,
    task_audit_table,
    task_audit_unavailable,
    task_gaps,
)

ANY_OPTION = ("Seating Preference", "Days of Week Preference")
"""Events preference types every user of the benchmark holds as "No preference"."""


def _task(task_id: str, domains: list[str], preferences: list[str]) -> TaskDefinition:
    return TaskDefinition(task_id, domains, "Help me arrange this the way I like it.", "The user wants help.",
                          "It is arranged the way the user likes.", preferences)


MORE = (
    _task("SD-Movies-task-2", ["Movies"], ["Viewing Time Preference", "Seat Type Preference"]),
    _task("SD-Hotels-task-1", ["Hotels"], ["Star Rating Preference", "Room Type Preference"]),
    _task("SD-Events-task-1", ["Events"], ["Event Type Preference", "Group Size Preference"]),
    _task("SD-Hotels-task-2", ["Hotels"], ["Amenity Preference", "Hotel Chains Preference"]),
    _task("SD-Restaurants-task-2", ["Restaurants"], ["Dietary Restrictions", "Cuisine Preference"]),
    _task("MD-task-2", ["Movies", "Restaurants"], ["Preferred Genres", "Price Range"]),
)
PLANTED = (_task("SD-Events-task-2", ["Events"], [ANY_OPTION[0]]),
           _task("SD-Events-task-3", ["Events"], [ANY_OPTION[1]]))
SITUATION_ONLY = _task("SD-Events-task-4", ["Events"], list(ANY_OPTION))
NOTHING_TO_FIT = {**SITUATION, "device": "", "time_of_day": ""}
PLANTED_IDS = {t.task_id for t in PLANTED}
USERS = MIN_CLUSTERS
"""The fewest users a gap's interval is drawn on (below, the audit cannot say a task shows no gap)."""


def planted_benchmark(n_users: int = USERS) -> Benchmark:
    users = tiny_users(n_users)
    for user in users:
        user.preferences["Events"].update({name: "No preference" for name in ANY_OPTION})
    tasks = [*TASKS, *MORE, *PLANTED, SITUATION_ONLY]
    scenarios = [task.for_user(u.user_id, dict(NOTHING_TO_FIT if task in PLANTED else SITUATION))
                 for u in users for task in tasks]
    return Benchmark.from_records(users, tasks, scenarios)


@pytest.fixture(scope="module")
def tidy(tmp_path_factory):
    bench = planted_benchmark()
    store = RunStore(tmp_path_factory.mktemp("tasks") / "store")
    client = LLMClient("offline", progress=False)
    for arm in (OFFLINE_BLIND, OFFLINE_FULL):
        run_simulation(bench, store, client, SimulationConfig(assistant_model=arm.assistant_model,
                                                              user_model="user-sim"))
    for setting in ("base", "base+all"):
        run_simulation(bench, store, client, SimulationConfig(assistant_model="ref-follows-setting",
                                                              user_model="user-sim", settings=[setting]))
    run_judging(store, client, benchmark_contexts(bench),
                JudgingConfig(judge_model="judge-sim", dimensions=["task_completion", "personalization"]))
    return load_scores(store, judge_model="judge-sim")


def _others_flagged(gaps: pd.DataFrame) -> float:
    others = gaps[~gaps["task_id"].isin(PLANTED_IDS)]
    return float(others["flagged"].mean())


def test_planted_tasks_are_flagged_and_few_others(tidy):
    gaps = task_gaps(tidy)
    assert len(gaps) == len(TASKS) + len(MORE) + len(PLANTED) + 1
    assert set(flagged_units(gaps)) >= PLANTED_IDS
    assert _others_flagged(gaps) <= 0.1
    planted = gaps[gaps["task_id"].isin(PLANTED_IDS)]
    assert (planted["why"] == "no gap").all() and (planted["personalization_pairs"] == USERS).all()


def test_on_fewer_users_than_an_interval_needs_no_task_is_flagged_for_no_gap_and_its_row_says_so(tidy):
    few = tidy[tidy["user_id"].isin(sorted(set(tidy["user_id"]))[:USERS - 1])]
    gaps = task_gaps(few)
    assert not gaps["flagged"].any()
    assert (gaps["why"] == f"gap not judged: {FEW_CLUSTERS}").all()
    table = task_audit_table(gaps, few)
    assert set(table.frame["Flagged"]) == {f"gap not judged: {FEW_CLUSTERS}"}
    assert f"fewer than {MIN_CLUSTERS} users is not judged" in table.caption


def test_a_task_whose_only_context_is_the_situation_still_shows_a_gap(tidy):
    gaps = task_gaps(tidy).set_index("task_id")
    row = gaps.loc[SITUATION_ONLY.task_id]
    assert not row["flagged"]
    assert row["personalization_gap"] == pytest.approx(1.0)
    assert row["task_completion_gap"] == pytest.approx(0.0)


def test_each_gap_is_the_user_clustered_paired_difference_of_its_task(tidy):
    gaps = task_gaps(tidy, n_resamples=500, seed=3).set_index("task_id")
    task = "SD-Movies-task-1"
    part = tidy[(tidy["task_id"] == task) & tidy["assistant_model"].isin([OFFLINE_BLIND.assistant_model,
                                                                             OFFLINE_FULL.assistant_model])]
    design = design_frame(part[part["assistant_setting"] == "base"], "personalization")
    expected = paired_difference(design, OFFLINE_FULL.assistant_model, OFFLINE_BLIND.assistant_model,
                                 n_resamples=500, seed=3).difference
    row = gaps.loc[task]
    found = (row["personalization_gap"], row["personalization_low"], row["personalization_high"])
    assert found == pytest.approx((expected.estimate, expected.low, expected.high))
    again = task_gaps(tidy, n_resamples=500, seed=3)
    pd.testing.assert_frame_equal(again.set_index("task_id"), gaps)


def test_the_ablation_settings_serve_as_the_two_arms(tidy):
    """On a real run the arms are one assistant in two settings; offline, "base+all" shows the assistant the
    demographics, whose country it remarks on, so even the planted tasks gain a level there."""
    gaps = task_gaps(tidy, Arm("ref-follows-setting", "base"), Arm("ref-follows-setting", "base+all"))
    assert (gaps["personalization_pairs"] == USERS).all()
    p = tidy[(tidy["assistant_model"] == "ref-follows-setting") & (tidy["dimension"] == "personalization")]
    means = p.groupby(["task_id", "assistant_setting"])["score"].mean().unstack()
    expected = (means["base+all"] - means["base"]).sort_index()
    assert gaps.set_index("task_id")["personalization_gap"].sort_index().to_numpy() == pytest.approx(
        expected.to_numpy())


def test_by_domain_a_multi_domain_task_counts_toward_each_domain(tidy):
    gaps = task_gaps(tidy, by="domain").set_index("domain")
    assert set(gaps.index) == {"Alarm", "Events", "Hotels", "Movies", "Restaurants"}
    assert gaps.loc["Movies", "personalization_pairs"] == USERS * 3  # Movies 1, 2 and MD-task-2
    assert not gaps["flagged"].any()  # every domain holds a task that measures


def test_a_blind_assistant_already_at_the_top_is_flagged(tidy):
    task = "SD-Hotels-task-1"
    lifted = tidy.copy()
    top = ((lifted["task_id"] == task) & (lifted["assistant_model"] == OFFLINE_BLIND.assistant_model)
           & (lifted["dimension"] == "personalization"))
    lifted.loc[top, "score"] = 4.0
    gaps = task_gaps(lifted).set_index("task_id")
    assert gaps.loc[task, "flagged"] and "blind at top" in gaps.loc[task, "why"]
    assert gaps.loc[task, "blind_top"] == 1.0


def test_an_arm_without_dialogues_is_named(tidy):
    with pytest.raises(TaskAuditError, match="no judged dialogues of nobody-model"):
        task_gaps(tidy, Arm("nobody-model"))
    with pytest.raises(TaskAuditError, match="by must be one of"):
        task_gaps(tidy, by="user")


def test_a_store_without_an_arm_says_why_the_task_audit_is_not_made_and_what_would_make_it(tidy):
    assert task_audit_unavailable(tidy) is None
    only_full = tidy[tidy["assistant_model"] != OFFLINE_BLIND.assistant_model]
    why = task_audit_unavailable(only_full)
    assert why is not None and f"no judged dialogues of {OFFLINE_BLIND.label}" in why
    assert OFFLINE_FULL.label not in why.split("cannot:")[1], "only the missing arm is named as missing"
    assert "blind_assistant" in why and "make reproduce" in why


def test_table3_on_unflagged_tasks_leaves_out_the_flagged_tasks_dialogues(tidy):
    gaps = task_gaps(tidy)
    result = table3_on_measuring_tasks(tidy, gaps)
    for row in result.data.itertuples(index=False):
        cell = tidy[(tidy["assistant_model"] == row.assistant_model) & (tidy["task_type"] == row.task_type)
                    & (tidy["dimension"] == row.dimension) & (tidy["assistant_setting"] == "base")]
        assert row.n == len(cell)
        assert row.n_kept == len(cell[~cell["task_id"].isin(flagged_units(gaps))])
    table = task_audit_table(gaps, tidy)
    assert set(table.frame.loc[table.frame["Flagged"] != "no", "Task"]) == PLANTED_IDS
    assert "offline" in table.caption and "offline" in result.caption


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not found")
def test_the_task_audit_tables_print_at_their_natural_size(tidy, tmp_path):
    gaps = task_gaps(tidy)
    task_audit_table(gaps, tidy).save(tmp_path, OutputId("table", "V4", "task_audit"))
    table3_on_measuring_tasks(tidy, gaps).save(tmp_path, OutputId("table", "V5", "table3_measuring_tasks"))
    tables = sorted((tmp_path / "tables").glob("*.tex"))
    assert len(tables) == 2
    assert {t.name: compile_problems(t) for t in tables} == {t.name: [] for t in tables}


def test_an_arm_parameter_reads_model_and_setting_and_keeps_a_specs_colon():
    assert Arm.parse(None, OFFLINE_BLIND) == OFFLINE_BLIND
    assert Arm.parse("m", OFFLINE_BLIND) == Arm("m", "base")
    assert Arm.parse("m:base+DIS", OFFLINE_BLIND) == Arm("m", "base+all")  # the setting's own spelling
    assert Arm.parse("openai:Qwen/Qwen2.5-7B-Instruct", OFFLINE_BLIND).assistant_model == \
        "openai:Qwen/Qwen2.5-7B-Instruct"
    with pytest.raises(TaskAuditError, match="parameter full_assistant: empty"):
        Arm.parse(" ", OFFLINE_FULL, "full_assistant")
