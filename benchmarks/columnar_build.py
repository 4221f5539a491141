"""The columnar copy built from nothing: peak memory of the whole process tree, and time.

    python benchmarks/columnar_build.py [--dialogues 122133] [--store DIR] [--repeat 1]

Makes (or reuses) the synthetic store of `analysis_scale.py` (the paper's 122,133 dialogues by default;
`--dialogues 1221330` is the 10x store), deletes its `_columnar` folder, and builds the copy in a fresh
child process (`Columnar(store).refresh()`, what the first read of a notebook does). Every 10 ms it sums
the resident memory of the child and of every process under it (the refresh's workers) with psutil;
the peak is the largest sum seen (the refreshing process's own peak is shown beside it). Then it reads
the copy once more, which verifies every part's size and checksum, and times that read and the
checksums alone. Target: the build's peak under 1 GB (10^9
bytes) at any store size; exits 1 if it is not met. The store's `_columnar` folder is deleted: point
`--store` at a synthetic store only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import analysis_scale  # the synthetic store

GB = 10**9
TARGET = GB
SAMPLE_S = 0.01

BUILD = """
import sys, time
from personalens_utils.runstore.columnar import Columnar
start = time.perf_counter()
Columnar(sys.argv[1]).refresh()
print(f"RESULT {time.perf_counter() - start}")
"""

READ = """
import json, sys, time
from personalens_utils.runstore import columnar
from personalens_utils.runstore.records import Dialogue, Judgment
cols = columnar.Columnar(sys.argv[1])
start = time.perf_counter()
cols.refresh()
read_s = time.perf_counter() - start
parts = [p for kind in (Dialogue, Judgment) for copy in cols.copies(kind) for p in copy.files()]
start = time.perf_counter()
for part in parts:
    columnar.checksum(part)
hash_s = time.perf_counter() - start
print("RESULT " + json.dumps({"read_s": read_s, "hash_s": hash_s, "parts": len(parts),
                              "bytes": sum(p.stat().st_size for p in parts)}))
"""


def tree_rss(proc: psutil.Process) -> tuple[int, int]:
    """Resident bytes of a process and of every process under it (those that vanish meanwhile count 0),
    and of the process alone."""
    total = alone = 0
    for each in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += each.memory_info().rss
            alone = alone or total
    return total, alone


def build(root: Path) -> tuple[float, int, int]:
    """Build the copy from nothing in a child process: seconds, peak bytes of its process tree and of the
    child alone (the process a notebook's kernel would be)."""
    shutil.rmtree(root / "_columnar", ignore_errors=True)
    child = subprocess.Popen([sys.executable, "-c", BUILD, str(root)], stdout=subprocess.PIPE, text=True)
    proc, peak, peak_alone = psutil.Process(child.pid), 0, 0
    while child.poll() is None:
        try:
            total, alone = tree_rss(proc)
        except psutil.Error:
            break
        peak, peak_alone = max(peak, total), max(peak_alone, alone)
        time.sleep(SAMPLE_S)
    out, _ = child.communicate()
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if child.returncode != 0 or not lines:
        sys.exit(f"building the copy failed (exit status {child.returncode})")
    return float(lines[-1].removeprefix("RESULT ")), peak, peak_alone


def read_again(root: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", READ, str(root)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1].removeprefix("RESULT "))


def run(root: Path, n_dialogues: int, repeat: int) -> bool:
    if analysis_scale._ready(root, n_dialogues):
        print(f"reusing the store in {root}")
    else:
        analysis_scale.build(root, n_dialogues)
        print(f"built a synthetic store of {n_dialogues:,} dialogues in {root}")
    sizes = ", ".join(f"{p.name} {p.stat().st_size / GB:.2f} GB" for p in sorted(root.glob("*.jsonl")))
    print(f"store: {sizes}; load average {psutil.getloadavg()[0]:.1f}")
    peaks = []
    for i in range(repeat):
        seconds, peak, alone = build(root)
        peaks.append(peak)
        print(f"copy built from nothing [{i + 1}/{repeat}]: {seconds:.1f} s, peak RSS of the process tree "
              f"{peak / GB:.2f} GB ({peak / 2**30:.2f} GiB), of the refreshing process alone "
              f"{alone / GB:.2f} GB; load average {psutil.getloadavg()[0]:.1f}")
    again = read_again(root)
    print(f"read of the built copy: {again['read_s']:.2f} s, of which checksums of its {again['parts']:.0f} "
          f"parts ({again['bytes'] / GB:.3f} GB) {again['hash_s']:.2f} s")
    met = max(peaks) < TARGET
    print(f"target copy built in under {TARGET / GB:.0f} GB ({max(peaks) / GB:.2f} GB): "
          f"{'met' if met else 'NOT MET'}")
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dialogues", type=int, default=analysis_scale.PAPER_DIALOGUES)
    parser.add_argument("--store", type=Path, help="keep (and reuse) the synthetic store in this folder")
    parser.add_argument("--repeat", type=int, default=1, help="builds from nothing (default 1)")
    args = parser.parse_args()
    if args.store is not None:
        ok = run(args.store, args.dialogues, args.repeat)
    else:
        with tempfile.TemporaryDirectory(prefix="columnar-build-") as tmp:
            ok = run(Path(tmp), args.dialogues, args.repeat)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
