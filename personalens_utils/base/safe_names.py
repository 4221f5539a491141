"""File names made from data, and paths that stay inside their folder.

Records, run cards and sheets may come from someone else's run (`export.formats.import_run`), so any
field can be an absolute path, hold `..` or a NUL, be thousands of characters long or be a name
Windows reserves. Every writer that names a file after a field goes through `safe_name` (the name)
and `inside` (the path), never through an f-string of its own.

A name already safe comes back unchanged, so the kit's own names (task ids such as
`SD-Rental Cars-task-3`, model folders such as `claude-3-sonnet-v1_d_p`) keep the names the official
code expects. Any other name is mapped: characters outside the safe set become `_`, leading dots and
separators go, it is cut to length, and a digest of the original is appended, so two different
fields never map to one file.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from personalens_utils.base.errors import KitError

MAX_NAME = 120
"""Longest name made (in characters, all ASCII); far below the 255 bytes file systems allow, so a
suffix such as `_dialogue.json` still fits."""
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._+()-]*")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9 ._+()-]+")
_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{n}" for n in range(10)),
                       *(f"LPT{n}" for n in range(10))})
"""Device names Windows will not create as files, with any extension."""
_DIGEST = 10

__all__ = ["MAX_NAME", "UnsafePath", "inside", "safe_name"]


class UnsafePath(KitError, ValueError):
    """A path built from data would leave the folder it belongs in; names the folder and the name."""


def _is_safe(text: str, max_length: int) -> bool:
    return (len(text) <= max_length and _SAFE.fullmatch(text) is not None and text[-1] not in ". "
            and not _reserved(text))


def _reserved(name: str) -> bool:
    return name.split(".", 1)[0].rstrip(" ").upper() in _RESERVED


def safe_name(text: object, *, suffix: str = "", max_length: int = MAX_NAME) -> str:
    """`text` as one file name ending in the kit's own `suffix` (such as `_dialogue.json`): unchanged
    when it is already safe, else mapped and given a digest of the original."""
    text = str(text)
    room = max_length - len(suffix)
    if _is_safe(text + suffix, max_length) and text:
        return text + suffix
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    stem = _UNSAFE_RUN.sub("_", text).lstrip(" ._-").rstrip(" .")
    stem = stem[: max(0, room - _DIGEST - 3)].rstrip(" .")
    if not stem or _reserved(stem):
        stem = f"x_{stem}".rstrip("_")
    return f"{stem}-{digest}{suffix}"


def inside(root: str | os.PathLike[str], *names: object, suffix: str = "") -> Path:
    """`root` joined with each of `names` made safe (the last one ending in `suffix`), after proving
    the result stays inside `root` (a symbolic link already there that points out is refused too)."""
    base = Path(root)
    *folders, last = names
    path = base.joinpath(*(safe_name(name) for name in folders), safe_name(last, suffix=suffix))
    resolved, home = path.resolve(), base.resolve()
    if resolved != home and home not in resolved.parents:
        raise UnsafePath(f"{path} would be written outside {base} (it resolves to {resolved}); nothing "
                         "was written there")
    return path
