"""Empty or exhausted plans (issue 21, item 3): an empty selection is refused in the setup cell; a run
that stored nothing says why (budget, every call errored, nothing selected) and what to do, and
notebook 03's describing cells show that instead of raising."""

from __future__ import annotations

import json
from pathlib import Path

import papermill
import pytest
from support.roles import user_of
from support.scripted_models import Overloaded
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.base import paths
from personalens_utils.data import save_benchmark
from personalens_utils.llm.client import LLMClient
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import SessionConfig, SessionError, selection_param
from personalens_utils.simulation import SimulationConfig, nothing_to_describe, run_dialogues, run_simulation

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "03_simulation.ipynb"


def test_an_empty_selection_is_refused_in_the_setup_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    save_benchmark(tiny_benchmark(n_users=2), tmp_path / "bench")
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path / "runs")
    with pytest.raises(SessionError, match=r"^parameter users=\[\] selects no user; "):
        Session.open(SessionConfig(benchmark_dir=tmp_path / "bench", users=[]))
    with pytest.raises(SessionError, match=r"^parameter task_types=\[\] selects nothing"):
        Session.open(SessionConfig(benchmark_dir=tmp_path / "bench", task_types=[]))
    with pytest.raises(SessionError, match=r"^parameter settings=\[\] selects nothing"):
        selection_param("settings", [])
    assert selection_param("settings", "base,base+I") == ["base", "base+I"]


def test_a_run_that_stored_nothing_says_why_and_what_to_do(tmp_path: Path):
    bench = tiny_benchmark(n_users=2)
    with LLMClient("offline", progress=False) as client:
        budget = run_simulation(bench, tmp_path / "budget", client, SimulationConfig(max_cost_usd=0))
        nothing = run_simulation(bench, tmp_path / "none", client, SimulationConfig(task_types=[]))
    with LLMClient(Overloaded(), progress=False, max_retries=0) as client:
        failed = run_simulation(bench, tmp_path / "failed", client)

    assert "higher max_cost_usd" in budget.why_nothing()
    assert "nothing was selected" in nothing.why_nothing() and "nothing was selected" in nothing.message()
    assert "nothing was selected" in nothing._repr_html_()
    assert "every one of the 8 records it made is an error" in failed.why_nothing()
    assert "retry_errors=True" in failed.why_nothing()
    for report, run in ((budget, "budget"), (failed, "failed")):
        config = SimulationConfig()
        dialogues = run_dialogues(RunStore(tmp_path / run), bench, config, user=user_of(config, "offline"))
        note = nothing_to_describe(dialogues, report)
        assert note is not None and note.startswith("**Nothing to describe:**")
        assert str(report.why_nothing()) in note


@pytest.mark.slow
def test_notebook_03_with_no_budget_shows_why_instead_of_raising(tmp_path: Path):
    save_benchmark(tiny_benchmark(n_users=2), tmp_path / "bench")
    papermill.execute_notebook(
        str(NOTEBOOK), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False,
        parameters={"benchmark_dir": str(tmp_path / "bench"), "run_dir": str(tmp_path / "run"),
                    "output_dir": str(tmp_path / "out"), "max_cost_usd": 0},
    )
    cells = json.loads((tmp_path / "out.ipynb").read_text())["cells"]
    shown = ["".join(o.get("data", {}).get("text/markdown", "")) for c in cells if c["cell_type"] == "code"
             for o in c["outputs"]]
    assert any(s.startswith("**Nothing to describe:**") and "higher max_cost_usd" in s for s in shown), shown
