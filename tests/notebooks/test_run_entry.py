"""`python -m personalens_utils.run`: a notebook's parameters checked before a kernel starts (an
unknown name refused with the closest valid one, a bad backend or user id with the valid values), and
every failure a few lines long, naming the executed copy when the notebook itself failed."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from personalens_utils import run
from personalens_utils.reproduce import notebooks
from personalens_utils.session.simulation import SimulationRun

ROOT = Path(__file__).resolve().parents[2]
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
         "source": "from personalens_utils.session.parameters import SessionError\n"
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


def _session_notebook(path: Path, bench: Path) -> Path:
    """A notebook that opens a session on `bench` and writes one table to its output folder."""
    cells = [
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "output_dir = None",
         "outputs": [], "execution_count": None},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": "import pandas as pd\n"
                   "from personalens_utils.session.base import Session\n"
                   "from personalens_utils.session.parameters import SessionConfig\n"
                   "from personalens_utils.outputs.tables import save_table\n"
                   f"session = Session.open(SessionConfig(benchmark_dir={str(bench)!r},\n"
                   "    output_dir=output_dir, default_output='tiny', default_run_store=False))\n"
                   "save_table(pd.DataFrame({'x': [1]}), session.output_dir, 1, 'tiny', 'caption')"},
    ]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}, "nbformat": 4,
        "nbformat_minor": 5}))
    return path


def test_with_no_executed_copy_named_the_run_gets_a_new_folder_under_the_notebooks_default(
        tmp_path, monkeypatch):
    monkeypatch.setattr(run.paths, "runs_dir", lambda: tmp_path / "runs")
    notebook = _session_notebook(tmp_path / "tiny.ipynb", tmp_path / "bench")
    assert run.default_output(notebook) == "tiny"
    assert run.default_output(ROOT / "notebooks" / "06_analysis.ipynb") == "analysis"
    assert run.default_output(ROOT / "notebooks" / "03_simulation.ipynb") == SimulationRun.default_output
    assert run.default_output(ROOT / "notebooks" / "01_generation.ipynb") == "01_generation"  # no output_dir
    first, second = (run.prepare([str(notebook)])[1] for _ in range(2))
    assert first.parent != second.parent and first.name == second.name == "tiny.ipynb"
    assert first.parent.parent == second.parent.parent == tmp_path / "runs" / "tiny"
    assert run.paths.newest_output("tiny") == second.parent


@pytest.mark.slow
def test_a_notebook_run_through_the_entry_point_writes_beside_its_executed_copy(tmp_path, monkeypatch):
    """A real kernel told the executed copy's folder: two runs, two folders, neither overwritten; the
    parameter `output_dir` given still wins."""
    monkeypatch.delenv(run.paths.OUTPUT_ENV, raising=False)
    bench = tmp_path / "bench"
    (bench / "profile" / "user0").mkdir(parents=True)
    (bench / "task").mkdir()
    notebook = _session_notebook(tmp_path / "tiny.ipynb", bench)
    for name in ("a", "b"):
        assert run.main([str(notebook), str(tmp_path / name / "tiny.ipynb")]) == 0
        assert (tmp_path / name / "tables" / "table1_tiny.csv").is_file()
    assert run.paths.OUTPUT_ENV not in run.os.environ  # the entry point's process is as it was
    assert run.main([str(notebook), str(tmp_path / "c" / "tiny.ipynb"), "-p", "output_dir",
                     str(tmp_path / "mine")]) == 0
    assert (tmp_path / "mine" / "tables" / "table1_tiny.csv").is_file()
    assert not (tmp_path / "c" / "tables").exists()
    said = (tmp_path / "b" / "tiny.ipynb").read_text(encoding="utf-8")
    assert f"this run's tables and figures go to {tmp_path / 'b'}" in said


def test_kernels_talk_over_sockets_of_their_own(monkeypatch, tmp_path):
    """Two kernels never race for a TCP port: each gets Unix sockets under a prefix of its own in
    Jupyter's runtime folder; a runtime folder too deep for a socket path falls back to TCP."""
    with tempfile.TemporaryDirectory() as short:  # tmp_path is too deep for a socket path
        monkeypatch.setenv("JUPYTER_RUNTIME_DIR", short)
        first, second = (notebooks.kernel_config()["KernelManager"] for _ in range(2))
    assert first["transport"] == second["transport"] == "ipc"
    assert first["ip"] != second["ip"] and Path(first["ip"]).parent == Path(short)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / ("deep" * 30)))
    assert "transport" not in notebooks.kernel_config()["KernelManager"]
