"""The columnar copy of a store is the same whatever the process that builds it imported (issue 39, item 1):
a worker or a kernel that imported only the run store, one that also imported judging, and one that
imported the whole package each build the copy of the same store, and find the same columns and the same
bytes. At ba410d1 `judging.scoring` registered `official_score` with the copy when imported, so the first
built 14 judgment columns and the others 15."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from support.checkout import ROOT
from support.synthetic_store import build_store

from personalens_utils.runstore.columnar import FOLDER

IMPORTS = {
    "runstore": "import personalens_utils.runstore.store",
    "runstore+judging": "import personalens_utils.runstore.store, personalens_utils.judging",
    "whole package": (
        "import importlib, pkgutil, personalens_utils\n"
        "for info in pkgutil.walk_packages(personalens_utils.__path__, 'personalens_utils.'):\n"
        "    if not info.name.endswith('__main__'):\n"
        "        importlib.import_module(info.name)"
    ),
}
"""What each fresh interpreter imports before it builds the copy (`__main__` modules would run a command)."""
BUILD = ("\nfrom personalens_utils.runstore.columnar import Columnar\n"
         "Columnar(sys.argv[1]).refresh().close()\n")


def _columns(copy: Path) -> dict[str, list[str]]:
    """Each table's Parquet parts' column names, part by part."""
    with duckdb.connect() as con:
        return {f"{part.parent.name}/{part.name}": [row[0] for row in con.execute(
            f"DESCRIBE SELECT * FROM read_parquet('{part}')").fetchall()]
            for part in sorted(copy.rglob("*.parquet"))}


def _files(copy: Path) -> dict[str, bytes]:
    return {str(path.relative_to(copy)): path.read_bytes() for path in sorted(copy.rglob("*"))
            if path.is_file() and path.suffix != ".lock"}


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, Path]:
    """The copy of one synthetic store, built by a fresh interpreter per entry of `IMPORTS`."""
    root = tmp_path_factory.mktemp("columnar_imports")
    store = build_store(root / "store", users=6).root  # any store shows it; a small one builds fast
    built = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name, imports in IMPORTS.items():
        folder = Path(shutil.copytree(store, root / name.replace("+", "_").replace(" ", "_")))
        assert not (folder / FOLDER).exists()
        done = subprocess.run([sys.executable, "-c", f"import sys\n{imports}{BUILD}", str(folder)], cwd=root,
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
        built[name] = folder / FOLDER
    return built


def test_every_process_builds_the_copy_with_the_same_columns(copies):
    columns = {name: _columns(copy) for name, copy in copies.items()}
    assert columns["runstore"], "no Parquet part was built"
    for name in ("runstore+judging", "whole package"):
        for part, found in columns[name].items():
            own = columns["runstore"].get(part, [])
            more, fewer = sorted(set(found) - set(own)), sorted(set(own) - set(found))
            assert found == own, (f"{part} built after importing {name}: columns {more} more and {fewer} "
                                  "fewer than after importing only the run store")


def test_every_process_builds_the_copy_byte_for_byte(copies):
    files = {name: _files(copy) for name, copy in copies.items()}
    for name in ("runstore+judging", "whole package"):
        differing = sorted(f for f in files[name].keys() | files["runstore"].keys()
                           if files[name].get(f) != files["runstore"].get(f))
        assert differing == [], f"the copy built after importing {name} differs from the run store's own"
