"""Reference assistants and the judge sanity check: a sound judge recovers their designed order."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau
from support.latex_page import compile_problems, needs_tex
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.analysis.judge_check import judge_sanity, kendall_tau_b
from personalens_utils.assistants.reference_assistants import DESIGNED_ORDER, view_of
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures.scores import SCALES, load_scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import (
    AssistantSetting,
    ScenarioContext,
    SimulationConfig,
    assistant_request,
)
from personalens_utils.simulation.offline import assistant_turn
from personalens_utils.simulation.runner import run_simulation


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark(n_users=6)


@pytest.fixture(scope="module")
def judged(bench, tmp_path_factory):
    """The reference assistants simulated on the tiny benchmark and judged by the offline judge."""
    store = RunStore(tmp_path_factory.mktemp("ref") / "store")
    client = LLMClient("offline", progress=False)
    for model in DESIGNED_ORDER:
        run_simulation(bench, store, client, SimulationConfig(assistant_model=model, user_model="user-sim"))
    run_judging(store, client, benchmark_contexts(bench),
                JudgingConfig(judge_model="judge-sim", dimensions=["task_completion", "personalization"]))
    return load_scores(store, judge_model="judge-sim")


def _reply(bench, model: str, setting: str, turns: list[dict[str, str]]) -> str:
    ctx = ScenarioContext.of(bench.scenario("user0/SD-Alarm-task-1"), bench.user(0))
    request = assistant_request(AssistantSetting.parse(setting), ctx, turns, model)
    # with the view the reference assistant adds to its requests
    request = replace(request, context={**request.context, **view_of(model).context()})
    return assistant_turn(request, random.Random(0))


def _relevant_values(bench) -> list[str]:
    ctx = ScenarioContext.of(bench.scenario("user0/SD-Alarm-task-1"), bench.user(0))
    values = [ctx.preferences["Alarm"].get(name) for name in ctx.scenario.relevant_preferences]
    return [v if isinstance(v, str) else v[0] for v in values if v]


def test_kendall_tau_b_of_a_contingency_table_matches_scipy():
    rng = np.random.default_rng(3)
    for _ in range(5):
        x = rng.integers(0, 4, 200)
        y = rng.integers(1, 5, 200) + (x > 1)
        table = np.zeros((4, 6))
        np.add.at(table, (x, y), 1)
        assert kendall_tau_b(table) == pytest.approx(kendalltau(x, y).statistic)
    assert np.isnan(kendall_tau_b(np.array([[3.0, 0.0], [5.0, 0.0]])))


def test_reference_views_are_fixed_by_name_and_other_names_follow_the_setting():
    assert [view_of(m).dialogue for m in DESIGNED_ORDER] == [False, True, True, True]
    assert [view_of(m).history for m in DESIGNED_ORDER] == [False, False, True, True]
    assert not any(view_of(m).setting for m in DESIGNED_ORDER)
    assert view_of("Claude 3 Sonnet").setting and view_of("ref-follows-setting").setting


def test_ignoring_assistant_never_applies_what_the_user_says(bench):
    value = _relevant_values(bench)[0]
    turns = [{"role": "user", "content": "Hi, set an alarm."}, {"role": "assistant", "content": "Sure."},
             {"role": "user", "content": f"For the alarm sound, I'd like {value}, please."}]
    assert value.lower() not in _reply(bench, "ref-ignores-context", "base+all", turns).lower()
    assert value.lower() in _reply(bench, "ref-dialogue-only", "base", turns).lower()


def test_all_preferences_assistant_applies_every_relevant_value_in_its_first_reply(bench):
    opening = [{"role": "user", "content": "Hi, could you help me set an alarm?"}]
    reply = _reply(bench, "ref-all-preferences", "base", opening).lower()
    assert all(v.lower() in reply for v in _relevant_values(bench))
    # the setting does not widen a reference assistant's view: dialogue-only ignores base+all's history
    assert _reply(bench, "ref-dialogue-only", "base+all", opening) == _reply(
        bench, "ref-dialogue-only", "base", opening)


def test_offline_judge_recovers_the_designed_order(judged):
    result = judge_sanity(judged, DESIGNED_ORDER, n_resamples=300)
    assert list(result.frame["Recovered"]) == ["yes", "yes"], result.frame.to_string()
    means = result.data[result.data["statistic"] == "mean"]
    for dimension, rows in means.groupby("dimension"):
        ordered = rows.sort_values("rank")
        assert ordered["estimate"].is_monotonic_increasing, dimension
        assert ordered["ci_high"].iloc[0] < ordered["ci_low"].iloc[-1], dimension
    assert "offline backend" in result.caption


def test_the_offline_judge_does_not_read_the_assistant_model_name(judged):
    renamed = judged.assign(assistant_model=judged["assistant_model"].map(
        dict(zip(DESIGNED_ORDER, reversed(DESIGNED_ORDER), strict=True))))
    result = judge_sanity(renamed, DESIGNED_ORDER, n_resamples=300)
    assert list(result.frame["Recovered"]) == ["no", "no"]
    assert result.frame["Reversed"].ne("none").all()


def test_a_judge_that_scores_at_random_does_not_recover_the_order(judged):
    rng = np.random.default_rng(7)
    noisy = judged.copy()
    for dimension, scale in SCALES.items():
        rows = noisy["dimension"] == dimension
        noisy.loc[rows, "score"] = rng.integers(scale.low, scale.high + 1, rows.sum()).astype(float)
    result = judge_sanity(noisy, DESIGNED_ORDER, n_resamples=300)
    assert list(result.frame["Recovered"]) == ["no", "no"], result.frame.to_string()


def test_an_assistant_missing_from_the_scores_is_named(judged):
    with pytest.raises(ValueError, match="ref-imaginary"):
        judge_sanity(judged, [*DESIGNED_ORDER, "ref-imaginary"])
    with pytest.raises(ValueError, match="two or more distinct"):
        judge_sanity(judged, ["ref-dialogue-only", "ref-dialogue-only"])
    empty = judged[pd.Series(False, index=judged.index)]
    with pytest.raises(ValueError, match="no scored 'personalization'"):
        judge_sanity(empty, DESIGNED_ORDER)


@needs_tex
@pytest.mark.slow
def test_the_sanity_table_compiles_and_its_csv_keeps_the_verdict(judged, tmp_path):
    sanity = judge_sanity(judged, DESIGNED_ORDER, n_resamples=200)
    paths = sanity.save(tmp_path, OutputId("table", "J3", "judge_sanity"))
    assert compile_problems(paths["tex"]) == []
    csv = pd.read_csv(paths["csv"])
    assert list(csv["Recovered"]) == ["yes", "yes"] and list(csv.columns[3:7]) == list(DESIGNED_ORDER)
