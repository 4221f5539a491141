"""A simulation in a child process, slow enough (20 ms a call) to be killed part-way, for the kill and
concurrent-writer tests. The child logs each dialogue it starts to the log file it is given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.checkout import ROOT

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


def launch(bench_dir: Path, run_dir: Path, log_path: Path) -> subprocess.Popen:
    """`SCRIPT` in a child process on the kit's checkout, its output piped."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(bench_dir), str(run_dir), str(log_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
