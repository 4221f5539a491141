"""The tests are grouped like the package (issue 34, item 5): a folder per layer or stage, a few
suite-wide checks flat in tests/, one support package, and no test file importing another.

Test files are imported by their base name (pytest's default `prepend` import mode, no `__init__.py`
in the folders), so two test files may not share a name even in different folders."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from support.source_trees import source_tree

TESTS = Path(__file__).resolve().parent
FOLDERS = {
    "core", "llm", "prompts", "data", "outputs", "assistants", "generation", "benchmark_validation",
    "simulation", "judging", "measures", "labels", "analysis", "trust", "validity", "explore",
    "persona_bench", "official", "export", "notebooks", "journeys", "robustness",
}
"""The folders a test file may sit in, besides tests/ itself."""
MAX_FLAT = 5
NOT_TESTS = {"support", "fixtures"}
"""Folders of tests/ that hold no test files: the support package and the stored fixture data."""
IMPORTED_IN_TEXT = re.compile(r"^\s*(?:from|import)\s+(test_\w+)", re.MULTILINE)
"""A test module imported by a script the tests write out and run in a child process."""


def layout_test_files(root: Path = TESTS) -> list[Path]:
    return sorted(p for p in root.rglob("test_*.py") if not NOT_TESTS & set(p.relative_to(root).parts))


def python_files(root: Path = TESTS) -> list[Path]:
    """Every Python file of tests/: test files, conftest files and the support package."""
    return sorted(p for p in root.rglob("*.py") if "fixtures" not in p.relative_to(root).parts)


def misplaced(root: Path = TESTS) -> list[str]:
    """Test files neither flat in tests/ nor directly in one of `FOLDERS`."""
    return [str(p.relative_to(root)) for p in layout_test_files(root)
            if len(p.relative_to(root).parts) != 1 and p.relative_to(root).parent.as_posix() not in FOLDERS]


def imported_tests(path: Path, modules: set[str]) -> list[str]:
    """The test modules (by base name, among `modules`) that `path` imports, in code or in a script it
    writes out for a child process."""
    found = []
    tree = source_tree(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += IMPORTED_IN_TEXT.findall(node.value)
    return sorted({name for name in found if name.split(".")[0] in modules})


def defined_tests(path: Path) -> list[str]:
    """Tests pytest would collect from `path` were it a test file: `test*` functions, `Test*` classes."""
    tree = source_tree(path)
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    return [f for f in functions if f.startswith("test")] + [c for c in classes if c.startswith("Test")]


def test_at_most_five_test_files_lie_flat_in_tests() -> None:
    flat = [p.name for p in layout_test_files() if p.parent == TESTS]
    assert len(flat) <= MAX_FLAT, f"{len(flat)} test files flat in tests/ (at most {MAX_FLAT}): {flat}"


def test_every_test_file_sits_in_a_folder_of_the_package_layout() -> None:
    assert {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))} <= (
        FOLDERS | NOT_TESTS)
    assert misplaced() == []


def test_no_two_test_files_share_a_name() -> None:
    names = Counter(p.name for p in layout_test_files())
    assert [name for name, count in names.items() if count > 1] == []


def test_no_test_file_imports_another() -> None:
    modules = {p.stem for p in layout_test_files()}
    assert len(modules) > 100
    offenders = {str(p.relative_to(TESTS)): names for p in python_files()
                 if (names := imported_tests(p, modules))}
    assert offenders == {}, "move what is shared into tests/support/ (a fixture: support.shared_fixtures)"


def test_support_and_conftest_files_hold_no_tests() -> None:
    helpers = [p for p in python_files()
               if p.name == "conftest.py" or "support" in p.relative_to(TESTS).parts]
    assert any(p.name == "conftest.py" for p in helpers) and len(helpers) > 10
    assert {str(p.relative_to(TESTS)): found for p in helpers if (found := defined_tests(p))} == {}


def test_every_test_file_holds_tests() -> None:
    """A module of helpers only belongs in tests/support/, not among the test files."""
    assert [str(p.relative_to(TESTS)) for p in layout_test_files() if not defined_tests(p)] == []


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    """Each check fails on a tree that breaks its rule."""
    (tmp_path / "support").mkdir()
    (tmp_path / "stages" / "deep").mkdir(parents=True)
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "test_a.py").write_text("from test_b import helper\n", encoding="utf-8")
    (tmp_path / "stages" / "deep" / "test_b.py").write_text(
        'CHILD = """\nimport sys\nfrom test_a import thing\n"""\n', encoding="utf-8")
    (tmp_path / "support" / "helpers.py").write_text("def test_hidden():\n    pass\n", encoding="utf-8")
    modules = {p.stem for p in layout_test_files(tmp_path)}
    assert modules == {"test_a", "test_b"}
    assert misplaced(tmp_path) == [str(Path("stages") / "deep" / "test_b.py")]
    assert imported_tests(tmp_path / "core" / "test_a.py", modules) == ["test_b"]
    assert imported_tests(tmp_path / "stages" / "deep" / "test_b.py", modules) == ["test_a"]
    assert defined_tests(tmp_path / "support" / "helpers.py") == ["test_hidden"]
