"""The run store: append-only JSONL tables of records keyed by a stable id.

Every stage writes its results here one record at a time, so a killed run loses at most the
record being written and a rerun skips what is done. A torn last line (the process died mid-write)
is ignored on read and cut off before the next append. `merge_stores` joins the run folders of
several shards (see `shards`) into one, refusing any record that two of them hold.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
from filelock import FileLock

ERROR_STATUS = "error"
MERGED_TABLES = ("dialogues", "judgments")
_MERGE_BATCH = 5000


class StoreError(Exception):
    """A run-store file is unreadable or a write would break its invariants."""


class DuplicateRecordError(StoreError):
    pass


def stable_id(*parts: Any) -> str:
    """A short id that depends only on the given parts (order matters)."""
    raw = orjson.dumps([str(p) for p in parts])
    return hashlib.sha256(raw).hexdigest()[:20]


class RunStore:
    """One folder of JSONL tables. Safe for threads in one process and for several processes."""

    def __init__(self, run_dir: str | os.PathLike[str]):
        self.root = Path(run_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._status: dict[str, dict[str, str | None]] = {}
        self._offset: dict[str, int] = {}

    def path(self, table: str) -> Path:
        return self.root / f"{table}.jsonl"

    def iter_lines(self, table: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every record of a table as written, with its line number (a torn last line is skipped).

        Streams the file, so a reader that keeps only a few fields never holds the whole table.
        """
        path = self.path(table)
        if not path.exists():
            return
        with path.open("rb") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.endswith(b"\n"):
                    return  # torn tail from a killed writer
                if not line.strip():
                    continue
                try:
                    yield lineno, orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise StoreError(f"{path}:{lineno}: not valid JSON ({exc})") from exc

    def records(self, table: str) -> list[dict[str, Any]]:
        """Current records of a table, one per id; a later record for an id replaces an errored one."""
        latest: dict[str, dict[str, Any]] = {}
        for lineno, rec in self.iter_lines(table):
            if "id" not in rec:
                raise StoreError(f"{self.path(table)}:{lineno}: record has no 'id'")
            latest[rec["id"]] = rec
        return list(latest.values())

    def frame(self, table: str) -> pd.DataFrame:
        return pd.DataFrame.from_records(self.records(table))

    def _index(self, table: str) -> dict[str, str | None]:
        """id -> status of every record, brought up to date by reading only what was appended since."""
        path = self.path(table)
        size = path.stat().st_size if path.exists() else 0
        offset = self._offset.get(table, 0)
        if table not in self._status or size < offset:  # first look, or the file was replaced
            self._status[table], offset = {}, 0
        index = self._status[table]
        if size > offset:
            with path.open("rb") as fh:
                fh.seek(offset)
                data = fh.read(size - offset)
            end = data.rfind(b"\n") + 1  # a torn tail stays unread until it is cut or completed
            for lineno, line in enumerate(data[:end].splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise StoreError(f"{path}: record after byte {offset} (line +{lineno}) is not valid JSON "
                                     f"({exc})") from exc
                if not isinstance(rec, dict) or "id" not in rec:
                    raise StoreError(f"{path}: record after byte {offset} (line +{lineno}) has no 'id'")
                index[rec["id"]] = rec.get("status")
            self._offset[table] = offset + end
        return index

    def ids(self, table: str, *, include_errors: bool = True) -> set[str]:
        with self._lock:
            index = self._index(table)
            return {k for k, s in index.items() if include_errors or s != ERROR_STATUS}

    def has(self, table: str, record_id: str) -> bool:
        with self._lock:
            return record_id in self._index(table)

    def append(self, table: str, record: dict[str, Any]) -> None:
        self.extend(table, [record])

    def extend(self, table: str, records: Iterable[dict[str, Any]]) -> None:
        """Append records atomically per line. An id already stored is rejected unless that record errored."""
        records = list(records)
        if not records:
            return
        path = self.path(table)
        with self._lock, FileLock(str(path) + ".lock"):
            index = self._index(table)  # catches up with what other processes appended
            seen: set[str] = set()
            for rec in records:
                rid = rec.get("id")
                if not rid:
                    raise StoreError(f"{path}: refusing a record without an 'id': {str(rec)[:200]}")
                if rid in seen or (rid in index and index[rid] != ERROR_STATUS):
                    raise DuplicateRecordError(
                        f"{path}: a record with id {rid!r} is already stored; "
                        "refusing to write it twice (delete the old record first to replace it)"
                    )
                seen.add(rid)
            blob = b"".join(orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n" for r in records)
            self._cut_torn_tail(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, blob)
                os.fsync(fd)
                self._offset[table] = os.fstat(fd).st_size
            finally:
                os.close(fd)
            for rec in records:
                index[rec["id"]] = rec.get("status")

    @staticmethod
    def _cut_torn_tail(path: Path) -> None:
        if not path.exists() or path.stat().st_size == 0:
            return
        with path.open("rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            data = fh.seek(0) or fh.read()
            fh.truncate(data.rfind(b"\n") + 1)


# -- merging shards ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Line:
    """Where the current record of an id sits in a table file, and its status."""

    offset: int
    length: int
    status: str | None


def _scan(path: Path) -> dict[str, _Line]:
    """id -> its current record's place in a JSONL table (a later record replaces an errored one)."""
    current: dict[str, _Line] = {}
    if not path.exists():
        return current
    offset = 0
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.endswith(b"\n"):
                break  # torn tail from a killed writer
            if line.strip():
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise StoreError(f"{path}:{lineno}: not valid JSON ({exc})") from exc
                if not isinstance(rec, dict) or not rec.get("id"):
                    raise StoreError(f"{path}:{lineno}: record has no 'id'")
                current[rec["id"]] = _Line(offset, len(line), rec.get("status"))
            offset += len(line)
    return current


def _read_at(fh: Any, line: _Line) -> dict[str, Any]:
    fh.seek(line.offset)
    return orjson.loads(fh.read(line.length))


def merge_stores(
    sources: Sequence[RunStore | str | os.PathLike[str]],
    target: RunStore | str | os.PathLike[str],
    *,
    tables: Sequence[str] = MERGED_TABLES,
) -> pd.DataFrame:
    """Copy the records of several run folders (one per shard) into `target`; one row per table and source.

    A record id held by two sources is refused with a `DuplicateRecordError` naming the id and both
    files: shards own disjoint work, so two copies mean the same work ran twice and one must be
    chosen by hand. Against `target`, a record stored there unchanged is skipped (merging again
    after more progress is safe) and an errored one is replaced; any other difference is refused
    the same way. Every check runs before the first write, so a refused merge writes nothing.
    """
    into = target if isinstance(target, RunStore) else RunStore(target)
    stores = [s if isinstance(s, RunStore) else RunStore(_existing(s)) for s in sources]
    roots = [store.root.resolve() for store in stores]
    for root in roots:
        if root == into.root.resolve():
            raise StoreError(f"{root} is a source and the target of the merge; merge into a new folder")
        if roots.count(root) > 1:
            raise StoreError(f"{root} is given twice as a source of the merge")
    plans = [_plan_table(table, stores, into) for table in tables]
    rows = []
    for table, copies, counts in plans:
        for store in stores:
            picked = copies.get(store.root, [])
            _copy(store.path(table), picked, into, table)
            rows.append({"table": table, "source": str(store.root), "records": counts[store.root],
                         "appended": len(picked), "already_in_target": counts[store.root] - len(picked)})
    return pd.DataFrame(rows, columns=["table", "source", "records", "appended", "already_in_target"])


def _existing(path: str | os.PathLike[str]) -> Path:
    folder = Path(path)
    if not folder.is_dir():
        raise StoreError(f"cannot merge {folder}: no such run folder")
    return folder


def _plan_table(
    table: str, stores: list[RunStore], into: RunStore
) -> tuple[str, dict[Path, list[_Line]], dict[Path, int]]:
    """Which lines of which source to append to the target's table; raises on any conflict."""
    owner: dict[str, Path] = {}
    scans: dict[Path, dict[str, _Line]] = {}
    for store in stores:
        scan = scans[store.root] = _scan(store.path(table))
        for rid in scan:
            first = owner.setdefault(rid, store.root)
            if first != store.root:
                raise DuplicateRecordError(
                    f"record id {rid!r} is in both {first / f'{table}.jsonl'} and {store.path(table)}; "
                    "each shard's work must come from one run folder: remove the record (or the folder) "
                    "you do not trust and merge again"
                )
    held = _scan(into.path(table))
    copies: dict[Path, list[_Line]] = {}
    with into.path(table).open("rb") if held else contextlib.nullcontext() as target_fh:
        for root, scan in scans.items():
            picked = copies[root] = []
            with (root / f"{table}.jsonl").open("rb") if scan else contextlib.nullcontext() as source_fh:
                for rid, line in scan.items():
                    there = held.get(rid)
                    if there is not None and _read_at(source_fh, line) == _read_at(target_fh, there):
                        continue
                    if there is None or there.status == ERROR_STATUS:
                        picked.append(line)
                        continue
                    raise DuplicateRecordError(
                        f"record id {rid!r} in {root / f'{table}.jsonl'} differs from the one already in "
                        f"{into.path(table)} (status {line.status!r} vs {there.status!r}); the target keeps "
                        "its record: remove one of them by hand if the other should win"
                    )
    return table, copies, {root: len(scan) for root, scan in scans.items()}


def _copy(path: Path, lines: list[_Line], into: RunStore, table: str) -> None:
    if not lines:
        return
    with path.open("rb") as fh:
        for start in range(0, len(lines), _MERGE_BATCH):
            into.extend(table, [_read_at(fh, line) for line in lines[start : start + _MERGE_BATCH]])
