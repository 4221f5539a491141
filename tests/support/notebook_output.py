"""What an executed notebook or its kernel shows, for the tests of the kit's errors and reproductions."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

MAX_LINES = 15
"""The most lines a kit error may take in a notebook or on the command line."""
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TCP_WARNING = "Kernel is running over TCP without encryption"
"""The warning a kernel prints when started over TCP; a reproduction must not show it."""


def error_lines(executed: Path) -> list[str]:
    """The traceback lines the executed notebook shows for its error, without colours."""
    cells = nbformat.read(executed, as_version=4).cells
    errors_shown = [out for cell in cells for out in cell.get("outputs", []) if out.output_type == "error"]
    return [ANSI.sub("", line) for out in errors_shown for text in out.traceback
            for line in text.splitlines()]
