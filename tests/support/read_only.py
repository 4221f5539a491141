"""Folders this process cannot write, for tests of what the kit does with them.

A non-root process gets a folder (and everything in it) without write permission; root ignores
permissions, so for root they are made immutable (`chattr +i`), which refuses root's writes too.
Where neither is possible the test is skipped, saying why.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _chattr(flag: str, paths: list[Path]) -> bool:
    done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, text=True, check=False)
    return done.returncode == 0


@contextlib.contextmanager
def read_only(folder: Path, *, inside: bool = True) -> Iterator[Path]:
    """`folder` (made if need be) unwritable for this process while the block runs, and with `inside`
    everything in it too (False: what it holds stays writable)."""
    folder.mkdir(parents=True, exist_ok=True)
    as_root = os.geteuid() == 0
    modes = {path: path.stat().st_mode for path in (folder, *(folder.rglob("*") if inside else ()))}
    if as_root and not _chattr("+i", list(modes)):
        pytest.skip(f"cannot make {folder} read-only for root (chattr +i refused)")
    if not as_root:
        for path in modes:
            path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        assert not os.access(folder, os.W_OK), f"{folder} is still writable"
        yield folder
    finally:
        if as_root:
            _chattr("-i", list(modes))
        else:
            for path, mode in modes.items():
                path.chmod(mode)
