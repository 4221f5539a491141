"""Files written whole or not at all, in one place: a reader or a crash never meets half a file.

A temporary file beside the target (a unique name, so two writers never share one), flushed to disk, then
renamed over it; on any failure the temporary file is removed and the target is left as it was. The
file keeps the permissions an ordinary `open()` would give it (the target's own when it exists), not the
temporary file's private 0600.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TextIO


def _umask_mode() -> int:
    """The mode `open()` gives a new file: 0o666 less the process umask (read by setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def _atomic(path: str | os.PathLike[str], mode: str) -> Iterator[TextIO | BinaryIO]:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    permissions = path.stat().st_mode & 0o777 if path.exists() else _umask_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, permissions)
        text = "b" not in mode
        with os.fdopen(fd, mode, **({"encoding": "utf-8", "newline": ""} if text else {})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A UTF-8 text file (newlines as written) that appears whole when the block ends without error."""
    with _atomic(path, "w") as fh:
        yield fh  # type: ignore[misc]


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """`data` as the whole of `path`, in one step (its folder is made when missing)."""
    with _atomic(path, "wb") as fh:
        fh.write(data)  # type: ignore[arg-type]


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """`text` as the whole of `path`, UTF-8, in one step (its folder is made when missing)."""
    with atomic_file(path) as fh:
        fh.write(text)
