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
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]
SMALL_REPRODUCE = ("--run", "small", "--passes", "generated", "--generated-users", "6",
                   "--ablation-users", "3", "--max-concurrency", "8")
"""`make reproduce ARGS=...` sized for tests: the generated pass only, 6 users, ablation on 3."""
UNSET = ("PERSONALENS_DATA", "PERSONALENS_CACHE", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES",
         "ARGS", "RUN", "ASSISTANT")
"""Environment that would point a copy at folders outside it, and what the `make test` running the tests
hands to any `make` below it: make exports its command line's variables (`make test ARGS=...` would reach a
`make reproduce` a test runs as its ARGS)."""


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


def shared_folder(factory: pytest.TempPathFactory) -> Path:
    """The session's temporary folder that every xdist worker sees (the parent of each worker's own base
    folder), or the session's own base folder without xdist."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """`<shared folder>/<name>`, filled by `make` once per session by whichever worker asks first; the
    other workers wait on a file lock beside it and reuse it. An error is kept beside it too, so a worker
    that comes later fails with it at once instead of making the same expensive thing again."""
    shared = shared_folder(factory)
    folder, made, failed = (shared / name, shared / f"{name}.made", shared / f"{name}.failed")
    with FileLock(str(shared / f"{name}.lock")):
        if failed.is_file():
            raise AssertionError(failed.read_text(encoding="utf-8"))
        if not made.is_file():
            if folder.exists():  # a worker that stopped half-way
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            try:
                make(folder)
            except BaseException as exc:  # a timeout too: the others must not start it again
                failed.write_text(f"{name} (made by another worker) failed: {exc}", encoding="utf-8")
                raise
            made.touch()
    return folder


def clone_head(target: Path, root: Path = ROOT) -> Path:
    """A `git clone` of `root`'s committed HEAD into `target`: what a new user has, and nothing the
    worktree holds uncommitted."""
    subprocess.run(["git", "clone", "-q", str(root), str(target)], check=True, capture_output=True, text=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True,
                          text=True).stdout.strip()
    subprocess.run(["git", "checkout", "-q", head], cwd=target, check=True, capture_output=True, text=True)
    return target
