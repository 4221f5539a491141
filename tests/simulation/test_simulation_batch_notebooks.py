"""Notebooks 03 and 04 with `batch=True` against the loopback fake's Message Batches: the simulation's
dialogues in rounds, then judging through batches from the same run store (its batch tables hold the
simulation's entries too), and a rerun of 04 that resumes from that store without submitting again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import papermill
import pytest
from support.fake_batches import FakeBatches
from support.fake_server import FakeLLMServer, content_text
from support.scripted_judge import judge_reply
from support.scripted_models import dialogue_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import save_benchmark
from personalens_utils.judging import ALL_DIMENSIONS
from personalens_utils.prompt_templates.dialogue import USER_SYSTEM
from personalens_utils.runstore.records import Batch, BatchEntry, Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
MODEL = "claude-3-5-haiku"


def reply(api: str, body: dict[str, Any]) -> str:
    """The user agent and assistant as `dialogue_reply` plays them; judge prompts as `judge_reply`."""
    if content_text(body.get("system", "")) != USER_SYSTEM:
        judged = judge_reply(api, body)
        if judged != "This is not a judge prompt.":
            return judged
    return dialogue_reply(api, body)


def run(notebook: str, tmp_path: Path, **parameters: Any) -> None:
    papermill.execute_notebook(
        str(NOTEBOOKS / notebook), str(tmp_path / f"{notebook}.out.ipynb"), kernel_name="python3",
        progress_bar=False,
        parameters={"benchmark_dir": str(tmp_path / "bench"), "run_dir": str(tmp_path / "run"),
                    "output_dir": str(tmp_path / "out"), "backend": "anthropic", "batch": True, **parameters})


@pytest.mark.slow
def test_notebook_04_judges_through_batches_after_a_batch_simulation_and_resumes(tmp_path, monkeypatch):
    save_benchmark(tiny_benchmark(n_users=2, seed=3), tmp_path / "bench")
    with FakeLLMServer(reply=reply) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        batches = FakeBatches(polls_in_progress=0).install(server)
        run("03_simulation.ipynb", tmp_path, user_model=MODEL, assistant_model=MODEL)
        store = RunStore(tmp_path / "run")
        dialogues = store.records(Dialogue)
        assert len(dialogues) == 8 and {d["status"] for d in dialogues} <= {"terminated", "turn_cap"}
        simulated = len(batches.created)
        assert simulated >= 2 and server.stats()["/v1/messages"]["requests"] == 1, "only the preflight"

        run("04_judging.ipynb", tmp_path, judge_model=MODEL)
        judged = len(batches.created)
        assert judged > simulated
        judgments = RunStore(tmp_path / "run").records(Judgment)
        assert len(judgments) == 8 * len(ALL_DIMENSIONS) and {j["status"] for j in judgments} == {"ok"}
        entries = RunStore(tmp_path / "run").records(BatchEntry)
        assert len(RunStore(tmp_path / "run").records(Batch)) == judged

        run("04_judging.ipynb", tmp_path, judge_model=MODEL)
    assert len(batches.created) == judged, "the rerun found every judgment stored: nothing submitted"
    assert RunStore(tmp_path / "run").records(BatchEntry) == entries
    assert RunStore(tmp_path / "run").records(Judgment) == judgments
