"""A simulation killed part-way (SIGKILL, no cleanup) resumes without duplicates or repeated work."""

from __future__ import annotations

import re
import signal
import time
from collections import Counter

from support.records import stored_lines
from support.slow_simulation import SETTINGS, launch
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import save_benchmark

START = re.compile(r"^dialogue start (\w+) ", re.MULTILINE)


def test_killed_simulation_resumes_without_duplicates(tmp_path):
    bench = tiny_benchmark(n_users=10, seed=5)
    save_benchmark(bench, tmp_path / "bench")
    total = len(bench.scenarios) * len(SETTINGS)
    table = tmp_path / "run" / "dialogues.jsonl"

    first = launch(tmp_path / "bench", tmp_path / "run", tmp_path / "first.log")
    deadline = time.monotonic() + 120
    while len(stored_lines(table)) < 20:
        assert first.poll() is None, f"finished before it could be killed: {first.communicate()}"
        assert time.monotonic() < deadline, "no progress within 120 s"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL

    finished = {r["id"] for r in stored_lines(table)}
    assert 20 <= len(finished) < total

    second = launch(tmp_path / "bench", tmp_path / "run", tmp_path / "second.log")
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    planned, skipped = map(int, out.split()[:2])
    assert skipped == len(finished) and planned == total - len(finished)

    requested_again = set(START.findall((tmp_path / "second.log").read_text())) & finished
    assert not requested_again
    counts = Counter(r["id"] for r in stored_lines(table))
    assert len(counts) == total and set(counts.values()) == {1}
    records = stored_lines(table)
    assert {(r["scenario_id"], r["assistant_setting"]) for r in records} == {
        (sid, s) for sid in bench.scenarios["scenario_id"] for s in SETTINGS}
