"""The official PersonaLens data for benchmark scripts and fixtures: found, or extracted from ../shared."""

from __future__ import annotations

import contextlib
import os
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from personalens_utils.base.paths import find_official_data

CHECKOUT = Path(__file__).resolve().parents[2]
SHARED_ARCHIVE = CHECKOUT.parent / "shared" / "data" / "personalens-official.tar.xz"
"""Where the team keeps the official archive: ../shared/data beside the checkout."""
SHARED_CODE_ARCHIVE = CHECKOUT.parent / "shared" / "data" / "personalens-official-code.tar.xz"
"""The authors' code (`personalens-official-code/`) and its real output for user 7 (`official-run-user7/`)."""


@contextlib.contextmanager
def official_data_for_script(
    data_dir: os.PathLike[str] | None, archive: os.PathLike[str] | None
) -> Iterator[Path | None]:
    """The official data for a benchmark script: `data_dir`, else the kit's own discovery, else
    `archive` (or the archive in ../shared/data) extracted into a temporary folder; None if none.
    """
    found = Path(data_dir) if data_dir else find_official_data()
    tarball = Path(archive) if archive else (SHARED_ARCHIVE if found is None else None)
    if tarball is None or not tarball.is_file():
        if archive:
            raise FileNotFoundError(f"archive not found: {archive}")
        yield found
        return
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
        print(f"extracted {tarball} in {time.perf_counter() - started:.1f} s")
        yield next(p.parent for p in Path(tmp).rglob("profile") if (p.parent / "task").is_dir())
