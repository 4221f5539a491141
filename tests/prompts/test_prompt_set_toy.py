"""A third prompt set is one class and its registration: a toy set runs a dialogue and a judgment
(offline) through the same runners, and its records carry its name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import judging, prompt_sets
from personalens_utils.llm import LLMClient, Request
from personalens_utils.prompt_sets import KitPrompts, ScenarioContext
from personalens_utils.prompt_sets.base import Turn
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation


class ToyPrompts(KitPrompts):
    """The kit's prompts, shouting, with a cap of one user message."""

    name = "toy"

    @property
    def version(self) -> str:
        return "toy-1"

    def user_request(self, ctx: ScenarioContext, turns: Sequence[Turn], model: str) -> Request:
        request = super().user_request(ctx, turns, model)
        return Request(**{**request.__dict__, "system": request.system.upper()})

    def user_messages(self, cap: int) -> int:
        return 1

    def judge_version(self, kit_version: str) -> str:
        return "toy-judge-1"

    def judge_requests(self, dimension: Any, context: Mapping[str, Any], judge_model: str) -> list[Request]:
        return super().judge_requests(dimension, context, judge_model)[:1]


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> ToyPrompts:
    monkeypatch.setitem(prompt_sets.PROMPT_SETS, ToyPrompts.name, ToyPrompts)
    return prompt_sets.prompt_set("toy")


def test_a_toy_prompt_set_runs_a_dialogue_and_a_judgment(toy: ToyPrompts, tmp_path) -> None:
    assert isinstance(toy, ToyPrompts)
    bench = tiny_benchmark(1)
    store = RunStore(tmp_path)
    with LLMClient("offline", progress=False) as client:
        report = run_simulation(bench, store, client, SimulationConfig(settings=["base"], task_types=["SD"],
                                                                       prompts=toy))
        judged = judging.run_judging(store, client, judging.benchmark_contexts(bench),
                                     judging.JudgingConfig(dimensions=["task_completion"], prompts=toy))
    dialogues = store.read(Dialogue)
    assert report.finished == len(dialogues) > 0 and report.details["prompt_set"] == "toy"
    assert {(d.prompt_set, d.prompt_version, d.n_turns) for d in dialogues} == {("toy", "toy-1", 1)}
    judgments = store.read(Judgment)
    assert judged.finished == len(judgments) == len(dialogues)
    assert {(j.prompt_set, j.prompt_version) for j in judgments} == {("toy", "toy-judge-1")}
    line = store.records(Dialogue)[0]
    assert line["prompt_set"] == "toy"
    with LLMClient("offline", progress=False) as client:
        again = run_simulation(bench, store, client, SimulationConfig(settings=["base"], task_types=["SD"],
                                                                      prompts=toy))
    assert again.planned == 0 and again.calls == 0
