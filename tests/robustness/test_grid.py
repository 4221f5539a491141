"""The sensitivity grid on the tiny benchmark, offline: a mixed store's scores keep every condition apart,
a condition already stored costs no call, a second style makes exactly its own dialogues; before any call
the plan prices the judging of dialogues not made yet (on a priced backend, no call is made)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.roles import judge_of
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data.write import save_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm import LLMClient
from personalens_utils.llm.budget import CostEstimate
from personalens_utils.measures.scores import ScoresError, condition_scores, load_scores
from personalens_utils.robustness.grid import GRID_DIMENSIONS, GridRun
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.robustness import open_grid
from personalens_utils.simulation import SimulationConfig, plan_dialogues, run_simulation
from personalens_utils.simulation.runner import PAPER_TURNS

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


def _planned(grid: GridRun) -> int:
    """How many dialogues the grid's simulations still plan to make, every (assistant, user agent)."""
    return sum(len(plan_dialogues(grid.place.benchmark, grid.place.store, config, user=user).items)
               for user, config in grid.simulations())


def _priced(root: Path) -> dict[str, Any]:
    """A grid whose every role is a priced Claude model: it is only planned here, so no call is made."""
    return {**_parameters(root, ["cooperative", "reticent"]), "backend": "anthropic",
            "assistant_models": ["claude-haiku-4-5"], "judge_models": list(JUDGES)}


def test_a_new_condition_on_a_priced_judge_prices_its_judging_before_any_dialogue_exists(tmp_path):
    save_benchmark(tiny_benchmark(2), tmp_path / "bench")
    session, grid = open_grid(_priced(tmp_path))
    with session:
        planned, judging = _planned(grid), grid.judging_cost()
        assert planned == 2 * 6  # the tiny benchmark's 6 SD scenarios under each style
        # every dimension the grid judges is scored once per dialogue, by every judge
        assert judging.calls == planned * len(GRID_DIMENSIONS) * len(JUDGES)
        assert judging.total_cost_usd > 0
        simulation, plan = grid.simulation_cost(), grid.plan_cost()
        assert not grid.place.store.read(Dialogue) and not grid.reports  # nothing made, nothing called
    prices = judging.table.iloc[-1][["live_usd", "batch_usd", "batch_cached_usd"]]
    assert prices["live_usd"] > prices["batch_usd"] > 0 and prices["batch_cached_usd"] > 0
    assert any("not made yet" in note and "Table 13" in note for note in judging.assumptions)
    assert plan.calls == simulation.calls + judging.calls
    assert plan.total_cost_usd == pytest.approx(simulation.total_cost_usd + judging.total_cost_usd)


def test_a_real_judge_prices_nothing_for_dialogues_the_offline_backend_will_make(tmp_path):
    save_benchmark(tiny_benchmark(2), tmp_path / "bench")
    session, grid = open_grid({**_parameters(tmp_path, ["reticent"]),
                               "judge_models": ["anthropic:claude-haiku-4-5"]})
    with session:
        planned, judging = _planned(grid), grid.judging_cost()
    assert planned > 0 and judging.calls == 0  # as run_judging would leave them alone
    assert any(note.startswith(f"{planned} planned dialogue(s) will be made on the offline backend")
               for note in judging.assumptions)


def test_turn_level_judging_of_planned_dialogues_makes_one_call_per_assistant_turn(tmp_path):
    from personalens_utils.judging.plan import PlannedSimulation, estimate_judging_planned

    save_benchmark(tiny_benchmark(2), tmp_path / "bench")
    session, grid = open_grid(_priced(tmp_path))
    with session:
        turn_level = JudgingConfig(judge_model=JUDGES[0], dimensions=["turn_personalization"])

        def calls(max_turns: int | None) -> tuple[int, int]:
            planned = [PlannedSimulation.of(grid.place.benchmark, grid.place.store,
                                            replace(config, max_turns=max_turns), user=user)
                       for user, config in grid.simulations()]
            estimate = estimate_judging_planned(planned, benchmark_contexts(grid.place.benchmark), turn_level,
                                                judge=judge_of(turn_level, "anthropic"))
            return estimate.calls, sum(len(p.plan.items) for p in planned)

        average, n = calls(None)
        capped, same = calls(3)
    assert n == same > 0
    assert average == round(n * PAPER_TURNS["SD"])  # the paper's average turns, a call for each
    assert capped == n * 3  # a cap below the paper's average: every stand-in has 3 assistant turns


def test_judging_is_priced_before_the_dialogues_exist_and_again_from_them(tmp_path):
    save_benchmark(tiny_benchmark(2), tmp_path / "bench")
    session, grid = open_grid(_parameters(tmp_path, ["cooperative"]))
    shown: list[object] = []
    with session:
        planned = _planned(grid)
        before = grid.judging_cost()
        grid.run(show=shown.append)
    assert planned == 2 * 6 and before.calls == planned * len(GRID_DIMENSIONS)
    # after simulation, judging is priced again from the dialogues made, none of them a stand-in
    [again] = [item for item in shown if isinstance(item, CostEstimate)]
    assert again.calls == before.calls
    assert not any("not made yet" in note for note in again.assumptions)

    session, grid = open_grid(_parameters(tmp_path, ["cooperative"]))
    with session:  # everything stored: nothing left to price
        assert _planned(grid) == 0
        assert grid.judging_cost().calls == 0 and grid.plan_cost().calls == 0


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
                                       "ref-all-preferences"], "repeats": 2}
    papermill.execute_notebook(str(notebook), str(tmp_path / "10.ipynb"), kernel_name="python3",
                               progress_bar=False, cwd=str(notebook.parent), parameters=parameters)
    tables = {p.name for p in (tmp_path / "out" / "tables").glob("*.csv")}
    names = ("R1_condition_table", "R2_pairwise_orders", "R3_variance_split", "R4_stress_gaps", "R5_pass_k",
             "R6_user_style_checks")
    assert tables == {f"table{n}.csv" for n in names}
    assert (tmp_path / "out" / "figures" / "figureR1_ranking.pdf").is_file()
    pass_k = pd.read_csv(tmp_path / "out" / "tables" / "tableR5_pass_k.csv")
    assert len(pass_k) == 4 * 2  # every assistant under both styles, pass^1 and pass^2 as columns
    # one repeat: nothing to estimate pass^k from, so the notebook says so and saves no R5
    parameters |= {"repeats": 1, "output_dir": str(tmp_path / "once")}
    executed = papermill.execute_notebook(str(notebook), str(tmp_path / "once.ipynb"), kernel_name="python3",
                                          progress_bar=False, cwd=str(notebook.parent), parameters=parameters)
    assert not (tmp_path / "once" / "tables" / "tableR5_pass_k.csv").exists()
    shown = json.dumps(executed["cells"])
    assert "**Table R5** not made. Pass^k needs repeats" in shown


def test_the_setup_line_counts_in_words(tmp_path):
    save_benchmark(tiny_benchmark(2), tmp_path / "bench")
    session, grid = open_grid(_parameters(tmp_path, ["cooperative", "reticent"]))
    with session:
        line = grid.describe()
    assert "2 assistants x 2 user agents (" in line and " x 1 judge (" in line and ", 1 repeat," in line
