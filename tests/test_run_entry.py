"""`python -m personalens_utils.run`: a notebook's parameters checked before a kernel starts (an
unknown name refused with the closest valid one, a bad backend or user id with the valid values), and
every failure a few lines long, naming the executed copy when the notebook itself failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from personalens_utils import run

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 5


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _failed(capsys, argv: list[str]) -> str:
    assert run.main(argv) == 1
    captured = capsys.readouterr()
    assert len(_lines(captured.out + captured.err)) <= MAX_LINES, captured.out + captured.err
    return captured.err


def test_a_typo_of_a_parameter_names_the_one_meant(capsys, tmp_path):
    err = _failed(capsys, ["03", str(tmp_path / "03.ipynb"), "-p", "user", "7"])
    assert "parameter user:" in err and "did you mean users?" in err
    assert not (tmp_path / "03.ipynb").exists(), "no kernel started, no executed copy"


def test_a_name_far_from_any_lists_what_the_notebook_takes(capsys, tmp_path):
    err = _failed(capsys, ["simulation", str(tmp_path / "03.ipynb"), "-p", "zzzzzz", "1"])
    assert "parameter zzzzzz:" in err and "users" in err and "backend" in err


def test_an_unknown_backend_is_named_as_backend(capsys, tmp_path):
    err = _failed(capsys, ["03", str(tmp_path / "03.ipynb"), "-p", "backend", "antropic"])
    assert "parameter backend='antropic'" in err and "anthropic" in err and "user_model" not in err


def test_users_not_in_the_benchmark_are_listed_with_those_present(capsys, tmp_path):
    bench = tmp_path / "bench"
    for user in (*range(0, 20), 25):
        (bench / "profile" / f"user{user}").mkdir(parents=True)
    (bench / "task").mkdir()
    err = _failed(capsys, ["03", str(tmp_path / "03.ipynb"), "-p", "users", "7,9999",
                           "-y", f"benchmark_dir: {bench}"])
    assert "parameter users: 9999 not in" in err and "the users present: 0-19, 25" in err


def test_an_unknown_notebook_lists_the_notebooks(capsys):
    err = _failed(capsys, ["99"])
    assert "notebook '99'" in err and "03_simulation" in err


def test_values_are_read_as_papermill_reads_them():
    assert [run.parse_value(t) for t in ("7", "0.5", "True", "None", "7,66", "offline")] == [
        7, 0.5, True, None, "7,66", "offline"]


@pytest.mark.slow
def test_a_failure_inside_the_notebook_prints_the_kit_message_and_the_executed_copy(tmp_path):
    """A real kernel: the notebook raises a kit error; the command prints its message, not the traceback."""
    cells = [
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "size = 1", "outputs": [],
         "execution_count": None},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": "from personalens_utils.session import SessionError\n"
                   "raise SessionError(f'parameter size={size}: too big')"},
    ]
    notebook = tmp_path / "tiny.ipynb"
    notebook.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}, "nbformat": 4,
        "nbformat_minor": 5}))
    executed = tmp_path / "out" / "tiny.ipynb"
    done = subprocess.run([sys.executable, "-m", "personalens_utils.run", str(notebook), str(executed),
                           "-p", "size", "9"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1
    assert len(_lines(done.stdout + done.stderr)) <= MAX_LINES, done.stdout + done.stderr
    assert "SessionError: parameter size=9: too big" in done.stderr
    assert str(executed) in done.stderr and executed.is_file()
