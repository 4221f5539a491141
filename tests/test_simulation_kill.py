"""A simulation killed part-way (SIGKILL, no cleanup) resumes without duplicates or repeated work."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
from test_simulation_support import tiny_benchmark

from personalens_utils.data import save_benchmark

SETTINGS = ["base", "base+I", "base+all"]

SCRIPT = r"""
import asyncio, logging, sys
from personalens_utils.data import load_benchmark
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.simulation import SimulationConfig, run_simulation

class SlowOffline(OfflineBackend):
    async def acomplete(self, request, model):
        await asyncio.sleep(0.02)
        return self.respond(request, model)

bench_dir, run_dir, log_path = sys.argv[1:4]
handler = logging.FileHandler(log_path)
log = logging.getLogger("personalens_utils.simulation")
log.addHandler(handler)
log.setLevel(logging.DEBUG)
client = LLMClient(SlowOffline(), max_concurrency=4, progress=False)
summary = run_simulation(load_benchmark(bench_dir), run_dir, client, SimulationConfig(settings=SETTINGS))
print(summary.planned, summary.already_done, dict(summary.statuses))
""".replace("SETTINGS", repr(SETTINGS))

START = re.compile(r"^dialogue start (\w+) ", re.MULTILINE)


def stored_lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = path.read_bytes().splitlines(keepends=True)
    return [orjson.loads(line) for line in lines if line.endswith(b"\n")]


def launch(bench_dir: Path, run_dir: Path, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(bench_dir), str(run_dir), str(log_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


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
