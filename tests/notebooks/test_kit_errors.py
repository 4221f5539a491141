"""The kit's own errors are short (issue 21 item 9, issue 20's missing key): every exception class of
the package derives from `KitError`, which IPython shows as its message and one line saying how to
see the traceback; `%xmode Verbose` or PERSONALENS_TRACEBACK=1 shows the traceback. A notebook run
on the anthropic backend without a key stops in a few lines naming ANTHROPIC_API_KEY, and writes
neither records nor a run folder; the command line says it in one message and exits with code 1."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from support.checkout import copy_env
from support.notebook_output import MAX_LINES, error_lines
from support.tiny_benchmark import tiny_benchmark

import personalens_utils
from personalens_utils.base import errors
from personalens_utils.data import save_benchmark

ROOT = Path(__file__).resolve().parents[2]
KEY_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")


def _package_exceptions() -> list[type[Exception]]:
    """Every exception class the package defines (warnings are not errors)."""
    found = []
    for module in pkgutil.walk_packages(personalens_utils.__path__, f"{personalens_utils.__name__}."):
        loaded = importlib.import_module(module.name)
        classes = [c for _, c in inspect.getmembers(loaded, inspect.isclass) if c.__module__ == module.name]
        found += [c for c in classes if issubclass(c, Exception) and not issubclass(c, Warning)]
    return found


SIGNALS = {"personalens_utils.runstore.engine.Pending", "personalens_utils.judging.batch._Awaited",
           "personalens_utils.simulation.batch.RoundFailed"}
"""Exceptions that carry a work item back to the engine (answers still awaited); none reaches a user."""


def test_every_exception_class_of_the_package_is_a_kit_error():
    classes = _package_exceptions()
    assert len(classes) >= 20, classes  # the scan saw the package's errors
    names = {f"{c.__module__}.{c.__qualname__}" for c in classes}
    assert names >= SIGNALS, "a signal exception was renamed: update SIGNALS"
    assert sorted(n for c in classes if not issubclass(c, errors.KitError)
                  and (n := f"{c.__module__}.{c.__qualname__}") not in SIGNALS) == []


@pytest.fixture
def no_key(monkeypatch, tmp_path) -> Path:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(errors.FULL_TRACEBACK_VARIABLE, raising=False)
    bench = tmp_path / "bench"
    save_benchmark(tiny_benchmark(n_users=1), bench)
    return bench


@pytest.mark.slow
def test_a_notebook_without_the_key_stops_in_a_few_lines_and_writes_nothing(no_key, tmp_path):
    run_dir, output_dir = tmp_path / "run", tmp_path / "out"
    executed = tmp_path / "03.ipynb"
    with pytest.raises(papermill.PapermillExecutionError) as caught:
        papermill.execute_notebook(
            str(ROOT / "notebooks" / "03_simulation.ipynb"), str(executed), kernel_name="python3",
            progress_bar=False,
            parameters={"backend": "anthropic", "benchmark_dir": str(no_key), "run_dir": str(run_dir),
                        "output_dir": str(output_dir)})
    shown = error_lines(executed)
    assert caught.value.ename == "PreflightError"
    assert 1 <= len(shown) <= MAX_LINES, shown
    assert "ANTHROPIC_API_KEY" in shown[0] and "Set ANTHROPIC_API_KEY" in shown[0]
    assert len(str(caught.value).strip().splitlines()) <= MAX_LINES  # what papermill reports
    assert not run_dir.exists() and not output_dir.exists()


def _raising_notebook(path: Path, first: str) -> None:
    cells = [new_code_cell(first), new_code_cell(
        "from personalens_utils.llm.specs import ModelSpec\nModelSpec.parse('openai@1x:m', 'offline')")]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.mark.slow
@pytest.mark.parametrize("first, full", [("pass", False), ("%xmode Verbose", True)])
def test_the_full_traceback_is_one_flag_away(first, full, monkeypatch, tmp_path):
    monkeypatch.delenv(errors.FULL_TRACEBACK_VARIABLE, raising=False)
    source, executed = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    _raising_notebook(source, first)
    with pytest.raises(papermill.PapermillExecutionError):
        papermill.execute_notebook(str(source), str(executed), kernel_name="python3", progress_bar=False)
    shown = error_lines(executed)
    assert shown[0 if not full else -1].startswith("SpecError")
    if full:
        assert len(shown) > 5 and any("_check_var" in line for line in shown), shown
    else:
        assert shown == [shown[0], errors.HOW_TO_SEE_THE_TRACEBACK] and "after '@' name the" in shown[0]


@pytest.mark.slow
def test_the_environment_variable_shows_the_full_traceback(monkeypatch, tmp_path):
    monkeypatch.setenv(errors.FULL_TRACEBACK_VARIABLE, "1")
    source, executed = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    _raising_notebook(source, "pass")
    with pytest.raises(papermill.PapermillExecutionError):
        papermill.execute_notebook(str(source), str(executed), kernel_name="python3", progress_bar=False)
    assert any("_check_var" in line for line in error_lines(executed))


def test_the_command_line_without_the_key_says_so_once_and_writes_nothing(tmp_path):
    run = f"nokey-{tmp_path.name}"
    env = {k: v for k, v in copy_env(ROOT).items() if k not in KEY_VARS}
    done = subprocess.run([sys.executable, "-m", "personalens_utils.reproduce", "--backend", "anthropic",
                           "--run", run], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "needs ANTHROPIC_API_KEY in the environment: export ANTHROPIC_API_KEY=" in lines[0]
    assert done.stdout == ""
    assert not (ROOT / "runs" / run).exists()


def test_a_kit_error_on_the_command_line_is_one_message_and_exit_code_1(tmp_path, monkeypatch, capsys):
    from personalens_utils.reproduce import cli
    from personalens_utils.runstore.store import StoreError

    def broken(settings):
        raise StoreError(f"{tmp_path}/dialogues.jsonl:3: not valid JSON")

    monkeypatch.setattr(cli, "reproduce", broken)
    monkeypatch.delenv(errors.FULL_TRACEBACK_VARIABLE, raising=False)
    assert cli.main(["--run", "r", "--passes", "generated"]) == 1
    message = f"[reproduce] StoreError: {tmp_path}/dialogues.jsonl:3: not valid JSON\n"
    assert capsys.readouterr().err == message
    monkeypatch.setenv(errors.FULL_TRACEBACK_VARIABLE, "1")
    with pytest.raises(StoreError):
        cli.main(["--run", "r", "--passes", "generated"])
