"""Two runs of one stage on one run store at once (issue 21, item 1): the second is refused before it
makes a call, in one line naming the store and the other process; nothing is lost."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from support.records import stored_lines
from support.slow_simulation import SETTINGS, launch
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import load_benchmark, save_benchmark
from personalens_utils.llm.client import LLMClient
from personalens_utils.runstore.columnar import FOLDER, Columnar
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import ReproductionStore, RunStore, StoreError
from personalens_utils.simulation import SimulationConfig, run_simulation

CONFIG = SimulationConfig(settings=SETTINGS)


def test_a_second_simulation_on_a_store_being_written_is_refused_naming_the_other_process(tmp_path: Path):
    bench = tiny_benchmark(n_users=10, seed=5)
    save_benchmark(bench, tmp_path / "bench")
    run_dir = tmp_path / "run"
    table = run_dir / "dialogues.jsonl"
    first = launch(tmp_path / "bench", run_dir, tmp_path / "first.log")
    try:
        deadline = time.monotonic() + 120
        while len(stored_lines(table)) < 5:
            assert first.poll() is None, f"finished before the second run started: {first.communicate()}"
            assert time.monotonic() < deadline, "no progress within 120 s"
            time.sleep(0.02)
        before = table.read_bytes()
        with LLMClient("offline", progress=False) as client, pytest.raises(StoreError) as refused:
            run_simulation(load_benchmark(tmp_path / "bench"), run_dir, client, CONFIG)
        assert client.totals()["calls"] == 0, "refused before any call"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)

    message = str(refused.value)
    assert type(refused.value).__name__ == "StoreInUse"
    assert "\n" not in message and str(run_dir) in message and f"process {first.pid} " in message
    assert "delete" not in message
    assert refused.value._render_traceback_() == [f"StoreInUse: {message}"], "one line in Jupyter"
    assert table.read_bytes().startswith(before), "the refused run wrote nothing"

    with LLMClient("offline", progress=False) as client:  # the killed writer holds nothing any more
        report = run_simulation(load_benchmark(tmp_path / "bench"), run_dir, client, CONFIG)
    ids = Counter(d.id for d in RunStore(run_dir).read(Dialogue))
    assert set(Counter(r["id"] for r in stored_lines(table)).values()) == {1}
    assert len(ids) == len(bench.scenarios) * len(SETTINGS) and report.errors == 0


def test_the_writer_lock_is_reentrant_in_one_run_and_refuses_another_store_object(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    other = RunStore(tmp_path)
    with (store.writing("simulation"), store.writing("simulation"),
          pytest.raises(StoreError, match="in use: process"), other.writing("simulation")):
        pass
    with RunStore(tmp_path).writing("simulation"), other.writing("judging"):
        pass  # free again once released; another stage may run beside it


def test_a_notebook_extending_a_reproduction_and_a_run_given_its_folder_exclude_each_other(
    tmp_path: Path,
) -> None:
    reproduction, own = tmp_path / "reproduction", tmp_path / "simulation"
    reproduction.mkdir()
    extending, given = ReproductionStore(reproduction, own), RunStore(own)
    with (
        extending.writing("simulation"),
        pytest.raises(StoreError, match="in use"),
        given.writing("simulation"),
    ):
        pass
    with given.writing("judging"), pytest.raises(StoreError, match="in use"), extending.writing("judging"):
        pass
    assert sorted(p.name for p in reproduction.iterdir()) == []


def test_a_notebooks_own_run_starts_as_the_reproductions_bytes_and_keeps_its_columnar_copy(tmp_path: Path):
    bench = tiny_benchmark(n_users=3, seed=5)
    reproduction = tmp_path / "reproduction"
    with LLMClient("offline", progress=False) as client:
        run_simulation(bench, reproduction, client, CONFIG)
    with Columnar(reproduction) as source:
        stored = source.sql("SELECT id, status FROM dialogues ORDER BY id")
    table = reproduction / "dialogues.jsonl"
    complete = table.read_bytes()
    with table.open("ab") as fh:
        fh.write(b'{"id": "torn')  # a killed writer's last line stays behind
    parts = {p.name: p.stat().st_mtime_ns for p in (reproduction / FOLDER / "dialogues").glob("*.parquet")}

    own = ReproductionStore(reproduction, tmp_path / "own")
    with LLMClient("offline", progress=False) as client:
        run_simulation(bench.subset([0]), own, client, SimulationConfig(settings=SETTINGS, repeats=2))
    copied = (tmp_path / "own" / "dialogues.jsonl").read_bytes()
    assert copied.startswith(complete) and b"torn" not in copied and len(copied) > len(complete)
    kept = tmp_path / "own" / FOLDER / "dialogues"
    assert {p.name: p.stat().st_mtime_ns for p in kept.iterdir() if p.name in parts} == parts, \
        "the reproduction's parts were copied as they were, not made again"
    with Columnar(tmp_path / "own") as copy:
        after = copy.sql("SELECT id, status FROM dialogues ORDER BY id")
    assert set(stored["id"]) < set(after["id"]), "the copy continued from the reproduction's parts"
    assert RunStore(tmp_path / "own").records(Dialogue) == [
        *RunStore(reproduction).records(Dialogue),
        *[r for r in RunStore(tmp_path / "own").records(Dialogue) if r["id"] not in set(stored["id"])]]
    assert (tmp_path / "own" / "run_card.json").is_file()
