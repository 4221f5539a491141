"""A process is a process: what the kit does may not depend on which of its modules a process imported.

Kernels, the columnar copy's workers, the reproduce process and a test runner import different parts of
the package. The copy's schema, the record types, the prompt sets, the offline backend's answers and the
figure style must be the same in all of them, so no module may register anything, or change another
module's state, when it is imported.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.source_trees import source_tree

import personalens_utils

PACKAGE_DIR = Path(personalens_utils.__file__).resolve().parent
DECORATORS = {"dataclass", "cache", "lru_cache", "functools.cache", "functools.lru_cache", "contextmanager",
              "contextlib.contextmanager", "runtime_checkable"}
"""Decorators that only wrap what they decorate; any other one may register it somewhere."""


def _import_time_effects(path: Path) -> list[str]:
    """Module-level statements of `path` that act on something else when the module is imported: a call
    made for its effect, an assignment into another object, a decorator that may register."""
    found = []
    for node in source_tree(path).body:
        where = f"{path.relative_to(PACKAGE_DIR)}:{node.lineno}"
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            found.append(f"{where} calls {ast.unparse(node.value.func)}()")
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        found += [f"{where} assigns into {ast.unparse(t)}" for t in targets
                  if isinstance(t, ast.Attribute | ast.Subscript)]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for deco in node.decorator_list:
                name = ast.unparse(deco.func if isinstance(deco, ast.Call) else deco)
                if name not in DECORATORS:
                    found.append(f"{where} decorates {node.name} with {name}")
    return found


def test_no_module_of_the_package_acts_when_it_is_imported() -> None:
    found = [effect for path in sorted(PACKAGE_DIR.rglob("*.py")) for effect in _import_time_effects(path)]
    assert found == [], "declare it where it is used, not by importing a module: " + "; ".join(found)


PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
import matplotlib as mpl
rc = {k: str(mpl.rcParams[k]) for k in ("font.family", "font.size", "pdf.fonttype", "axes.linewidth")}
from personalens_utils.runstore import columnar
from personalens_utils.runstore.records import Judgment, Dialogue, stored_types
from personalens_utils.prompt_sets import PROMPT_SETS
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.llm.types import CallKind, Request
answered = {}
for kind in CallKind:
    try:
        OfflineBackend().respond(Request(kind=kind, system="", messages=()), "m")
        answered[kind.value] = "answered"
    except Exception as exc:
        answered[kind.value] = "no responder" if "no responder" in str(exc) else "responder ran"
print(json.dumps({
    "schemas": {spec.view: spec.schema() for spec in columnar.TABLES.values()},
    "stamps": {spec.view: spec.stamp() for spec in columnar.TABLES.values()},
    "tables": [kind.table for kind in stored_types()],
    "prompt_sets": sorted(PROMPT_SETS),
    "offline": answered,
    "rc_before_any_figure": rc,
}))
"""

IMPORTS = {
    "the run store only": [],
    "the judging stage": ["personalens_utils.judging"],
    "PERSONA Bench and trust": ["personalens_utils.persona_bench.runner", "personalens_utils.trust.probes"],
    "everything a notebook imports": ["personalens_utils.session", "personalens_utils.reproduce.pipeline",
                                      "personalens_utils.outputs.plots"],
}


@pytest.mark.slow
def test_what_the_kit_declares_is_the_same_in_every_process(tmp_path: Path) -> None:
    seen = {}
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)}
    for what, modules in IMPORTS.items():
        done = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, env=env)
        assert done.returncode == 0, f"{what}: {done.stderr[-2000:]}"
        seen[what] = json.loads(done.stdout.splitlines()[-1])
    first, *others = seen.values()
    for what, facts in zip(list(seen)[1:], others, strict=True):
        assert facts == first, f"a process that imported {what} sees another kit than one that imported none"
    assert "official_score" in first["schemas"]["judgments"]
    assert {"persona_bench", "probe_judgments"} <= set(first["tables"])
    assert "no responder" not in first["offline"].values()


def test_every_record_type_has_a_table_of_its_own() -> None:
    from personalens_utils.runstore.records import RECORD_TYPES, Record

    for module in pkgutil.walk_packages(personalens_utils.__path__, "personalens_utils."):
        importlib.import_module(module.name)
    tables = [kind.table for kind in RECORD_TYPES]
    assert len(set(tables)) == len(tables), f"two record types share a table: {tables}"
    defined = {cls for cls in _subclasses(Record) if "table" in vars(cls) and cls.__module__.startswith(
        "personalens_utils.")}
    assert defined <= set(RECORD_TYPES), f"record types not in RECORD_TYPES: {defined - set(RECORD_TYPES)}"


def _subclasses(cls: type) -> set[type]:
    return {sub for direct in cls.__subclasses__() for sub in {direct, *_subclasses(direct)}}
