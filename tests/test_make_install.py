"""`make install` adds nbstripout's git filter in a git checkout, so JupyterLab's autosave does not
leave tracked notebooks dirty (issue 20), and does nothing (without failing) outside one."""

from __future__ import annotations

import json
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
