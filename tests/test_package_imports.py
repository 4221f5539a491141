"""The installed package's imports: no test support in it, every module imports alone, and the folders
are floors: no import runs up one, no two parts import each other, few modules lie at the root."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.source_trees import source_tree

import personalens_utils
from personalens_utils.llm.batch import make_custom_id
from personalens_utils.runstore.store import stable_id

PACKAGE_DIR = Path(personalens_utils.__file__).resolve().parent
PACKAGE = PACKAGE_DIR.name
TEST_SUPPORT = ("support", "tests", "conftest", "pytest")
"""Top-level names of test infrastructure (besides the tests' own `test_*` helper modules)."""
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("base", frozenset({"base"})),
    ("reference and outputs", frozenset({"reference", "outputs"})),
    ("prompt templates", frozenset({"prompt_templates"})),
    ("model door and benchmark data", frozenset({"llm", "data"})),
    ("prompt sets", frozenset({"prompt_sets"})),
    ("run store", frozenset({"runstore"})),
    ("assistants", frozenset({"assistants"})),
    ("making stages", frozenset({"generation", "simulation", "judging"})),
    ("measures and labels", frozenset({"measures", "labels"})),
    ("stages", frozenset({"benchmark_validation", "analysis", "trust", "validity", "explore", "persona_bench",
                          "export", "robustness"})),
    ("session", frozenset({"session"})),
    ("top", frozenset({"reproduce", "run"})),
)
"""The package's floors, bottom first, as docs/architecture.md draws them: every top-level part of the
package sits on one, and a module imports only from its own floor and the floors below."""
FLOOR = {part: level for level, (_, parts) in enumerate(LAYERS) for part in parts}
MAX_ROOT_MODULES = 3
"""Modules allowed flat beside `__init__.py`: the rest live in the package of their floor."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(module_name(p) for p in PACKAGE_DIR.rglob("*.py"))


def _nodes(tree: ast.AST, at_load: bool) -> Iterator[ast.AST]:
    """Every node of `tree`, or with `at_load` those Python runs when the module loads: no function body."""
    if not at_load:
        yield from ast.walk(tree)
        return
    for child in ast.iter_child_nodes(tree):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield child
            yield from _nodes(child, at_load)


def imported(path: Path, *, at_load: bool = False) -> set[str]:
    """Absolute names of every module `path` imports (relative imports resolved), at any depth, or with
    `at_load` only those its loading imports (not the ones inside functions)."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in _nodes(source_tree(path), at_load):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_the_scan_sees_relative_and_nested_imports() -> None:
    assert "personalens_utils.llm.types.Request" in imported(PACKAGE_DIR / "llm" / "budget.py")
    assert "personalens_utils.llm.offline.count_tokens" in imported(PACKAGE_DIR / "llm" / "budget.py")
    assert "personalens_utils.reference.schema" in imported(PACKAGE_DIR / "simulation" / "offline.py")


def test_the_scan_at_load_leaves_out_imports_inside_functions() -> None:
    plots = PACKAGE_DIR / "outputs" / "plots.py"
    assert "seaborn" in imported(plots) and "seaborn" not in imported(plots, at_load=True)
    assert "matplotlib.figure" in imported(plots, at_load=True)


def test_no_module_of_the_package_imports_test_support() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE_DIR)} imports {name}"
        for path in PACKAGE_DIR.rglob("*.py")
        for name in imported(path)
        if name.split(".")[0] in TEST_SUPPORT or name.startswith(("test_", f"{PACKAGE}.llm.fake_server"))
    ]
    assert offenders == []


def parts_imported(path: Path) -> set[str]:
    """The top-level parts of the package `path` imports (itself included when it does)."""
    return {name.split(".")[1] for name in imported(path) if name.startswith(f"{PACKAGE}.")}


def part_of(path: Path) -> str:
    return path.relative_to(PACKAGE_DIR).with_suffix("").parts[0]


def test_the_layer_scan_names_what_a_file_reaches_into() -> None:
    assert parts_imported(PACKAGE_DIR / "data" / "types.py") == {"reference", "base"}
    assert "base" in parts_imported(PACKAGE_DIR / "llm" / "cache.py")
    assert part_of(PACKAGE_DIR / "run.py") == "run"


def test_every_part_of_the_package_sits_on_one_floor() -> None:
    parts = {part_of(path) for path in PACKAGE_DIR.rglob("*.py") if path.name != "__init__.py"
             or path.parent != PACKAGE_DIR}
    assert sorted(parts - set(FLOOR)) == [], "give the new part a floor in LAYERS and docs/architecture.md"


def test_no_import_runs_up_a_floor() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE_DIR)} ({LAYERS[FLOOR[part_of(path)]][0]}) imports {part} "
        f"({LAYERS[FLOOR[part]][0]})"
        for path in sorted(PACKAGE_DIR.rglob("*.py")) if part_of(path) in FLOOR
        for part in sorted(parts_imported(path)) if FLOOR.get(part, -1) > FLOOR[part_of(path)]
    ]
    assert offenders == []


def test_no_two_parts_of_the_package_import_each_other() -> None:
    """Within a floor parts may lean on each other (a stage on an earlier one), but never in a circle."""
    edges: dict[str, set[str]] = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        if path.parent != PACKAGE_DIR or path.name != "__init__.py":
            edges.setdefault(part_of(path), set()).update(parts_imported(path) - {part_of(path), "__init__"})
    circles = []
    for start in sorted(edges):
        seen, todo = set(), list(edges[start])
        while todo:
            part = todo.pop()
            if part == start:
                circles.append(start)
                break
            if part not in seen:
                seen.add(part)
                todo.extend(edges.get(part, ()))
    assert circles == []


def test_at_most_three_modules_lie_flat_at_the_package_root() -> None:
    flat = sorted(path.name for path in PACKAGE_DIR.glob("*.py") if path.name != "__init__.py")
    assert len(flat) <= MAX_ROOT_MODULES, flat


def test_the_llm_door_reads_no_record_role_or_stage() -> None:
    """llm/ sits under the data, the prompt sets and everything that stores: it reads prompt labels,
    the reference schema, the cache folder and the kit's errors, nothing more."""
    reached = set().union(*(parts_imported(path) for path in (PACKAGE_DIR / "llm").rglob("*.py")))
    assert reached <= {"llm", "prompt_templates", "reference", "base"}, reached


def package_edges() -> dict[str, set[str]]:
    """The package modules each module may load: those it imports anywhere (a superset of what its
    loading imports), and its parent packages, which Python runs first."""
    known = set(MODULES)
    edges = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        name = module_name(path)
        reached = {".".join(n.split(".")[:i]) for n in imported(path) for i in range(1, n.count(".") + 2)}
        parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        edges[name] = ((reached | parents) & known) - {name}
    return edges


def in_a_cycle(edges: dict[str, set[str]]) -> set[str]:
    """The modules that can reach themselves. Only where a module is part of a cycle does the module a
    process enters it by decide what is half-loaded when; any other module meets only whole modules."""
    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo.extend(edges[module])
        return seen

    return {module for module in edges if module in reach(module)}


def test_a_package_and_the_submodules_its_init_imports_are_a_cycle_and_a_leaf_is_not() -> None:
    cycles = in_a_cycle(package_edges())
    assert {f"{PACKAGE}.llm", f"{PACKAGE}.llm.client"} <= cycles
    assert f"{PACKAGE}.base.errors" not in cycles
    assert 0 < len(cycles) < len(MODULES)


FRESH_IMPORTS = """
import importlib, os, sys, traceback
for lib in sys.argv[1].split(","):
    try:
        importlib.import_module(lib)
    except ImportError:
        pass  # a name imported from a module, not a module itself
alone = [[name] for name in sys.argv[2:] if not name.startswith("+")]
together = [name[1:] for name in sys.argv[2:] if name.startswith("+")]
failed = 0
for names in alone + [together]:
    pid = os.fork()
    if pid == 0:
        for name in names:
            try:
                importlib.import_module(name)
            except BaseException:
                print(f"--- {name}", flush=True)
                traceback.print_exc(file=sys.stdout)
                sys.stdout.flush()
                os._exit(1)
        os._exit(0)
    failed += os.waitpid(pid, 0)[1] != 0
sys.exit(1 if failed else 0)
"""
"""The third-party libraries the package imports as it loads are imported once (not those imported inside
functions, which no import of a module runs: torch alone would cost 4 s). Then each module in a cycle is
imported alone in a forked child that holds none of the package, so a circular import shows whichever
module a process starts from; the others (given with a `+`) are imported one after another in one more
child, since whatever whole modules are loaded before them cannot change how they load."""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_every_module_imports_alone_in_a_fresh_interpreter() -> None:
    libraries = sorted({
        name for path in PACKAGE_DIR.rglob("*.py") for name in imported(path, at_load=True)
        if name.split(".")[0] not in (PACKAGE, "__future__")
    })
    cycles = in_a_cycle(package_edges())
    modules = [name if name in cycles else f"+{name}" for name in MODULES]
    result = subprocess.run([sys.executable, "-c", FRESH_IMPORTS, ",".join(libraries), *modules],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_batch_custom_ids_stay_those_stored_runs_hold() -> None:
    for key, submission in [("judgment-1:0:1", 0), ("x" * 80, 3), ("", 1)]:
        assert make_custom_id(key, submission) == stable_id(key, submission)


NOTEBOOK_FACING = ("session.base", "session.simulation", "session.judging", "session.analysis",
                   "session.trust", "session.validity", "session.persona_bench", "analysis", "trust",
                   "judging", "simulation", "validity", "persona_bench")
"""What the notebooks' first cells import: every kernel pays for what these load."""


def loaded_by_notebook_modules(libraries: set[str]) -> list[str]:
    """Which of `libraries` a fresh interpreter holds after importing the notebook-facing modules."""
    code = (f"import sys\nfor m in {NOTEBOOK_FACING!r}: __import__('{PACKAGE}.' + m)\n"
            f"print(sorted({{n.split('.')[0] for n in sys.modules}} & {set(libraries)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE_DIR.parent).stdout.strip()
    return ast.literal_eval(out)


def test_the_notebook_facing_modules_import_no_provider_sdk_and_no_heavy_library():
    """A notebook on the offline backend never pays for a provider's SDK: anthropic, openai and boto3
    load only when a backend that needs them is built (each takes seconds in every kernel). Nor for
    seaborn, scipy, scikit-learn or torch, loaded by the functions that use them (0.5-4 s each)."""
    heavy = {"anthropic", "openai", "boto3", "seaborn", "scipy", "sklearn", "torch"}
    assert loaded_by_notebook_modules(heavy) == []
