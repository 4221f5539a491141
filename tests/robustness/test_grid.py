"""The sensitivity grid on the tiny benchmark, offline: a mixed store's scores keep every condition apart,
a condition already stored costs no call, a second style makes exactly its own dialogues."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.analysis.scores import ScoresError, condition_scores, load_scores
from personalens_utils.data.write import save_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm import LLMClient
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.robustness import open_grid
from personalens_utils.simulation import SimulationConfig, run_simulation

ASSISTANT, USER = "ref-dialogue-only", "Claude 3 Sonnet"
JUDGES = ("Claude 3.5 Sonnet", "Claude 3.7 Sonnet")


@pytest.fixture
def mixed_store(tmp_path) -> RunStore:
    """Cooperative and reticent dialogues of the same SD scenarios, each judged by two judges."""
    benchmark, store = tiny_benchmark(2), RunStore(tmp_path / "store")
    with LLMClient("offline", progress=False, use_cache=False) as client:
        for style in ("cooperative", "reticent"):
            run_simulation(benchmark, store, client, SimulationConfig(
                task_types=["SD"], user_model=USER, assistant_model=ASSISTANT, user_style=style))
        for judge in JUDGES:
            run_judging(store, client, benchmark_contexts(benchmark), JudgingConfig(
                judge_model=judge, dimensions=["task_completion", "personalization"]))
    return store


def test_a_mixed_store_is_refused_by_default_and_kept_apart_by_condition(mixed_store):
    with pytest.raises(ScoresError, match=r"share a dialogue|repeat a scenario"):
        load_scores(mixed_store)
    tidy = condition_scores(mixed_store)
    cells = tidy.groupby(["user_style", "judge_model"], observed=True)["scenario_id"].nunique()
    assert set(cells.index) == {(s, j) for s in ("cooperative", "reticent") for j in JUDGES}
    assert set(cells) == {6}  # 2 users x 3 SD tasks under every condition
    assert not tidy.duplicated(["dialogue_id", "dimension", "judge_model"]).any()
    with pytest.raises(ScoresError, match=r"share a dialogue"):  # one style, two judges: still refused
        load_scores(mixed_store, user_model=USER, dialogue_ids=set(tidy.loc[
            tidy["user_style"] == "cooperative", "dialogue_id"]))
    one = load_scores(mixed_store, judge_model=JUDGES[0], dialogue_ids=set(tidy.loc[
        tidy["user_style"] == "cooperative", "dialogue_id"]))
    assert len(one) == len(tidy) // 4


def _parameters(root: Path, styles: list[str]) -> dict[str, Any]:
    return {"backend": "offline", "backend_seed": 0, "benchmark_dir": str(root / "bench"), "users": None,
            "task_types": ["SD"], "run_dir": str(root / "store"), "output_dir": str(root / "out"),
            "max_concurrency": 4, "assistant_models": [ASSISTANT, "ref-all-preferences"],
            "user_models": [USER], "user_styles": styles, "judge_models": [JUDGES[0]], "repeats": 1,
            "max_cost_usd": None, "batch": False}


def _grid_run(root: Path, styles: list[str]) -> Any:
    session, grid = open_grid(_parameters(root, styles))
    with session:
        counts = grid.run(show=lambda _: None)
        calls = sum(report.calls for _, report in grid.reports)
        return counts.set_index(["assistant_model", "user_style"]), calls, grid.reports


def test_a_repeated_condition_makes_no_call_and_a_new_style_only_its_own(tmp_path):
    save_benchmark(tiny_benchmark(2), tmp_path / "bench")
    first, calls, _ = _grid_run(tmp_path, ["cooperative"])
    assert calls > 0 and (first["dialogues_made"] == 6).all() and (first["dialogues_reused"] == 0).all()

    again, calls, reports = _grid_run(tmp_path, ["cooperative"])
    assert calls == 0, [(stage, r.calls) for stage, r in reports]
    assert (again["dialogues_made"] == 0).all() and (again["judgments_made"] == 0).all()
    assert (again["dialogues_reused"] == 6).all() and (again["judgments_reused"] == 12).all()

    both, calls, _ = _grid_run(tmp_path, ["cooperative", "reticent"])
    coop, ret = both.xs("cooperative", level="user_style"), both.xs("reticent", level="user_style")
    assert (coop["dialogues_made"] == 0).all() and (coop["judgments_made"] == 0).all()
    assert (ret["dialogues_made"] == 6).all() and (ret["judgments_made"] == 12).all()
    assert calls > 0


def test_the_plan_prices_only_what_is_missing(tmp_path):
    save_benchmark(tiny_benchmark(2), tmp_path / "bench")
    _grid_run(tmp_path, ["cooperative"])
    session, grid = open_grid(_parameters(tmp_path, ["cooperative", "reticent"]))
    with session:
        table = grid.simulation_cost().table
    assert {"live_usd", "batch_usd", "batch_cached_usd"} <= set(table.columns)
    assert table["calls"].iloc[-1] > 0 and table["stage"].iloc[-1] == "total"


def test_a_limit_with_batch_is_refused_before_any_call(tmp_path):
    save_benchmark(tiny_benchmark(2), tmp_path / "bench")
    with pytest.raises(ValueError, match="max_cost_usd"):
        open_grid({**_parameters(tmp_path, ["cooperative"]), "batch": True, "max_cost_usd": 1.0})


@pytest.mark.slow
def test_notebook_10_runs_end_to_end_on_the_tiny_benchmark(tmp_path):
    import papermill

    from personalens_utils.base.paths import project_root

    save_benchmark(tiny_benchmark(3), tmp_path / "bench")
    notebook = project_root() / "notebooks" / "10_robustness.ipynb"
    parameters = {**_parameters(tmp_path, ["cooperative", "reticent"]),
                  "assistant_models": ["ref-ignores-context", "ref-dialogue-only", "ref-past-interactions",
                                       "ref-all-preferences"]}
    papermill.execute_notebook(str(notebook), str(tmp_path / "10.ipynb"), kernel_name="python3",
                               progress_bar=False, cwd=str(notebook.parent), parameters=parameters)
    tables = {p.name for p in (tmp_path / "out" / "tables").glob("*.csv")}
    names = ("R1_condition_table", "R2_pairwise_orders", "R3_variance_split", "R4_stress_gaps", "R5_pass_k",
             "R6_user_style_checks")
    assert tables == {f"table{n}.csv" for n in names}
    assert (tmp_path / "out" / "figures" / "figureR1_ranking.pdf").is_file()
