"""Shared fixtures. The official archive is extracted once per test session into a temp folder.

The archive is looked for in ../shared/data beside the checkout, or at $PERSONALENS_ARCHIVE.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest
from support.official_data import SHARED_ARCHIVE

ARCHIVE = Path(os.environ.get("PERSONALENS_ARCHIVE", SHARED_ARCHIVE))


@pytest.fixture(scope="session")
def official_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extracted archive: `data/` (profile/, task/) and `res/schema.json`."""
    if not ARCHIVE.is_file():
        pytest.skip(f"official PersonaLens archive not found at {ARCHIVE} (../shared is absent)")
    target = tmp_path_factory.mktemp("official")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(target, filter="data")
    return target


@pytest.fixture(scope="session")
def official_data(official_root: Path) -> Path:
    return official_root / "data"


@pytest.fixture(scope="session")
def official_schema_path(official_root: Path) -> Path:
    return official_root / "res" / "schema.json"
