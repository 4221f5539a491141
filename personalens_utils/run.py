"""`python -m personalens_utils.run 03 -p NAME VALUE ...`: one notebook under papermill, its parameters
checked before a kernel starts.

Papermill itself runs any name it is given (an unknown one is a warning, the notebook then runs on its
defaults) and shows a failure as the kernel's whole traceback. Here a parameter name the notebook does not
declare, a backend the kit does not know and a user id the benchmark does not hold are refused before
the kernel starts, with the closest valid name or the valid values; a failure inside the notebook prints
the kit's message and where the executed copy is, a few lines in all, and exits 1.

The notebook's tables and figures go beside the executed copy (the kernel is told its folder through
`paths.OUTPUT_ENV`) unless `-p output_dir` says otherwise; with no executed copy named, the copy and the
outputs go to a new folder of this run, `runs/<the notebook's default output>/<start>-<k>/`. The kernel
starts in the folder the command runs in, so a relative path in a parameter means what it means there.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib.util
import logging
import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
import papermill
import yaml
from nbformat.warnings import MissingIDFieldWarning

from personalens_utils.base import paths
from personalens_utils.base.errors import KitError
from personalens_utils.data import present_users, resolve_users
from personalens_utils.llm.registry import KNOWN_BACKENDS
from personalens_utils.reproduce.notebooks import execute
from personalens_utils.reproduce.notebooks import failure_line as _failure  # one reading of a failure
from personalens_utils.session.parameters import SessionConfig, users_param


class RunError(KitError):
    """A notebook or a parameter the entry point cannot run; the message names it and what is valid."""

    says_all = True


def find_notebook(name: str, notebooks_dir: Path | None = None) -> Path:
    """A notebook by number (`3`, `03`), name (`simulation`, `03_simulation`) or path."""
    given = Path(name)
    if given.suffix == ".ipynb":
        if not given.is_file():
            raise RunError(f"notebook {name}: no such file")
        return given
    folder = notebooks_dir or paths.project_root() / "notebooks"
    found = sorted(folder.glob("*.ipynb"))
    key = name.zfill(2) if name.isdigit() else name
    for notebook in found:
        number, _, title = notebook.stem.partition("_")
        if key in (notebook.stem, number, title):
            return notebook
    raise RunError(f"notebook {name!r}: not one of {', '.join(n.stem for n in found)}")


def default_output(notebook: Path) -> str:
    """The folder under runs/ a notebook's session writes into on its defaults: the `default_output` of
    the stage facade its setup cell opens (`SimulationRun.open(globals())`), or the one a hand-written
    notebook gives `SessionConfig` (else the config's own default); the notebook's name when it opens no
    session or takes no `output_dir` (01 writes a benchmark, not tables)."""
    if "output_dir" not in papermill.inspect_notebook(str(notebook)):
        return notebook.stem
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # IPython magics: not plain Python
            continue
        imported = {alias.asname or alias.name: node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            if getattr(node.func, "id", None) == SessionConfig.__name__:
                given = [k.value for k in node.keywords if k.arg == "default_output"]
                return _constant(given[0]) if given else SessionConfig.default_output
            owner = getattr(node.func, "value", None)
            if getattr(node.func, "attr", None) == "open" and getattr(owner, "id", None) in imported and (
                    declared := _declared_output(imported[owner.id], owner.id)):
                return declared
    return notebook.stem


def _constant(node: ast.expr) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else (
        SessionConfig.default_output)


def _declared_output(module: str, facade: str) -> str | None:
    """A stage facade's `default_output`, read from its module's source (None for a class that declares
    none, e.g. `Session`): importing the stage would cost seconds before the kernel (which imports it
    anyway) starts."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == facade:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", None) == "default_output" \
                        and item.value is not None:
                    return _constant(item.value)
    return None


def parse_value(text: str) -> Any:
    """A `-p` value read as papermill reads it: a whole number, a decimal, True/False, None, else text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False, "None": None}.get(text, text)


def check_parameters(declared: Mapping[str, Any], given: Mapping[str, Any], notebook: str) -> None:
    """Refuse, before a kernel starts, a name the notebook does not declare and a value the kit can tell
    is wrong without running it (a backend, the user ids of the benchmark)."""
    for name in given:
        if name not in declared:
            close = difflib.get_close_matches(name, list(declared), n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}?" if close else f"it takes {', '.join(declared)}"
            raise RunError(f"parameter {name}: {notebook} has no such parameter; {hint}")
    backend = given.get("backend")
    if "backend" in given and backend not in KNOWN_BACKENDS:
        raise RunError(f"parameter backend={backend!r}: use one of {', '.join(KNOWN_BACKENDS)}")
    if given.get("users") is not None:
        _check_users(given)


def _check_users(given: Mapping[str, Any]) -> None:
    try:
        wanted = resolve_users(users_param(given["users"]))
    except (KitError, TypeError, ValueError):
        return  # not a list of ids: the notebook's own check names the samples it knows
    bench = paths.resolve_benchmark_dir(given.get("benchmark_dir"))
    if wanted is None or not paths.is_benchmark(bench):
        return
    present = present_users(bench)
    missing = [u for u in wanted if u not in present]
    if missing:
        raise RunError(f"parameter users: {', '.join(map(str, missing))} not in {bench}; "
                       f"the users present: {_ranges(present)}")


def _ranges(ids: Sequence[int]) -> str:
    """`0-19, 25`: sorted ids with runs written as ranges, short enough for one line."""
    spans: list[list[int]] = []
    for i in sorted(ids):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "none"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m personalens_utils.run", description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("notebook", help="number (03), name (simulation, 03_simulation) or path")
    parser.add_argument("output", nargs="?",
                        help="the executed copy; the notebook's tables and figures go beside it (default: "
                             "a new folder of this run under runs/, for both)")
    parser.add_argument("-p", "--parameters", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a parameter, as papermill takes it")
    parser.add_argument("-y", "--parameters_yaml", action="append", default=[], metavar="YAML",
                        help="parameters as a YAML mapping, as papermill takes them")
    return parser.parse_args(argv)


def _given(args: argparse.Namespace) -> dict[str, Any]:
    given: dict[str, Any] = {}
    for text in args.parameters_yaml:
        loaded = yaml.safe_load(text)
        if not isinstance(loaded, dict):
            raise RunError(f"-y {text!r}: expected a YAML mapping of parameter names to values")
        given.update(loaded)
    given.update({name: parse_value(value) for name, value in args.parameters})
    return given


def prepare(argv: Sequence[str] | None = None) -> tuple[Path, Path, dict[str, Any]]:
    """The notebook, its executed copy and its checked parameters; `RunError` for what the checks refuse.
    With no executed copy named, this run's folder is made (`paths.new_output_dir`) to hold it."""
    args = parse_args(argv)
    notebook = find_notebook(args.notebook)
    given = _given(args)
    check_parameters(papermill.inspect_notebook(str(notebook)), given, notebook.stem)
    if args.output:
        executed = Path(args.output).resolve()
    else:
        executed = paths.new_output_dir(default_output(notebook)).resolve() / f"{notebook.stem}.ipynb"
    return notebook, executed, given


@contextmanager
def outputs_beside(executed: Path) -> Iterator[None]:
    """The kernels started inside write their outputs to the executed copy's folder (`paths.OUTPUT_ENV`);
    this process's environment is as it was afterwards."""
    before = os.environ.get(paths.OUTPUT_ENV)
    os.environ[paths.OUTPUT_ENV] = str(executed.parent)
    try:
        yield
    finally:
        if before is None:
            del os.environ[paths.OUTPUT_ENV]
        else:
            os.environ[paths.OUTPUT_ENV] = before


def main(argv: Sequence[str] | None = None) -> int:
    logging.getLogger("papermill").setLevel(logging.ERROR)  # its per-cell log repeats what we print
    warnings.simplefilter("ignore", MissingIDFieldWarning)  # a notebook written by hand runs as it is
    try:
        notebook, executed, given = prepare(argv)
    except RunError as exc:
        print(exc.short(), file=sys.stderr)
        return 1
    executed.parent.mkdir(parents=True, exist_ok=True)
    print(f"[run] {notebook.stem} -> {executed}", flush=True)
    try:
        with outputs_beside(executed):
            execute(notebook, executed, given, Path.cwd(), notebook.stem)
    except Exception as exc:  # a failure inside the notebook: its message, not the kernel's traceback
        print(_failure(exc), file=sys.stderr)
        print(f"the executed copy, with the traceback: {executed}", file=sys.stderr)
        return 1
    print(f"[run] done: {executed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
