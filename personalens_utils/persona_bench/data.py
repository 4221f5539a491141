"""PERSONA Bench data in the authors' layout, read one user at a time.

The authors ship one JSON object, `merged_posts_remapped.json`: user name -> list of that user's
posts; a post has `title`, `url`, `content`, `__sub__` (the subreddit, the domain), `score`,
`author`, `timestamp` and `comments`; a comment has `body`, `author`, `score`, `timestamp` and
`replies` (comments again). The file is streamed with ijson, so a dataset of the authors' size is
never held whole; every field is checked as it is read and a bad one is reported with the file and
its JSON path (`$["alice"][2].comments[0].score`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import ijson

from personalens_utils.base.errors import KitError
from personalens_utils.base.paths import project_root

DATA_FILE = "merged_posts_remapped.json"
"""The authors' file name, kept so their prompt makers read the same file."""
DATA_ENV = "PERSONA_BENCH_DATA"
DEFAULT_DIR = Path("data") / "persona_bench"


class PersonaDataError(KitError, ValueError):
    """The dataset file is missing or does not fit the authors' layout; the message names file and path."""


@dataclass(frozen=True, slots=True)
class Comment:
    body: str | None
    author: str
    score: float | None
    timestamp: str
    replies: tuple[Comment, ...]


@dataclass(frozen=True, slots=True)
class Post:
    title: str
    url: str | None
    content: str | None
    subreddit: str
    score: float | None
    author: str
    timestamp: str
    comments: tuple[Comment, ...]

    def walk(self) -> Iterator[tuple[Comment, Comment | None]]:
        """Every comment with its parent comment (None for a top-level one), depth first in file order."""
        stack: list[tuple[Comment, Comment | None]] = [(c, None) for c in reversed(self.comments)]
        while stack:
            node, parent = stack.pop()
            yield node, parent
            stack.extend((r, node) for r in reversed(node.replies))


@dataclass(frozen=True, slots=True)
class User:
    name: str
    posts: tuple[Post, ...]


def find_dataset(path: str | os.PathLike[str] | None = None) -> Path:
    """The dataset file: `path` (a file or a folder holding it), else `$PERSONA_BENCH_DATA`, else
    `data/persona_bench/` under the project."""
    given = path if path is not None else os.environ.get(DATA_ENV) or project_root() / DEFAULT_DIR
    where = Path(given)
    file = where / DATA_FILE if where.is_dir() else where
    if not file.is_file():
        how = (
            "given" if path is not None else (f"from ${DATA_ENV}" if os.environ.get(DATA_ENV) else "default")
        )
        raise PersonaDataError(
            f"PERSONA Bench data not found: {file} ({how}). Download {DATA_FILE} as the authors' README "
            f"says and put it in {DEFAULT_DIR}/ or set ${DATA_ENV}, or write synthetic data with "
            "persona_bench.synthetic.write_synthetic (docs/persona_bench.md)."
        )
    return file


class _Checker:
    """Typed reads of one JSON value; failures name the file and the JSON path."""

    def __init__(self, file: Path):
        self.file = file

    def fail(self, where: str, problem: str) -> PersonaDataError:
        return PersonaDataError(f"{self.file}: {where}: {problem}")

    def field(
        self, obj: dict[str, Any], key: str, where: str, types: tuple[type, ...], optional: bool
    ) -> Any:
        if key not in obj:
            if optional:
                return None
            raise self.fail(f"{where}.{key}", "is missing")
        value = obj[key]
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, types):
            names = " or ".join(t.__name__ for t in types) + (" or null" if optional else "")
            raise self.fail(f"{where}.{key}", f"must be {names}, got {value!r:.60}")
        return value

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a JSON object, got {type(value).__name__}")
        return value

    def comment(self, value: Any, where: str) -> Comment:
        c = self.obj(value, where)
        replies = self.field(c, "replies", where, (list,), True) or []
        return Comment(
            body=self.field(c, "body", where, (str,), True),
            author=self.field(c, "author", where, (str,), False),
            score=_number(self.field(c, "score", where, (int, float), True)),
            timestamp=self.field(c, "timestamp", where, (str,), False),
            replies=tuple(self.comment(r, f"{where}.replies[{i}]") for i, r in enumerate(replies)),
        )

    def post(self, value: Any, where: str) -> Post:
        p = self.obj(value, where)
        comments = self.field(p, "comments", where, (list,), False)
        return Post(
            title=self.field(p, "title", where, (str,), False),
            url=self.field(p, "url", where, (str,), True),
            content=self.field(p, "content", where, (str,), True),
            subreddit=self.field(p, "__sub__", where, (str,), False),
            score=_number(self.field(p, "score", where, (int, float), True)),
            author=self.field(p, "author", where, (str,), False),
            timestamp=self.field(p, "timestamp", where, (str,), False),
            comments=tuple(self.comment(c, f"{where}.comments[{i}]") for i, c in enumerate(comments)),
        )


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def iter_users(path: str | os.PathLike[str] | None = None) -> Iterator[User]:
    """The users of the dataset in file order, one at a time (the file is streamed, never held)."""
    file = find_dataset(path)
    check = _Checker(file)
    last: str | None = None
    with file.open("rb") as raw:
        fh = _Counted(raw)
        try:
            first = next(ijson.parse(fh), None)
        except ijson.JSONError as exc:
            raise _syntax_error(file, exc, fh.region, last) from exc
        if first is None or first[1] != "start_map":
            raise check.fail("$", "must be a JSON object mapping user names to lists of posts")
        fh.seek(0)
        try:
            for name, posts in ijson.kvitems(fh, "", use_float=True):
                where = f"$[{json.dumps(name)}]"
                if not isinstance(posts, list):
                    raise check.fail(where, f"must be a list of posts, got {type(posts).__name__}")
                yield User(name, tuple(check.post(p, f"{where}[{i}]") for i, p in enumerate(posts)))
                last = name
        except ijson.JSONError as exc:
            raise _syntax_error(file, exc, fh.region, last) from exc


_CHUNK = 1 << 16
"""Bytes read at a time, by the parser and by `_syntax_error`'s second pass."""
_CONTINUATION = bytes(range(0x80, 0xC0))
"""UTF-8 continuation bytes: a column counts the other bytes, one per character."""


class _Counted:
    """The data file as the parser reads it, remembering where its last read began: a parse error lies
    in that read (the parser checks every byte it is given), which bounds the second pass's search."""

    def __init__(self, fh: BinaryIO):
        self.fh = fh
        self.region = 0

    def read(self, size: int = -1) -> bytes:
        self.region = self.fh.tell()
        return self.fh.read(size)

    def seek(self, offset: int) -> None:
        self.fh.seek(offset)


def _syntax_error(file: Path, exc: Exception, region: int, last: str | None) -> PersonaDataError:
    """The error naming where the bytes stop being UTF-8 JSON: line, column, byte offset and the JSON
    path being read. ijson only says what broke, so a second pass streams the file through the same
    parser, a chunk at a time (bounded memory), then a byte at a time from one chunk before the read
    that failed (`region`) to the failing byte; the path is tracked from the start of the user after
    `last` (the last user read whole), so the rest of the file costs no Python per value."""
    place, found, failed = _Place(), last is None, False
    events = ijson.sendable_list()
    parser = ijson.parse_coro(events)
    start = max(0, region - _CHUNK)
    with file.open("rb") as fh:
        while not failed and (chunk := fh.read(_CHUNK if place.offset < start else 1)):
            try:
                parser.send(chunk)
            except ijson.JSONError:
                failed = True
            if not found and ("", "map_key", last) in events:
                del events[: events.index(("", "map_key", last)) + 1]
                found, place.stack = True, [last]
            if found:
                place.follow(events)
            del events[:]
            if not failed:
                place.advance(chunk)
    if not failed:
        with contextlib.suppress(ijson.JSONError):
            parser.close()
    said = exc.args[0] if exc.args else exc
    reason = (said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)).splitlines()[0]
    if not failed:
        problem = f"not valid JSON: the file ends early ({reason})"
    elif "UTF8" in reason:
        problem = f"not valid UTF-8 (byte 0x{chunk[:1].hex()})"
    else:
        problem = f"not valid JSON ({reason})"
    return PersonaDataError(f"{file}: line {place.line} column {place.column} (byte {place.offset}), in "
                            f"{place.path()}: {problem}")


class _Place:
    """How far a streamed parse has got: line, column and byte offset, and the JSON path of the value
    being read (a key per open object, an index per open list; None before an object's first key,
    -1 before a list's first item)."""

    def __init__(self) -> None:
        self.line, self.column, self.offset = 1, 1, 0
        self.stack: list[str | int | None] = []

    def advance(self, chunk: bytes) -> None:
        self.offset += len(chunk)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            self.line += chunk.count(b"\n")
            self.column = 1
        self.column += len(chunk[newline + 1 :].translate(None, _CONTINUATION))

    def follow(self, events: list[tuple[str, str, Any]]) -> None:
        stack = self.stack
        for _, event, value in events:
            if event == "map_key":
                stack[-1] = value
            elif event in ("end_map", "end_array"):
                stack.pop()
            else:
                if stack and type(stack[-1]) is int:
                    stack[-1] += 1
                if event == "start_map":
                    stack.append(None)
                elif event == "start_array":
                    stack.append(-1)

    def path(self) -> str:
        parts = ["$"]
        for depth, step in enumerate(self.stack):
            if step is None or step == -1:
                break
            parts.append(f"[{step}]" if isinstance(step, int) else
                         f"[{json.dumps(step)}]" if depth == 0 else f".{step}")
        return "".join(parts)


def load_users(path: str | os.PathLike[str] | None = None) -> list[User]:
    """Every user of a (small) dataset; for the authors' full size prefer `iter_users`."""
    return list(iter_users(path))
