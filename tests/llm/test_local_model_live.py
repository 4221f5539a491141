"""The kit against a real model on this machine (`make local-model`): SmolLM2-135M served by llama.cpp.

Opt-in: `make test ARGS="-m local_model"` (or `pytest -m local_model tests/llm/test_local_model_live.py`)
after `make local-model`; `make test` leaves these out. Each test starts its own server from the
installed model on a free port and stops it afterwards, so a server the researcher runs is not touched.
The assistant and the judge are the real model; the user agent (and, for the assistant, the judge) are
the offline stand-in, so what is checked is the kit's handling of real answers, not their quality.
"""

from __future__ import annotations

import importlib.util
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import papermill
import pytest
from support.tiny_benchmark import SITUATION, TASKS, tiny_users

from personalens_utils.data import Benchmark, save_benchmark
from personalens_utils.data.types import User
from personalens_utils.llm import local_model
from personalens_utils.reference.rubric import SCALES
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

pytestmark = pytest.mark.local_model

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SPEC = f"openai@{local_model.URL_VARIABLE}:{local_model.ALIAS}"
JUDGED = ["task_completion", "personalization"]
"""Two dialogue-level dimensions: one call each per dialogue keeps the judge test to a few minutes."""
LIMITS = {"max_concurrency": {"offline": 8, "openai": 1}, "request_timeout_s": 180, "call_deadline_s": 900}
"""llama.cpp's server answers one call at a time; queued calls must not time out."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_model.Served]:
    needed = ("llama_cpp", local_model.MODEL_PACKAGE)
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run `make local-model` before `-m local_model`")
    state = tmp_path_factory.mktemp("local-model")
    server = local_model.start(port=_free_port(), state=state)
    try:
        yield server
    finally:
        local_model.stop(state=state)


def _benchmark(folder: Path, users: list[User], n_scenarios: int) -> Path:
    scenarios = [task.for_user(u.user_id, dict(SITUATION)) for u in users for task in TASKS][:n_scenarios]
    save_benchmark(Benchmark.from_records(users, list(TASKS), scenarios), folder)
    return folder


def _run(name: str, out: Path, parameters: dict[str, object]) -> None:
    papermill.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(out / f"{name}.ipynb"),
                               kernel_name="python3", progress_bar=False, parameters=parameters)


def test_the_local_model_as_assistant_on_two_users(served, tmp_path, monkeypatch):
    monkeypatch.setenv(local_model.URL_VARIABLE, served.url)
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))
    bench = _benchmark(tmp_path / "bench", tiny_users(2, seed=3), 2 * len(TASKS))
    common = {"benchmark_dir": str(bench), "run_dir": str(tmp_path / "run"), **LIMITS}
    _run("03_simulation", tmp_path, {**common, "output_dir": str(tmp_path / "sim"), "assistant_model": SPEC})
    _run("04_judging", tmp_path, {**common, "output_dir": str(tmp_path / "judging")})

    store = RunStore(tmp_path / "run")
    dialogues = store.read(Dialogue)
    assert len(dialogues) == 2 * len(TASKS)
    assert {d.assistant for d in dialogues} == {("openai", f"{local_model.ALIAS} at {served.url}")}
    assert {d.user[0] for d in dialogues} == {"offline"}
    failed = [d.failure for d in dialogues if d.status == "error"]
    assert not failed, failed
    for d in dialogues:
        said = [t.content for t in d.turns if t.role == "assistant"]
        assert said and all(text.strip() for text in said), d.id
        assert d.usage.output_tokens > 0 and d.usage.input_tokens > 0, d.id
        assert 0 <= d.cut_off <= len(said), d.id

    judgments = store.read(Judgment)
    assert {j.dialogue_id for j in judgments} == {d.id for d in dialogues}
    assert {j.status for j in judgments} == {"ok"}  # the offline judge reads every real dialogue

    card = json.loads((tmp_path / "run" / "run_card.json").read_text())
    assert any(local_model.ALIAS in json.dumps(entry) for entry in card["simulations"])


def test_the_local_model_as_judge_of_five_dialogues(served, tmp_path, monkeypatch):
    monkeypatch.setenv(local_model.URL_VARIABLE, served.url)
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))
    bench = _benchmark(tmp_path / "bench", tiny_users(2, seed=4), 5)
    common = {"benchmark_dir": str(bench), "run_dir": str(tmp_path / "run"), **LIMITS}
    _run("03_simulation", tmp_path, {**common, "output_dir": str(tmp_path / "sim")})
    _run("04_judging", tmp_path, {**common, "output_dir": str(tmp_path / "judging"), "judge_model": SPEC,
                                  "dimensions": JUDGED, "judge_offline_dialogues": True})

    store = RunStore(tmp_path / "run")
    dialogues = store.read(Dialogue)
    assert len(dialogues) == 5
    judgments = store.read(Judgment)
    assert {j.judge for j in judgments} == {("openai", f"{local_model.ALIAS} at {served.url}")}
    assert sorted((j.dialogue_id, j.dimension) for j in judgments) == sorted(
        (d.id, dim) for d in dialogues for dim in JUDGED)
    assert {j.status for j in judgments} <= {"ok", "missing"}, [j.failure for j in judgments]
    for j in judgments:
        assert j.raw.strip(), j.id  # the judge's own words are kept either way
        if j.status == "ok":
            scale = SCALES[j.dimension]
            assert j.score is not None and scale.low <= j.score <= scale.high, (j.id, j.score)
        else:  # an answer without a valid score says why, and never becomes a score
            assert j.score is None and j.explanation.startswith("no valid score: "), (j.id, j.explanation)

    missing = sum(j.status == "missing" for j in judgments)
    (j1,) = (tmp_path / "judging").rglob("tableJ1_*.csv")
    counted = pd.read_csv(j1)
    assert int(counted["missing"].sum()) == missing  # Table J1 counts every answer without a valid score
