"""A fresh copy of the kit, as a new clone has it, and a small offline `make reproduce` run in it.

Tests that check what a researcher meets after `make reproduce` (notebooks on their defaults,
JupyterLab in a browser, the exported tables) work in such a copy: the notebooks' kernels import
the copy's own `personalens_utils` (PYTHONPATH), so `paths.project_root()` is the copy and every
default folder (runs/, data/, runs/LATEST) is the copy's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from personalens_utils.data import PROFILE_DIR, TASK_DIR

ROOT = Path(__file__).resolve().parents[2]
SMALL_REPRODUCE = ("--run", "small", "--passes", "generated", "--generated-users", "6",
                   "--ablation-users", "3", "--max-concurrency", "8")
"""`make reproduce ARGS=...` sized for tests: the generated pass only, 6 users, ablation on 3."""
OFFICIAL_SAMPLE = (7, 66, 132, 139, 207, 230)
"""The first six users of the official `sample_30`: the official pass sized for tests."""
SMALL_OFFICIAL_REPRODUCE = ("--run", "small", "--passes", "official", "--users", "all",
                            "--ablation-users", "3", "--max-concurrency", "8")
"""The official pass on a benchmark folder holding only `OFFICIAL_SAMPLE` (`--benchmark-dir` is added)."""
UNSET = ("PERSONALENS_DATA", "PERSONALENS_CACHE")
"""Environment that would point a copy at folders outside it."""


def tracked_files(root: Path = ROOT) -> list[str]:
    """The files a clone would hold (tracked, plus new files not ignored), as they are in the worktree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout
    return sorted({name for name in listed.split("\0") if name and (root / name).is_file()})


def fresh_copy(target: Path, root: Path = ROOT) -> Path:
    """Copy the clone's files of `root` into `target` (no runs/, data/, .venv or caches)."""
    for name in tracked_files(root):
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target / name)
    return target


def official_sample(official_data: Path, target: Path, users: Sequence[int] = OFFICIAL_SAMPLE) -> Path:
    """An official-layout benchmark folder in `target` holding the official tasks and only `users`:
    the official pass's own data, few enough users for a test to run the whole pass."""
    shutil.copytree(official_data / TASK_DIR, target / TASK_DIR)
    for user in users:
        shutil.copytree(official_data / PROFILE_DIR / f"user{user}", target / PROFILE_DIR / f"user{user}")
    return target


def copy_env(checkout: Path) -> dict[str, str]:
    """The environment of a process (and of the kernels it starts) working in `checkout`."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["PYTHONPATH"] = str(checkout)
    return env


def run_reproduce(checkout: Path, args: Sequence[str] = SMALL_REPRODUCE, timeout: float = 1800) -> str:
    """What `make reproduce ARGS=...` runs, in `checkout` with its own package; returns what it printed
    (standard output, then standard error, where the notebooks' kernels write). The small reproduction
    takes about 8 minutes alone on 2 cores and took 17 with other runs beside it, hence the timeout."""
    done = subprocess.run(
        [sys.executable, "-m", "personalens_utils.reproduce", *args], cwd=checkout, env=copy_env(checkout),
        capture_output=True, text=True, timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(f"reproduce failed ({done.returncode}) in {checkout}:\n{done.stdout[-3000:]}"
                             f"\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr
