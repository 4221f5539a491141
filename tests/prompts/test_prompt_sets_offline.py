"""The official prompt set end to end on the offline backend: dialogues and judgments are made, tagged
`official` (turn-level personalization `kit`), resumed, kept apart from a kit run in the same store,
and notebooks 03 and 04 take `prompt_set` and `official_code`."""

from __future__ import annotations

from pathlib import Path

import papermill
import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import analysis, judging, prompt_sets
from personalens_utils.data import save_benchmark
from personalens_utils.judging import JudgingConfig
from personalens_utils.judging.report import missing_rate
from personalens_utils.llm import CallKind, LLMClient
from personalens_utils.measures import scores
from personalens_utils.prompt_sets.official.templates import load_official_prompts
from personalens_utils.prompt_templates.judge import JUDGE_PROMPT_VERSION
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
DIMENSIONS = ["task_completion", "personalization", "naturalness_user", "turn_personalization"]


def run(bench, store, prompt_set: str, code: Path | None) -> tuple:
    options = {"prompts": prompt_sets.prompt_set(prompt_set, code)}
    with LLMClient("offline", progress=False, use_cache=False) as client:
        simulated = run_simulation(bench, store, client,
                                   SimulationConfig(settings=["base", "base+I"], **options))
        judged = judging.run_judging(store, client, judging.benchmark_contexts(bench),
                                     JudgingConfig(dimensions=DIMENSIONS, **options))
        kinds = set(client.usage_frame()["kind"])
    return simulated, judged, kinds


def test_an_official_run_on_the_offline_backend_is_its_own_run(official_code, tmp_path):
    bench = tiny_benchmark(n_users=2, seed=4)
    store = RunStore(tmp_path / "run")
    version = load_official_prompts(official_code).version
    simulated, judged, kinds = run(bench, store, "official", official_code)
    n = len(bench.scenarios) * 2
    assert simulated.stored == n and judged.stored == n * len(DIMENSIONS)
    assert kinds == {str(CallKind.USER_TURN), str(CallKind.ASSISTANT_TURN), str(CallKind.JUDGE)}
    dialogues = store.read(Dialogue)
    assert {(d.prompt_set, d.prompt_version) for d in dialogues} == {("official", version)}
    assert {d.status for d in dialogues} <= {"terminated", "turn_cap"}
    marks = {(j.dimension, j.prompt_set, j.prompt_version) for j in store.read(Judgment)}
    assert marks == {(d, "official", version) for d in DIMENSIONS[:-1]} | {
        ("turn_personalization", "kit", JUDGE_PROMPT_VERSION)
    }
    assert judged.details["turn_level_prompts"].startswith("kit")
    assert {j.status for j in store.read(Judgment)} == {"ok"}

    again, rejudged, _ = run(bench, store, "official", official_code)
    assert again.stored == 0 and again.already_done == n and rejudged.stored == 0

    kit, _, _ = run(bench, store, "kit", None)
    assert kit.stored == n  # the kit's prompts are another run, never the official one reused
    with pytest.raises(scores.ScoresError, match=r"prompt sets \['kit', 'official'\]"):
        scores.load_scores(store)  # the kit's judge also judged the official dialogues
    tidy = scores.load_scores(store, judge_prompt_set="kit")
    assert set(tidy["dialogue_prompt_set"]) == {"kit", "official"}
    with pytest.raises(scores.ScoresError, match=r"would pool records of \d+ different runs"):
        scores.aggregate(tidy, ["assistant_model", "assistant_setting"])
    official = scores.load_scores(store, judge_prompt_set="official")
    whole = official[official["dimension"] != "turn_personalization"]
    assert set(whole["judge_prompt_set"]) == set(whole["dialogue_prompt_set"]) == {"official"}
    assert set(official.loc[official["dimension"] == "turn_personalization", "judge_prompt_set"]) == {"kit"}
    official = official[official["dialogue_prompt_set"] == "official"]
    means = scores.aggregate(official, ["assistant_model", "assistant_setting"])
    assert len(means) and means["n"].min() > 0
    source = analysis.judge_scores(official).source.describe()
    assert "(prompts: simulation official; judge kit, official)" in source
    assert (
        "prompts" not in analysis.judge_scores(tidy[tidy["dialogue_prompt_set"] == "kit"]).source.describe()
    )
    rates = missing_rate(store)
    assert set(zip(rates["dimension"], rates["prompt_set"], strict=True)) >= {
        ("personalization", "kit"),
        ("personalization", "official"),
        ("turn_personalization", "kit"),
    }


@pytest.mark.slow
def test_notebooks_03_and_04_run_with_the_official_prompts(official_code, tmp_path, monkeypatch):
    monkeypatch.delenv("PERSONALENS_CODE", raising=False)
    save_benchmark(tiny_benchmark(n_users=1, seed=2), tmp_path / "bench")
    common = {
        "benchmark_dir": str(tmp_path / "bench"),
        "run_dir": str(tmp_path / "run"),
        "prompt_set": "official",
        "official_code": str(official_code),
        "task_types": ["SD"],
    }
    papermill.execute_notebook(
        str(NOTEBOOKS / "03_simulation.ipynb"),
        str(tmp_path / "03.ipynb"),
        kernel_name="python3",
        progress_bar=False,
        parameters={**common, "output_dir": str(tmp_path / "sim"), "settings": ["vanilla", "base+all"]},
    )
    papermill.execute_notebook(
        str(NOTEBOOKS / "04_judging.ipynb"),
        str(tmp_path / "04.ipynb"),
        kernel_name="python3",
        progress_bar=False,
        parameters={
            **common,
            "output_dir": str(tmp_path / "judge"),
            "dimensions": ["personalization", "turn_personalization"],
        },
    )
    store = RunStore(tmp_path / "run")
    dialogues = store.read(Dialogue)
    assert len(dialogues) == 3 * 2 and {d.prompt_set for d in dialogues} == {"official"}
    assert {(j.dimension, j.prompt_set) for j in store.read(Judgment)} == {
        ("personalization", "official"),
        ("turn_personalization", "kit"),
    }
    assert (tmp_path / "judge" / "tables" / "tableJ2_judge_scores.csv").is_file()
    with pytest.raises(papermill.PapermillExecutionError, match="PERSONALENS_CODE"):
        papermill.execute_notebook(
            str(NOTEBOOKS / "03_simulation.ipynb"),
            str(tmp_path / "bad.ipynb"),
            kernel_name="python3",
            progress_bar=False,
            parameters={**common, "official_code": str(tmp_path)},
        )
