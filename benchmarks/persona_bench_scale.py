"""PERSONA Bench at the authors' full size: write synthetic data of 3,878 users (about 19k posts and
111k conversation threads, as their README reports), then load it and build every item of the three
tasks and three settings, printing the time and peak memory of each step.

    python benchmarks/persona_bench_scale.py [--users 3878] [--data FILE] [--keep DIR]

The loader streams the file one user at a time and the items are streamed too (two passes: the
first finds the authors' label balancing threshold and each user's history example), so peak memory
stays near one user's posts plus the small per-user survey, whatever the file size. `--data` reuses
an existing file (e.g. the authors' own).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil

from personalens_utils.persona_bench.data import iter_users
from personalens_utils.persona_bench.items import iter_items
from personalens_utils.persona_bench.synthetic import FULL_SIZE_USERS, write_synthetic


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def _peak_mb() -> float:
    """Peak resident memory of this process so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=FULL_SIZE_USERS)
    parser.add_argument("--data", type=Path, default=None, help="an existing merged_posts_remapped.json")
    parser.add_argument("--keep", type=Path, default=None, help="write the synthetic data here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="persona-scale-") as scratch:
        data = args.data
        if data is None:
            start = time.perf_counter()
            data = write_synthetic(args.keep or Path(scratch), args.users, seed=0)
            print(
                f"wrote {data} ({data.stat().st_size / 2**20:.0f} MB, {args.users} users) in "
                f"{time.perf_counter() - start:.1f} s; peak RSS {_peak_mb():.0f} MB",
                flush=True,
            )
        start, base = time.perf_counter(), _rss_mb()
        users = posts = threads = comments = 0
        for user in iter_users(data):
            users += 1
            posts += len(user.posts)
            threads += sum(len(p.comments) for p in user.posts)
            comments += sum(1 for p in user.posts for _ in p.walk())
        print(
            f"loaded (streamed) {users} users, {posts} posts, {threads} conversation threads, {comments} "
            f"comments in {time.perf_counter() - start:.1f} s; RSS {_rss_mb():.0f} MB "
            f"(+{_rss_mb() - base:.0f}), peak {_peak_mb():.0f} MB",
            flush=True,
        )
        start = time.perf_counter()
        counts: Counter[tuple[str, str]] = Counter()
        prompt_chars = 0
        for item in iter_items(data):
            counts[(item.task, item.setting)] += 1
            prompt_chars += len(item.prompt)
        print(
            f"built {sum(counts.values())} items ({prompt_chars / 2**20:.0f} MB of prompt text, streamed) in "
            f"{time.perf_counter() - start:.1f} s; RSS {_rss_mb():.0f} MB, peak {_peak_mb():.0f} MB"
        )
        for (task, setting), n in sorted(counts.items()):
            print(f"  {task} {setting}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
