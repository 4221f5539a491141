"""`make install` adds nbstripout's git filter in a git checkout, so JupyterLab's autosave does not
leave tracked notebooks dirty (issue 20), and does nothing (without failing) outside one; the pytest
and pytest-xdist it installs keep `make test`'s groups together."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from support.checkout import copy_env, fresh_copy

MAKE = ("make", "-o", f"{sys.prefix}/.installed", "git-filter", f"VENV={sys.prefix}")
"""The install's git step on the venv running the tests (-o: the packages are not installed again)."""
GIT = ("git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main")


def _run(command: tuple[str, ...] | list[str], cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, env=copy_env(cwd), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_git_filter_is_installed_in_a_git_checkout_and_skipped_outside(tmp_path):
    copy = fresh_copy(tmp_path / "copy")
    _run(MAKE, copy)  # a folder that is no git checkout: nothing to install, no error
    assert not (copy / ".git").exists()
    _run([*GIT, "init", "-q"], copy)
    _run([*GIT, "add", "-A"], copy)
    _run([*GIT, "commit", "-qm", "clone"], copy)
    _run(MAKE, copy)
    assert "-m nbstripout" in _run(["git", "config", "filter.nbstripout.clean"], copy)
    notebook = copy / "notebooks" / "06_analysis.ipynb"
    saved = json.loads(notebook.read_text(encoding="utf-8"))
    code = next(cell for cell in saved["cells"] if cell["cell_type"] == "code")
    code["execution_count"] = 3
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["run store runs/x\n"]}]
    notebook.write_text(json.dumps(saved, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert _run(["git", "diff", "--stat"], copy) == ""  # the autosaved outputs are no change
    _run(["git", "add", str(notebook)], copy)
    assert _run(["git", "status", "--porcelain"], copy) == ""  # nothing to commit
    staged = json.loads(_run(["git", "show", ":notebooks/06_analysis.ipynb"], copy))
    assert all(not cell.get("outputs") for cell in staged["cells"])


GROUPED = """import pytest
pytestmark = pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(8))
def test_one(i):
    pass
"""


def test_make_test_keeps_an_xdist_group_on_one_worker(tmp_path):
    """`make test` runs `pytest -n 2 --dist loadgroup`, and the tests of a shared reproduction are one
    group so that one worker builds it once. With pytest 9.2 and pytest-xdist 3.8 the group mark was
    silently ignored and both workers built each reproduction (about 10 minutes of the run)."""
    (tmp_path / "test_grouped.py").write_text(GROUPED, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                           "-p", "no:cacheprovider", "test_grouped.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    workers = re.findall(r"^\[(gw\d+)\].* PASSED ", done.stdout, flags=re.MULTILINE)
    assert len(workers) == 8 and len(set(workers)) == 1, done.stdout[-2000:]


SCHEDULED = """import time
import pytest
from support.scheduling import JourneysFirst

def pytest_xdist_make_scheduler(config, log):
    return JourneysFirst(config, log)
"""
TWO_GROUPS = """import time
import pytest

@pytest.mark.xdist_group("journeys")
@pytest.mark.parametrize("i", range(3))
def test_chain(i):
    time.sleep(0.5)

@pytest.mark.xdist_group("bigger")
@pytest.mark.parametrize("i", range(6))
def test_other(i):
    pass

@pytest.mark.xdist_group("big")
@pytest.mark.parametrize("i", range(5))
def test_more(i):
    pass

@pytest.mark.parametrize("i", range(6))
def test_single(i):
    pass

@pytest.mark.xdist_group("slow:few")
@pytest.mark.parametrize("i", range(2))
def test_slow(i):
    time.sleep(0.2)
"""


def test_the_journeys_group_is_handed_out_first_though_other_groups_are_bigger(tmp_path):
    """The journeys' chain decides when `make test` ends: its worker starts on it at once, though xdist
    hands bigger groups out first, and the other worker starts on the slow group (support.scheduling)."""
    (tmp_path / "conftest.py").write_text(SCHEDULED, encoding="utf-8")
    (tmp_path / "test_groups.py").write_text(TWO_GROUPS, encoding="utf-8")
    env = {**copy_env(tmp_path), "PYTHONPATH": str(Path(__file__).parent)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                           "-p", "no:cacheprovider", "test_groups.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    ran = re.findall(r"^\[(gw\d+)\].* PASSED (test_groups\.py::\w+)", done.stdout, flags=re.MULTILINE)
    chain = {worker for worker, test in ran if test.endswith("test_chain")}
    assert len(ran) == 22 and len(chain) == 1, done.stdout[-2000:]
    (worker,) = chain
    mine = [test for who, test in ran if who == worker]
    assert mine[:3] == ["test_groups.py::test_chain"] * 3, done.stdout[-2000:]
    others = [test for who, test in ran if who != worker]
    assert others[:2] == ["test_groups.py::test_slow"] * 2, done.stdout[-2000:]
