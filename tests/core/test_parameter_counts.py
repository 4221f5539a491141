"""No function of the package takes more than 8 parameters: what a run is asked to do travels as one
typed configuration (`SimulationConfig`, `JudgingConfig`), not as long parameter lists."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.source_trees import source_tree

import personalens_utils

PACKAGE = Path(personalens_utils.__file__).parent
MAX_PARAMETERS = 8


def parameter_counts(path: Path) -> list[tuple[str, int]]:
    """(function at line, its parameters besides self/cls) for every function in a file."""
    out = []
    for node in ast.walk(source_tree(path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            bound = names[:1] in (["self"], ["cls"])
            n = len(names) + (a.vararg is not None) + (a.kwarg is not None) - bound
            out.append((f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}", n))
    return out


def test_the_count_sees_keyword_only_parameters() -> None:
    path = PACKAGE / "simulation" / "runner.py"
    counts = dict(parameter_counts(path))
    # benchmark, run, config, and the keyword-only user and sample
    assert any(name.endswith(" estimate_simulation") and n == 5 for name, n in counts.items())


@pytest.mark.parametrize("part", sorted(p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or
                                         (p.is_dir() and (p / "__init__.py").is_file())))
def test_no_function_takes_more_than_eight_parameters(part: str) -> None:
    root = PACKAGE / part
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
    over = [(name, n) for path in files for name, n in parameter_counts(path) if n > MAX_PARAMETERS]
    assert over == []
