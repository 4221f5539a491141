"""Offline backend speed on one core: dialogue calls per second, end to end and responder alone.

    python benchmarks/offline_backend.py [DATA_DIR] [--archive personalens-official.tar.xz]
                                         [--users sample_50] [--settings base] [--limit N]

End to end: the simulation stage on the official scenarios of `--users`, through LLMClient with
the offline backend into a temporary run store (prompt rendering, accounting and store writes
included). Responder alone: the same requests answered again by the offline backend directly.
The process is pinned to one CPU core. Target: at least 1,000 calls per second.
Data is found as in benchmarks/load_benchmark.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the `support` package

from support.official_data import official_data_for_script

from personalens_utils.data import load_benchmark
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.offline import OFFLINE_LABEL, OfflineBackend
from personalens_utils.llm.types import Request, Response
from personalens_utils.simulation import SimulationConfig, run_simulation

TARGET_CALLS_PER_S = 1000.0


class RecordingOffline(OfflineBackend):
    """The offline backend, keeping every request it answers for the replay."""

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self.requests: list[tuple[Request, str]] = []

    async def acomplete(self, request: Request, model: str) -> Response:
        self.requests.append((request, model))
        return self.respond(request, model)


def _pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        return f"pinned to CPU {core}"
    return "not pinned (no sched_setaffinity here)"


def _measure(data_dir: Path, users: str, settings: list[str], limit: int | None) -> bool:
    print(f"offline backend: {OFFLINE_LABEL}; {_pin_one_core()}")
    bench = load_benchmark(data_dir, users=users)
    print(f"benchmark: {bench}")
    backend = RecordingOffline()
    client = LLMClient(backend, progress=False, use_cache=False)
    with tempfile.TemporaryDirectory() as run_dir:
        start = time.perf_counter()
        summary = run_simulation(bench, run_dir, client, SimulationConfig(settings=settings, limit=limit))
        elapsed = time.perf_counter() - start
    calls = len(backend.requests)
    print(f"simulation: {summary.stored} dialogues ({dict(summary.statuses)}), {calls} calls in "
          f"{elapsed:.1f} s"
          f" -> {calls / elapsed:,.0f} calls/s end to end, {summary.stored / elapsed:,.0f} dialogues/s")
    replay = OfflineBackend()
    kinds: Counter[str] = Counter()
    start = time.perf_counter()
    for request, model in backend.requests:
        replay.respond(request, model)
        kinds[str(request.kind)] += 1
    alone = time.perf_counter() - start
    print(f"responder alone: {calls} calls ({dict(kinds)}) in {alone:.1f} s -> {calls / alone:,.0f} calls/s")
    ok = calls / elapsed >= TARGET_CALLS_PER_S
    print(f"target >= {TARGET_CALLS_PER_S:,.0f} calls/s end to end: {'met' if ok else 'NOT MET'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", nargs="?", type=Path, help="benchmark folder or a parent holding data/")
    parser.add_argument("--archive", type=Path, help="official .tar.xz to extract into a temporary folder")
    parser.add_argument("--users", default="sample_50", help="user sample (default sample_50)")
    parser.add_argument("--settings", nargs="+", default=["base"], help="assistant settings (default base)")
    parser.add_argument("--limit", type=int, default=None, help="simulate at most this many dialogues")
    args = parser.parse_args()
    with official_data_for_script(args.data_dir, args.archive) as data_dir:
        if data_dir is None:
            print("SKIPPED: no official data found (pass DATA_DIR or --archive, or set PERSONALENS_DATA)")
            return
        ok = _measure(data_dir, args.users, args.settings, args.limit)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
