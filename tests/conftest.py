"""Shared fixtures. The official archive is extracted once per test session into a temp folder.

Fixtures that test files of several folders use live in `support.shared_fixtures`, registered below.

The archive is looked for in ../shared/data beside the checkout, or at $PERSONALENS_ARCHIVE; the
official code archive likewise, or at $PERSONALENS_CODE_ARCHIVE.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest
from support.checkout import SMALL_OFFICIAL_REPRODUCE, fresh_copy, official_sample, run_reproduce
from support.official_data import SHARED_ARCHIVE, SHARED_CODE_ARCHIVE

pytest_plugins = ["support.shared_fixtures"]

ARCHIVE = Path(os.environ.get("PERSONALENS_ARCHIVE", SHARED_ARCHIVE))
CODE_ARCHIVE = Path(os.environ.get("PERSONALENS_CODE_ARCHIVE", SHARED_CODE_ARCHIVE))


def _extracted(archive: Path, what: str, target: Path) -> Path:
    """`archive` unpacked into `target`; the test skips, naming the path, when it is absent."""
    if not archive.is_file():
        pytest.skip(f"official PersonaLens {what} not found at {archive} (../shared is absent)")
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


@pytest.fixture(scope="session")
def official_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extracted archive: `data/` (profile/, task/) and `res/schema.json`."""
    return _extracted(ARCHIVE, "archive", tmp_path_factory.mktemp("official"))


@pytest.fixture(scope="session")
def official_data(official_root: Path) -> Path:
    return official_root / "data"


@pytest.fixture(scope="session")
def official_schema_path(official_root: Path) -> Path:
    return official_root / "res" / "schema.json"


@pytest.fixture(scope="session")
def official_code_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extracted code archive: `personalens-official-code/` and `official-run-user7/`.

    Read-only by convention: a test that runs the official scripts copies what it needs first.
    """
    return _extracted(CODE_ARCHIVE, "code archive", tmp_path_factory.mktemp("official_code"))


@pytest.fixture(scope="session")
def official_code(official_code_root: Path) -> Path:
    """The authors' code folder (src/, util/, res/), as a user's own copy would be."""
    return official_code_root / "personalens-official-code"


@pytest.fixture(scope="session")
def official_run_user7(official_code_root: Path) -> Path:
    """Real output of the official scripts for user 7 (output/dialogue, output/evaluation, the log)."""
    return official_code_root / "official-run-user7"


@pytest.fixture(scope="session")
def reproduced_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the kit right after a small offline `make reproduce` (support.checkout:
    generated pass, 6 users): `runs/small/generated/` and `runs/LATEST`; what the command printed is
    in `reproduce.log` beside the checkout. Read-only by convention; a test that runs notebooks copies
    it first. Tests using it share the xdist group "reproduced_checkout", so one worker makes it once."""
    checkout = fresh_copy(tmp_path_factory.mktemp("reproduced") / "checkout")
    (checkout.parent / "reproduce.log").write_text(run_reproduce(checkout), encoding="utf-8")
    return checkout


@pytest.fixture(scope="session")
def reproduced_official(tmp_path_factory: pytest.TempPathFactory, official_data: Path) -> Path:
    """A fresh copy of the kit right after a small offline `make reproduce` of the official pass
    (support.checkout: the official data of six users of sample_30): `runs/small/official/`. Read-only
    by convention; tests using it share the xdist group "reproduced_official", so one worker makes it once,
    while the other may make the generated pass's."""
    root = tmp_path_factory.mktemp("reproduced_official")
    bench = official_sample(official_data, root / "official_sample")
    checkout = fresh_copy(root / "checkout")
    log = run_reproduce(checkout, (*SMALL_OFFICIAL_REPRODUCE, "--benchmark-dir", str(bench)))
    (root / "reproduce.log").write_text(log, encoding="utf-8")
    return checkout
