"""The syntax tree of a source file, parsed once per process: a dozen tests read the whole package's
source (imports, parameters, record layouts), and parsing every file again for each took seconds."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def source_tree(path: Path) -> ast.Module:
    """The parsed file. Shared between tests: read it, never change it."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))
