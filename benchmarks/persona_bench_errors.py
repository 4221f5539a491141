"""The PERSONA Bench loader's error path on a large malformed file: time and peak memory until the
error that names the place.

    python benchmarks/persona_bench_errors.py [--mb 200] [--fault syntax|utf8] [--at 0.9] [--keep DIR]

A file of about `--mb` MB is made from synthetic users repeated under new names (one user a line, as
`write_synthetic` writes them), with one fault at `--at` of its length: a missing colon after a key
(`syntax`) or a 0xff byte in a post (`utf8`). The loader then runs in a child process, which reports
its resident memory after the imports and its peak, so the figure is the error path's own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from personalens_utils.persona_bench.synthetic import synthetic_users

_CHILD = """
import sys, time
from personalens_utils.persona_bench.data import PersonaDataError, iter_users
def peak():  # this process's own high-water mark (ru_maxrss would count the parent's, kept across exec)
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmHWM:"))
base = peak()
start = time.perf_counter()
try:
    for _ in iter_users(sys.argv[1]):
        pass
    said = "no error"
except PersonaDataError as exc:
    said = f"PersonaDataError: {exc}"
except Exception as exc:
    said = f"{type(exc).__name__} (not a PersonaDataError): {exc}"
took = time.perf_counter() - start
top = peak()
print(f"{took:.1f} s; peak RSS after imports {base:.0f} MiB, at the end {top:.0f} (+{top - base:.0f}) MiB")
print(said[:400])
"""


def write_malformed(target: Path, mb: int, fault: str, at: float) -> Path:
    """About `mb` MB of users, one a line, with one fault in the line at `at` of the file."""
    lines = [json.dumps(posts, ensure_ascii=False).encode() for _, posts in synthetic_users(200, seed=1)]
    per_round = sum(len(line) + 40 for line in lines)
    rounds = max(1, mb * 2**20 // per_round)
    faulty = int(rounds * len(lines) * at)
    with target.open("wb") as fh:
        fh.write(b"{")
        for n in range(rounds * len(lines)):
            line = lines[n % len(lines)]
            if n == faulty:
                line = (line.replace(b'"score": ', b'"score" ', 1) if fault == "syntax"
                        else line.replace(b'"content": "', b'"content": "\xff', 1))
            fh.write(b"," * bool(n) + b'\n"user_%08d": ' % n + line)
        fh.write(b"\n}\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--fault", choices=("syntax", "utf8"), default="syntax")
    parser.add_argument("--at", type=float, default=0.9, help="where the fault sits, as a share of the file")
    parser.add_argument("--keep", type=Path, default=None, help="write the file here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="persona-errors-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        data = write_malformed(folder / f"malformed_{args.fault}.json", args.mb, args.fault, args.at)
        print(f"wrote {data} ({data.stat().st_size / 2**20:.0f} MiB, {args.fault} fault at {args.at:.0%})",
              flush=True)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _CHILD, str(data)], capture_output=True, text=True,
                              check=False)
        print(done.stdout.strip() or done.stderr.strip()[-2000:])
        print(f"(child process {time.perf_counter() - start:.1f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
