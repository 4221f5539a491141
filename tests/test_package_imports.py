"""The installed package's imports: no test support in it, every module imports alone, llm/ and the
layers it reads (prompts/, reference/, paths) at the bottom."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import personalens_utils
from personalens_utils.llm.batch import make_custom_id
from personalens_utils.runstore.store import stable_id

PACKAGE_DIR = Path(personalens_utils.__file__).resolve().parent
PACKAGE = PACKAGE_DIR.name
TEST_SUPPORT = ("support", "tests", "conftest", "pytest")
"""Top-level names of test infrastructure (besides the tests' own `test_*` helper modules)."""
BOTTOM_LAYERS = {
    "errors": set(),
    "reference": {"reference", "errors"},
    "paths": {"errors"},
    "prompts": {"prompts", "reference", "paths", "errors"},
    "llm": {"llm", "prompts", "reference", "paths", "errors"},
}
"""The layers under every stage, each with the parts of the package it may import (itself included).
`errors` (the kit's error base) is under all of them; llm/ reads prompt labels, the reference schema
and regions, and the cache folder; none of those reaches back into data/, a stage, the store or the
records."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(module_name(p) for p in PACKAGE_DIR.rglob("*.py"))


def imported(path: Path) -> set[str]:
    """Absolute names of every module `path` imports (relative imports resolved), at any depth."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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
    assert "personalens_utils.reference.schema" in imported(PACKAGE_DIR / "llm" / "offline" / "dialogue.py")


def test_no_module_of_the_package_imports_test_support() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE_DIR)} imports {name}"
        for path in PACKAGE_DIR.rglob("*.py")
        for name in imported(path)
        if name.split(".")[0] in TEST_SUPPORT or name.startswith(("test_", f"{PACKAGE}.llm.fake_server"))
    ]
    assert offenders == []


def package_parts_imported(layer: str) -> dict[str, set[str]]:
    """For each file of `layer` (a module or a package), the top-level parts of the package it imports."""
    root = PACKAGE_DIR / layer
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]
    return {
        path.relative_to(PACKAGE_DIR).as_posix(): {
            name.split(".")[1] for name in imported(path) if name.startswith(f"{PACKAGE}.")
        }
        for path in files
    }


def test_the_layer_scan_names_what_a_file_reaches_into() -> None:
    assert package_parts_imported("data")["data/types.py"] == {"reference", "errors"}
    assert "paths" in package_parts_imported("llm")["llm/cache.py"]


@pytest.mark.parametrize("layer", sorted(BOTTOM_LAYERS))
def test_the_bottom_layers_import_only_what_is_below_them(layer: str) -> None:
    offenders = {
        where: sorted(parts - BOTTOM_LAYERS[layer])
        for where, parts in package_parts_imported(layer).items()
        if parts - BOTTOM_LAYERS[layer]
    }
    assert offenders == {}, f"{layer} must not depend on the layers above it"


FRESH_IMPORTS = """
import importlib, os, sys, traceback
for lib in sys.argv[1].split(","):
    try:
        importlib.import_module(lib)
    except ImportError:
        pass  # a name imported from a module, not a module itself
failed = 0
for name in sys.argv[2:]:
    pid = os.fork()
    if pid == 0:
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
"""Third-party libraries are imported once; then each package module is imported alone in a forked
child that holds none of the package, so a circular or missing import inside the package shows."""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_every_module_imports_alone_in_a_fresh_interpreter() -> None:
    libraries = sorted(
        name for path in PACKAGE_DIR.rglob("*.py") for name in imported(path)
        if name.split(".")[0] not in (PACKAGE, "__future__")
    )
    result = subprocess.run([sys.executable, "-c", FRESH_IMPORTS, ",".join(libraries), *MODULES],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_batch_custom_ids_stay_those_stored_runs_hold() -> None:
    for key, submission in [("judgment-1:0:1", 0), ("x" * 80, 3), ("", 1)]:
        assert make_custom_id(key, submission) == stable_id(key, submission)


def test_the_notebook_facing_modules_import_no_provider_sdk():
    """A notebook on the offline backend never pays for a provider's SDK: anthropic, openai and boto3
    load only when a backend that needs them is built (each takes seconds in every kernel)."""
    modules = ("session", "analysis", "trust", "judging", "simulation", "validity", "persona_bench")
    code = (f"import sys\nfor m in {modules!r}: __import__('{PACKAGE}.' + m)\n"
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'anthropic', 'openai', 'boto3'}))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=PACKAGE_DIR.parent).stdout.strip()
    assert loaded == "[]"
