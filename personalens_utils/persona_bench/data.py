"""PERSONA Bench data in the authors' layout, read one user at a time.

The authors ship one JSON object, `merged_posts_remapped.json`: user name -> list of that user's
posts; a post has `title`, `url`, `content`, `__sub__` (the subreddit, the domain), `score`,
`author`, `timestamp` and `comments`; a comment has `body`, `author`, `score`, `timestamp` and
`replies` (comments again). The file is streamed with ijson, so a dataset of the authors' size is
never held whole; every field is checked as it is read and a bad one is reported with the file and
its JSON path (`$["alice"][2].comments[0].score`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ijson

from personalens_utils.errors import KitError
from personalens_utils.paths import project_root

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
    with file.open("rb") as fh:
        try:
            first = next(ijson.parse(fh), None)
        except ijson.JSONError as exc:
            raise _syntax_error(file, exc) from exc
        if first is None or first[1] != "start_map":
            raise check.fail("$", "must be a JSON object mapping user names to lists of posts")
        fh.seek(0)
        try:
            for name, posts in ijson.kvitems(fh, "", use_float=True):
                where = f"$[{json.dumps(name)}]"
                if not isinstance(posts, list):
                    raise check.fail(where, f"must be a list of posts, got {type(posts).__name__}")
                yield User(name, tuple(check.post(p, f"{where}[{i}]") for i, p in enumerate(posts)))
        except ijson.JSONError as exc:
            raise _syntax_error(file, exc) from exc


def _syntax_error(file: Path, exc: Exception) -> PersonaDataError:
    """Where the JSON breaks, as line and column (json reports them; ijson only says what)."""
    try:
        with file.open(encoding="utf-8") as fh:
            json.load(fh)
    except json.JSONDecodeError as err:
        return PersonaDataError(f"{file}: line {err.lineno} column {err.colno}: not valid JSON ({err.msg})")
    return PersonaDataError(f"{file}: not valid JSON ({exc})")


def load_users(path: str | os.PathLike[str] | None = None) -> list[User]:
    """Every user of a (small) dataset; for the authors' full size prefer `iter_users`."""
    return list(iter_users(path))
