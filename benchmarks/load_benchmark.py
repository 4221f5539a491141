"""Time load_benchmark on the official data (all 1,500 users) and print the counts and memory used.

    python benchmarks/load_benchmark.py [DATA_DIR] [--archive personalens-official.tar.xz] [--repeat N]

Without DATA_DIR the data is found via $PERSONALENS_DATA or data/personalens/ in the checkout, else
the archive in ../shared/data is used if present; with --archive the tarball is extracted into a
temporary folder first. Target: under 15 s on 2 cores.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the `support` package

from support.official_data import official_data_for_script

from personalens_utils.data import load_benchmark

TARGET_SECONDS = 15.0


def _rss_mb() -> float:
    """Current resident memory of this process, in MB (psutil: the same on Linux, macOS and Windows)."""
    return psutil.Process().memory_info().rss / 2**20


def _measure(data_dir: Path, repeat: int, users: str | None) -> None:
    before = _rss_mb()
    start = time.perf_counter()
    bench = load_benchmark(data_dir, users=users)
    times = [time.perf_counter() - start]
    held = _rss_mb() - before  # the first load: later ones reuse memory the allocator kept
    for _ in range(repeat - 1):
        del bench
        gc.collect()
        start = time.perf_counter()
        bench = load_benchmark(data_dir, users=users)
        times.append(time.perf_counter() - start)
    counts = bench.scenarios["task_type"].value_counts()
    kinds = [t.task_type for t in bench.tasks.values()]
    print(f"data: {bench.root}")
    print(f"users: {len(bench.users)}   task definitions: {len(kinds)} "
          f"({kinds.count('SD')} SD, {kinds.count('MD')} MD)")
    print(f"scenarios: {len(bench.scenarios)} ({counts.get('SD', 0)} SD, {counts.get('MD', 0)} MD)")
    print(f"load time: best {min(times):.2f} s, worst {max(times):.2f} s over {repeat} run(s) "
          f"(target < {TARGET_SECONDS:.0f} s)")
    print(f"memory held by the loaded benchmark: ~{held:.0f} MB RSS (first load); process peak "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if min(times) > TARGET_SECONDS:
        print("SLOWER THAN TARGET", file=sys.stderr)
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", nargs="?", type=Path, help="benchmark folder or a parent holding data/")
    parser.add_argument("--archive", type=Path, help="official .tar.xz to extract into a temporary folder")
    parser.add_argument("--repeat", type=int, default=3, help="timed loads (best and worst are printed)")
    parser.add_argument("--users", default=None, help="sample name (e.g. sample_50); default all users")
    args = parser.parse_args()
    with official_data_for_script(args.data_dir, args.archive) as data_dir:
        if data_dir is None:
            print("SKIPPED: no official data found (pass DATA_DIR or --archive, or set PERSONALENS_DATA)")
        else:
            _measure(data_dir, args.repeat, args.users)


if __name__ == "__main__":
    main()
