"""Stores written before run identity, brought to today's layout once.

Before run identity a dialogue's id held no backend and no model id, nor a judgment's its judge's
model id; such lines lack `user_backend`, `user_model_id`, `assistant_backend`, `assistant_model_id`
(dialogues) or `judge_model_id` (judgments). `RunStore` migrates a store holding them when it opens
it (or run `python -m personalens_utils.runstore.migration RUN_DIR`): each old line gets the identity it
was made with (the backend it stored, and the model id the registry gave for that backend then,
`legacy_model_id`) and the id `identity` computes from it; judgments follow their dialogue's new id.
The store's layout version is then written in it (`SCHEMA_FILE`), as it is by the first write of any
store: a store carrying today's version is never checked again when opened.
Nothing is lost: the tables as they were stay beside the new ones (`*.jsonl.before-run-identity`),
and `id_migration.json` maps every old id to its new one (annotation sheets and exports made before
name the old dialogue ids; look them up there).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from filelock import FileLock

from personalens_utils.base.files import atomic_write_bytes
from personalens_utils.llm.role import legacy_model_id
from personalens_utils.runstore.records import Dialogue, Judgment, RecordError

DIALOGUE_IDENTITY = ("user_backend", "user_model_id", "assistant_backend", "assistant_model_id")
JUDGE_IDENTITY = "judge_model_id"
BACKUP_SUFFIX = ".before-run-identity"
ID_MAP = "id_migration.json"
SCHEMA_FILE = "store_schema.json"
"""The file holding the layout version of a store's lines; written once, by migration or first write."""
SCHEMA = 2
"""Today's layout version: 1 was before run identity, 2 has it (bumped by a future migration)."""


def is_current(root: Path) -> bool:
    """Whether the store says its lines are of today's layout (so there is nothing to migrate)."""
    try:
        return orjson.loads((root / SCHEMA_FILE).read_bytes()) == {"store_schema": SCHEMA}
    except (OSError, orjson.JSONDecodeError):
        return False


def mark_current(root: Path) -> None:
    """Write today's layout version in the store (in one step: a reader never sees half of it)."""
    if not is_current(root):
        atomic_write_bytes(root / SCHEMA_FILE, orjson.dumps({"store_schema": SCHEMA}) + b"\n")


@dataclass(frozen=True)
class Migration:
    """What migrating one store did."""

    root: Path
    dialogues: int
    judgments: int
    orphans: int
    """Judgments of dialogues this store does not hold: their `dialogue_id` is kept as it was."""

    @property
    def message(self) -> str:
        orphans = (f"; {self.orphans} judgment(s) of dialogues kept elsewhere still name the old dialogue "
                   "ids (migrate that store too)" if self.orphans else "")
        return (f"run store {self.root}: {self.dialogues} dialogue(s) and {self.judgments} judgment(s) "
                "written before run identity were given their backends, model ids and today's ids (once; "
                f"the tables as they were are kept as *.jsonl{BACKUP_SUFFIX}){orphans}. Old id -> new id: "
                f"{self.root / ID_MAP}; annotation sheets and official exports made before name the old "
                "dialogue ids.")


def _lines(path: Path) -> Iterator[bytes]:
    if path.exists():
        with path.open("rb") as fh:
            yield from (line for line in fh if line.endswith(b"\n") and line.strip())


def needs_migration(root: Path) -> bool:
    """Whether a table of the store begins with a line written before run identity (old lines come
    first: every line since carries its identity)."""
    for kind, keys in ((Dialogue, DIALOGUE_IDENTITY), (Judgment, (JUDGE_IDENTITY,))):
        first = next(_lines(root / f"{kind.table}.jsonl"), None)
        if first is not None and not all(key.encode() in first for key in keys):
            return True
    return False


def _with_id(kind: type[Dialogue] | type[Judgment], row: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The row with the id computed from its (now complete) identity fields; None for a line that is no
    record of its kind (left as it is: reading it names what is wrong)."""
    try:
        record = kind.from_json(row, where)
    except RecordError:
        return None
    return dataclasses.replace(record, id="").to_json()


def _row(line: bytes) -> dict[str, Any]:
    """A stored line as an object; an unreadable one as empty (left as it is)."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return {}
    return row if isinstance(row, dict) else {}


def _dialogue(row: dict[str, Any], where: str) -> dict[str, Any] | None:
    if not row.get("id") or all(key in row for key in DIALOGUE_IDENTITY):
        return None
    backend = row.get("backend", "")
    filled = {**row, "user_backend": backend, "assistant_backend": backend,
              "user_model_id": legacy_model_id(row.get("user_model", ""), backend),
              "assistant_model_id": legacy_model_id(row.get("assistant_model", ""), backend)}
    return _with_id(Dialogue, filled, where)


def _judgment(row: dict[str, Any], moved: dict[str, str], where: str) -> dict[str, Any] | None:
    old_dialogue = row.get("dialogue_id", "")
    if not row.get("id") or (JUDGE_IDENTITY in row and old_dialogue not in moved):
        return None
    filled = {**row, "dialogue_id": moved.get(old_dialogue, old_dialogue)}
    filled.setdefault(JUDGE_IDENTITY, legacy_model_id(row.get("judge_model", ""), row.get("backend", "")))
    return _with_id(Judgment, filled, where)


def _rewrite(path: Path, rows: list[tuple[bytes, dict[str, Any] | None]]) -> None:
    """Keep the table as it was beside it, then put the new lines in its place in one step."""
    os.replace(path, path.with_name(path.name + BACKUP_SUFFIX))
    atomic_write_bytes(path, b"".join(line if new is None else orjson.dumps(new) + b"\n"
                                      for line, new in rows))


def migrate_store(root: str | os.PathLike[str]) -> Migration | None:
    """Give every record of the store written before run identity its identity and today's id; None
    when there is nothing to migrate. Safe against another process opening the same store."""
    root = Path(root)
    dialogues, judgments = root / f"{Dialogue.table}.jsonl", root / f"{Judgment.table}.jsonl"
    with FileLock(str(dialogues) + ".lock"), FileLock(str(judgments) + ".lock"):
        if not needs_migration(root):
            return None
        moved: dict[str, str] = {}
        new_dialogues = []
        for lineno, line in enumerate(_lines(dialogues), 1):
            row = _row(line)
            new = _dialogue(row, f"{dialogues}:{lineno}")
            if new is not None:
                moved[row["id"]] = new["id"]
            new_dialogues.append((line, new))
        held = {_row(line).get("id") for line, _ in new_dialogues} | set(moved.values())
        judged: dict[str, str] = {}
        new_judgments, orphans = [], 0
        for lineno, line in enumerate(_lines(judgments), 1):
            row = _row(line)
            new = _judgment(row, moved, f"{judgments}:{lineno}")
            if new is not None:
                judged[row["id"]] = new["id"]
                orphans += row["dialogue_id"] not in held
            new_judgments.append((line, new))
        if not moved and not judged:
            return None
        (root / ID_MAP).write_bytes(orjson.dumps({Dialogue.table: moved, Judgment.table: judged},
                                                 option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        for path, rows in ((dialogues, new_dialogues), (judgments, new_judgments)):
            if any(new is not None for _, new in rows):
                _rewrite(path, rows)
        mark_current(root)
    return Migration(root, len(moved), len(judged), orphans)


def main(argv: list[str]) -> int:
    """`python -m personalens_utils.runstore.migration RUN_DIR ...`: migrate the stores named."""
    for folder in argv:
        done = migrate_store(folder)
        print(done.message if done else f"run store {folder}: nothing written before run identity")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
