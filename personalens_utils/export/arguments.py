"""The arguments the export functions share, checked where they come in: a folder or file given as a
str or any `os.PathLike`, a run store given as a `RunStore` or its folder, a loaded `Benchmark`.

Without the check a wrong argument fails deep inside, as a raw `AttributeError` about a method of
`str`; with it the error names the argument, what it takes and what it got.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from personalens_utils.base.errors import KitError
from personalens_utils.data import Benchmark
from personalens_utils.runstore.store import RunStore

PathArg = str | os.PathLike[str]
StoreArg = RunStore | str | os.PathLike[str]


class ExportArgumentError(KitError, TypeError):
    """An export function was given an argument of a type it cannot use; the message names it."""


def _got(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def as_path(value: PathArg, what: str) -> Path:
    """`value` as a Path, or an error naming the argument `what` (bytes paths are refused too)."""
    if isinstance(value, str | os.PathLike):
        path = os.fspath(value)
        if isinstance(path, str):
            return Path(path)
    raise ExportArgumentError(f"{what} takes a path (a str or an os.PathLike such as pathlib.Path), got "
                              f"{_got(value)}")


def as_store(value: StoreArg, what: str) -> RunStore:
    """`value` as a RunStore: itself, or the store in the folder it names."""
    if isinstance(value, RunStore):
        return value
    if isinstance(value, str | os.PathLike):
        return RunStore(as_path(value, what))
    raise ExportArgumentError(f"{what} takes a RunStore or its folder (a str or os.PathLike), got "
                              f"{_got(value)}")


def as_benchmark(value: Benchmark | None, what: str = "benchmark") -> Benchmark | None:
    """`value` unchanged, unless it is a path: a benchmark folder given where the loaded benchmark belongs
    is named as the mistake it is (anything with the benchmark's attributes passes, as tests' doubles do)."""
    if not isinstance(value, str | bytes | os.PathLike):
        return value
    raise ExportArgumentError(f"{what} takes a loaded Benchmark, got {_got(value)}; load the folder first "
                              "with personalens_utils.data.load_benchmark(folder)")
