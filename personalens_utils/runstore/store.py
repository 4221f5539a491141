"""The run store: append-only JSONL tables of typed records (`records`) keyed by a stable id.

Every table holds one record type and is named by it (`store.read(Dialogue)`,
`store.append(judgment)`). Every stage writes its results here as they finish, so a killed run
loses at most the records being written and a rerun skips what is done. A torn last line (the
process died mid-write) is skipped on read and cut off before the next append, and the log says so
once, naming the file, the line and its size. `merge_stores`
joins the run folders of several shards (see `shards`) into one, every table they hold, refusing any
record that two of them hold.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pandas as pd
from filelock import FileLock, Timeout

from personalens_utils.base import paths
from personalens_utils.base.errors import KitError
from personalens_utils.runstore import run_card
from personalens_utils.runstore.migration import is_current, mark_current, migrate_store, needs_migration
from personalens_utils.runstore.records import (
    ERROR,
    Batch,
    BatchEntry,
    Dialogue,
    Record,
    stable_id,
    stored_types,
)

ERROR_STATUS = ERROR
log = logging.getLogger(__name__)
_TORN_REPORTED: set[tuple[str, int]] = set()
_MERGE_BATCH = 5000
R = TypeVar("R", bound=Record)

__all__ = ["ERROR_STATUS", "DuplicateRecordError", "ReproductionStore", "RunStore",
           "StoreError", "StoreInUse", "StoreMigrated", "folder_writer", "merge_stores", "stable_id"]


class StoreError(KitError):
    """A run-store file is unreadable or a write would break its invariants."""


class DuplicateRecordError(StoreError):
    pass


class StoreInUse(StoreError):
    """Another run of the same stage is writing the run store: refused before any call is made."""

    def _render_traceback_(self) -> list[str]:
        """IPython shows this instead of a traceback: the one line names the store and the other run."""
        return [f"{type(self).__name__}: {self}"]


class StoreMigrated(UserWarning):
    """A store written before run identity was migrated when opened; the message says what changed."""


def _table(kind: type[Record]) -> str:
    if not (isinstance(kind, type) and issubclass(kind, Record)):
        raise TypeError(f"run-store tables are named by record type (e.g. Dialogue), got {kind!r}")
    return kind.table


class RunStore:
    """One folder of JSONL tables. Safe for threads in one process and for several processes. The
    folder is made by the first write, so opening a store (or a run that stops before storing
    anything) leaves nothing behind."""

    def __init__(self, run_dir: str | os.PathLike[str]):
        self.root = Path(run_dir)
        self._layout_current = is_current(self.root)
        """The store says its lines are of today's layout: nothing to migrate, now or on a later open."""
        checked = not self._layout_current and self.root.is_dir()
        done = migrate_store(self.root) if checked and needs_migration(self.root) else None
        if done is not None:
            warnings.warn(done.message, StoreMigrated, stacklevel=2)
        self._lock = threading.Lock()
        self._status: dict[str, dict[str, str | None]] = {}
        self._offset: dict[str, int] = {}
        self._writers: dict[str, FileLock] = {}

    def path(self, kind: type[Record]) -> Path:
        return self.root / f"{_table(kind)}.jsonl"

    def iter_lines(self, kind: type[Record], *, checked: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every stored JSON object of a table as written, with its line number (a torn last line is skipped).

        Streams the file, so a reader that keeps only a few fields never holds the whole table. Each
        line is checked against its record type first (`checked`), so a reader that keeps only a few
        fields still meets a wrong-typed one as a `RecordError` naming the file, line and field.
        """
        path = self.path(kind)
        if not path.exists():
            return
        with path.open("rb") as fh:
            offset = 0
            for lineno, line in enumerate(fh, 1):
                if not line.endswith(b"\n"):
                    _report_torn(path, lineno, offset, len(line))
                    return
                offset += len(line)
                if not line.strip():
                    continue
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise StoreError(f"{path}:{lineno}: not valid JSON ({exc})") from exc
                if checked:
                    kind.from_json(rec, f"{path}:{lineno}")
                yield lineno, rec

    def _current(self, kind: type[Record], *, checked: bool = True) -> dict[str, tuple[int, dict[str, Any]]]:
        latest: dict[str, tuple[int, dict[str, Any]]] = {}
        for lineno, rec in self.iter_lines(kind, checked=checked):
            if not isinstance(rec, dict) or not rec.get("id"):
                raise StoreError(f"{self.path(kind)}:{lineno}: record has no 'id'")
            latest[rec["id"]] = lineno, rec
        return latest

    def records(self, kind: type[Record]) -> list[dict[str, Any]]:
        """The current records of a table as stored JSON objects, one per id (a later record for an id
        replaces an errored one), each checked against its type. For frames and tools; stage code reads
        typed records with `read`."""
        return [rec for _, rec in self._current(kind).values()]

    def read(self, kind: type[R]) -> list[R]:
        """The current records of a table as `kind`; a line that does not fit names its file and line."""
        path = self.path(kind)
        return [kind.from_json(rec, f"{path}:{lineno}")
                for lineno, rec in self._current(kind, checked=False).values()]

    def frame(self, kind: type[Record]) -> pd.DataFrame:
        """The current records of a table, one row each, columns as stored."""
        return pd.DataFrame.from_records(self.records(kind))

    def _index(self, kind: type[Record]) -> dict[str, str | None]:
        """id -> status of every record, brought up to date by reading only what was appended since."""
        table = _table(kind)
        path = self.path(kind)
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

    def status_counts(self, table: str) -> dict[str, int] | None:
        """Records by status (the current record of each id) in `table`, counted from the index the store
        keeps up to date (the run card counts them after every stage, and reading a whole judgments table
        each time took seconds); None for a table of no record type the kit knows."""
        kind = next((kind for kind in stored_types() if kind.table == table), None)
        if kind is None:
            return None
        with self._lock:
            return dict(sorted(Counter(str(status) for status in self._index(kind).values()).items()))

    def ids(self, kind: type[Record], *, include_errors: bool = True) -> set[str]:
        """Ids stored in a table; without the errored ones when `include_errors` is False."""
        with self._lock:
            index = self._index(kind)
            return {k for k, s in index.items() if include_errors or s != ERROR_STATUS}

    def errored(self, kind: type[Record]) -> set[str]:
        """Ids whose current record has status "error" (a rerun may replace them)."""
        with self._lock:
            return {k for k, s in self._index(kind).items() if s == ERROR_STATUS}

    def has(self, kind: type[Record], record_id: str) -> bool:
        with self._lock:
            return record_id in self._index(kind)

    @contextlib.contextmanager
    def writing(self, stage: str) -> Iterator[None]:
        """Hold the store as the one run of `stage` writing it: a second run of the stage on the store
        (another notebook, process or thread) is refused at once with a `StoreInUse` naming this one,
        since both would make the same calls and write the same records. Re-entrant in one thread;
        the operating system releases it when the process dies, so a killed run does not block. A
        folder this process cannot write is refused here, before any call, naming the folder."""
        folder = self._written_folder()
        with self._lock:
            lock = self._writers.setdefault(stage, FileLock(str(writer_lock(folder, stage))))
        with folder_writer(folder, stage, self.described(), "give this run another run_dir", lock=lock):
            yield

    def described(self) -> str:
        """What a refusal to write calls this store: its kind and the folder its writes go to."""
        return f"the run store {self._written_folder()}"

    def _written_folder(self) -> Path:
        """The folder a run's records (and its writer lock) go to."""
        return self.root

    @property
    def card_folder(self) -> Path | None:
        """Where a stage notes itself on the run card (`run_card.update_card`): the store's folder."""
        return self.root

    def unwritable(self) -> str | None:
        """Why a run could not write this store (one phrase naming the folder or file), or None: checked
        before a notebook makes its first call, so a read-only store is refused, not half-written."""
        folder = self._written_folder()
        if (blocked := paths.unwritable(folder)) is not None:
            return f"{blocked} is not a folder this process can write"
        tables = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
        if held := [table.name for table in tables if not os.access(table, os.W_OK)]:
            return f"its tables {held} in {folder} are read-only"
        return None

    def append(self, record: Record) -> None:
        self.extend([record])

    def extend(self, records: Iterable[Record]) -> None:
        """Append records (of any types, each to its table) atomically per line.

        An id already stored is rejected unless that record errored.
        """
        tables: dict[type[Record], list[dict[str, Any]]] = {}
        for record in records:
            if not isinstance(record, Record):
                raise TypeError(f"the run store takes records (e.g. Dialogue), got {type(record).__name__}")
            tables.setdefault(type(record), []).append(record.to_json())
        for kind, rows in tables.items():
            self._extend_json(kind, rows)

    def _extend_json(self, kind: type[Record], records: list[dict[str, Any]]) -> None:
        if not records:
            return
        try:
            self._append_json(kind, records)
        except OSError as exc:
            why = _cannot_write(self.root, exc)
            raise StoreError(f"cannot write the run store {self.root}: {why}") from None

    def _append_json(self, kind: type[Record], records: list[dict[str, Any]]) -> None:
        table = _table(kind)
        path = self.path(kind)
        self.root.mkdir(parents=True, exist_ok=True)
        if not self._layout_current:  # checked (and migrated) when opened: today's layout from here on
            mark_current(self.root)
            self._layout_current = True
        with self._lock, FileLock(str(path) + ".lock"):
            index = self._index(kind)  # catches up with what other processes appended
            seen: set[str] = set()
            for rec in records:
                rid = rec.get("id")
                if not rid:
                    raise StoreError(f"{path}: refusing a record without an 'id': {str(rec)[:200]}")
                if rid in seen or (rid in index and index[rid] != ERROR_STATUS):
                    raise DuplicateRecordError(
                        f"{path}: a record with id {rid!r} is already stored (by another run, or twice by "
                        "this one); the stored record is kept and this one is not written"
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
            end = data.rfind(b"\n") + 1
            _report_torn(path, data.count(b"\n", 0, end) + 1, end, len(data) - end, writing=True)
            fh.truncate(end)


def _report_torn(path: Path, lineno: int, offset: int, size: int, *, writing: bool = False) -> None:
    """Say once that a table's last line is torn (a run stopped mid-write): readers skip it and the next
    append cuts it off. A reader that finds a write under way (the table's lock held) says nothing."""
    key = (str(path.resolve()), offset)
    if key in _TORN_REPORTED:
        return
    if not writing:
        probe = FileLock(str(path) + ".lock")
        try:
            probe.acquire(timeout=0)
        except Timeout:
            return  # another process is appending this line right now
        except OSError:
            pass  # a folder this process cannot write to: the line is torn all the same
        else:
            probe.release()
    _TORN_REPORTED.add(key)
    log.warning("%s: line %d is torn (%d bytes with no line end: a run was stopped while writing it); it is "
                "skipped, and the next append to this table cuts it off", path, lineno, size)


def _holder(info: Path) -> str:
    """Who holds a stage's writer lock, from the note it left: "process 12 on host (since ...)"."""
    try:
        note = orjson.loads(info.read_bytes())
        return f"process {note['pid']} on {note['host']} (since {note['since']})"
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return "another process"


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
                _report_torn(path, lineno, offset, len(line))
                break
            if line.strip():
                rec = parse_record(line, f"{path}:{lineno}")
                current[rec["id"]] = _Line(offset, len(line), rec.get("status"))
            offset += len(line)
    return current


def parse_record(line: bytes, where: str) -> dict[str, Any]:
    """One stored line as its JSON object; a line that is not JSON, or has no id, names `where`."""
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise StoreError(f"{where}: not valid JSON ({exc})") from exc
    if not isinstance(rec, dict) or not rec.get("id"):
        raise StoreError(f"{where}: record has no 'id'")
    return rec


def _read_at(fh: Any, line: _Line) -> dict[str, Any]:
    fh.seek(line.offset)
    return orjson.loads(fh.read(line.length))


def merge_stores(
    sources: Sequence[RunStore | str | os.PathLike[str]],
    target: RunStore | str | os.PathLike[str],
    *,
    kinds: Sequence[type[Record]] | None = None,
    extending: bool = False,
) -> pd.DataFrame:
    """Copy the records of several run folders (one per shard) into `target`; one row per table and source.

    `kinds` names the tables to merge by record type; by default every table a source holds, each
    found in the table registry (`records.stored_types`), and a table file no record type is stored
    in is refused by name before anything is written (a table left behind would be lost silently).

    A record id held by two sources with the same contents is one record (shards of notebook 07 each
    copy the run store they start from), copied once; with different contents it is refused with a
    `DuplicateRecordError` naming the id and both files: the same work ran twice and one must be
    chosen by hand. Against `target`, a record stored there unchanged is skipped (merging again
    after more progress is safe) and an errored one is replaced; any other difference is refused
    the same way. Every check runs before the first write, so a refused merge writes nothing.

    The sources' run cards (`run_card`) are merged into the target's; cards that disagree on what
    defines the run (benchmark, simulation configuration, judges) are refused first, naming the field;
    with `extending` the target extends the sources' run (`run_card.check_cards`), so a source's need
    only be among the target's.
    """
    into = target if isinstance(target, RunStore) else RunStore(target)
    stores = [s if isinstance(s, RunStore) else RunStore(_existing(s)) for s in sources]
    roots = [store.root.resolve() for store in stores]
    for root in roots:
        if root == into.root.resolve():
            raise StoreError(f"{root} is a source and the target of the merge; merge into a new folder")
        if roots.count(root) > 1:
            raise StoreError(f"{root} is given twice as a source of the merge")
    run_card.check_cards([store.root for store in stores], into.root, extending=extending)
    plans = [_plan_table(kind, stores, into) for kind in (_held_tables(stores) if kinds is None else kinds)]
    rows = []
    for kind, copies, counts in plans:
        for store in stores:
            picked = copies.get(store.root, [])
            _copy(store.path(kind), picked, into, kind)
            rows.append({"table": kind.table, "source": str(store.root), "records": counts[store.root],
                         "appended": len(picked), "already_in_target": counts[store.root] - len(picked)})
    if into.root.is_dir():
        run_card.merge_cards([store.root for store in stores], into.root)
    return pd.DataFrame(rows, columns=["table", "source", "records", "appended", "already_in_target"])


COLUMNAR_FOLDER = "_columnar"
"""Where a store's columnar copy lives inside its folder (`runstore.columnar`)."""
_COPY_CHUNK = 1 << 24


def start_from(source: Path, target: Path, *, extending: bool = False) -> None:
    """Make `target` hold the records of `source`, the kit's own reproduction store that a notebook's own
    run extends: a new folder gets each table byte for byte (complete lines only) and the columnar copy
    beside them, which stays valid for identical bytes, so nothing is parsed, checked or rebuilt again
    (merging a reproduction's store record by record took tens of seconds per notebook); a folder that
    already holds a table is merged into (`merge_stores`, which checks every record)."""
    if target.is_dir() and any(target.glob("*.jsonl")):
        merge_stores([source], target, extending=extending)
        return
    run_card.check_cards([source], target, extending=extending)
    kinds = _held_tables([RunStore(_existing(source))])
    target.mkdir(parents=True, exist_ok=True)
    for kind in kinds:
        _copy_complete_lines(source / f"{kind.table}.jsonl", target / f"{kind.table}.jsonl")
    columns = source / COLUMNAR_FOLDER
    if columns.is_dir():
        staged = target / f".{COLUMNAR_FOLDER}.tmp"
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(columns, staged, ignore=shutil.ignore_patterns("*.lock"))
        shutil.rmtree(target / COLUMNAR_FOLDER, ignore_errors=True)
        os.replace(staged, target / COLUMNAR_FOLDER)
    run_card.merge_cards([source], target)


def _copy_complete_lines(source: Path, target: Path) -> None:
    """`source` up to the end of its last complete line, written to `target` whole or not at all."""
    staged = target.with_name(f".{target.name}.tmp")
    with source.open("rb") as fh, staged.open("wb") as out:
        size = fh.seek(0, os.SEEK_END)
        end = _last_line_end(fh, 0, size)
        if end < size:  # a torn last line (a killed writer) stays behind, as a merge leaves it
            _report_torn(source, _lines_before(source, end) + 1, end, size - end)
        fh.seek(0)
        left = end
        while left:
            chunk = fh.read(min(_COPY_CHUNK, left))
            out.write(chunk)
            left -= len(chunk)
        out.flush()
        os.fsync(out.fileno())
    os.replace(staged, target)


def _last_line_end(fh: Any, start: int, size: int) -> int:
    """The end of the last complete line of an open table file after `start` (`start` when there is none)."""
    pos = size
    while pos > start:
        block = min(1 << 20, pos - start)
        fh.seek(pos - block)
        found = fh.read(block).rfind(b"\n")
        if found >= 0:
            return pos - block + found + 1
        pos -= block
    return start


def _lines_before(path: Path, offset: int) -> int:
    """The number of lines of a table file before byte `offset` (for an error message)."""
    count = 0
    with path.open("rb") as fh:
        while fh.tell() < offset and (block := fh.read(min(1 << 20, offset - fh.tell()))):
            count += block.count(b"\n")
    return count


def _held_tables(stores: list[RunStore]) -> list[type[Record]]:
    """The record types of every table the stores hold, in registry order; an unknown table is refused."""
    known = {kind.table: kind for kind in stored_types()}
    held: set[type[Record]] = set()
    for store in stores:
        for path in sorted(store.root.glob("*.jsonl")):
            if path.stem not in known:
                raise StoreError(
                    f"cannot merge {path}: no record type of the kit is stored in a table named "
                    f"{path.stem!r} "
                    f"(known tables: {', '.join(known)}); move that file aside or name the tables to merge "
                    "with kinds=...; nothing was written"
                )
            held.add(known[path.stem])
    return [kind for kind in known.values() if kind in held]


def _existing(path: str | os.PathLike[str]) -> Path:
    folder = Path(path)
    if not folder.is_dir():
        raise StoreError(f"cannot merge {folder}: no such run folder")
    return folder


def _plan_table(
    kind: type[Record], stores: list[RunStore], into: RunStore
) -> tuple[type[Record], dict[Path, list[_Line]], dict[Path, int]]:
    """Which lines of which source to append to the target's table; raises on any conflict."""
    owner: dict[str, Path] = {}
    scans: dict[Path, dict[str, _Line]] = {}
    with contextlib.ExitStack() as files:
        handles: dict[Path, Any] = {}
        for store in stores:
            scan = scans[store.root] = _scan(store.path(kind))
            if scan:
                handles[store.root] = files.enter_context(store.path(kind).open("rb"))
            for rid in list(scan):
                first = owner.setdefault(rid, store.root)
                if first == store.root:
                    continue
                if _read_at(handles[first], scans[first][rid]) == _read_at(handles[store.root], scan[rid]):
                    del scan[rid]  # the same record in both (shards of 07 each copy the run store): once
                    continue
                raise DuplicateRecordError(
                    f"record id {rid!r} is in both {first / store.path(kind).name} and {store.path(kind)} "
                    "with different contents; each shard's work must come from one run folder: remove the "
                    "record (or the folder) you do not trust and merge again"
                )
    held = _scan(into.path(kind))
    copies: dict[Path, list[_Line]] = {}
    with into.path(kind).open("rb") if held else contextlib.nullcontext() as target_fh:
        for root, scan in scans.items():
            picked = copies[root] = []
            with (root / into.path(kind).name).open("rb") if scan else contextlib.nullcontext() as source_fh:
                for rid, line in scan.items():
                    there = held.get(rid)
                    if there is not None and _read_at(source_fh, line) == _read_at(target_fh, there):
                        continue
                    if there is None or there.status == ERROR_STATUS:
                        picked.append(line)
                        continue
                    raise DuplicateRecordError(
                        f"record id {rid!r} in {root / into.path(kind).name} differs from the one already in "
                        f"{into.path(kind)} (status {line.status!r} vs {there.status!r}); the target keeps "
                        "its record: remove one of them by hand if the other should win"
                    )
    return kind, copies, {root: len(scan) for root, scan in scans.items()}


def _copy(path: Path, lines: list[_Line], into: RunStore, kind: type[Record]) -> None:
    """Append the lines as stored, each checked to read as `kind` first."""
    if not lines:
        return
    with path.open("rb") as fh:
        for start in range(0, len(lines), _MERGE_BATCH):
            rows = [_read_at(fh, line) for line in lines[start : start + _MERGE_BATCH]]
            for row in rows:
                kind.from_json(row, f"{path}: record {row.get('id')!r}")
            into._extend_json(kind, rows)


def writer_lock(folder: Path, stage: str) -> Path:
    """The lock file a run of `stage` on the store in `folder` holds (an `-info` file beside it names
    the holder). It sits inside the folder, so a store that can be written can always hold its lock
    (its parent may be read-only); a run that finds nothing to do on a store not yet made leaves no
    folder behind (`RunStore.writing`). Before this the lock sat beside the folder: stores of that
    time open as they are, and a leftover `.<folder>.<stage>.writer` beside one may be deleted."""
    return folder / f".{stage}.writer"


def _info(lock: Path) -> Path:
    return lock.with_name(f"{lock.name}-info")


def writer_files(stage: str) -> frozenset[str]:
    """The names of the files a writer of `stage` keeps in its folder: the lock and the note beside it."""
    lock = writer_lock(Path(), stage)
    return frozenset({lock.name, _info(lock).name})


@contextlib.contextmanager
def folder_writer(folder: Path, stage: str, what: str, instead: str, *,
                  lock: FileLock | None = None, leave_nothing: bool = False) -> Iterator[None]:
    """Hold `folder` as the one writer of `stage`, for a run store or any folder a stage fills (e.g.
    notebook 09's annotation sample): a second writer is refused at once with one line (`StoreInUse`)
    saying `what` is in use, who holds it, and what to do `instead`. The lock sits in the folder and the
    operating system drops it when the process dies; a folder made only to hold it is removed after.
    Pass the same `lock` to re-enter it in one thread. With `leave_nothing` the lock files are removed
    (still held) when the last hold ends, for a folder of outputs compared byte for byte, where a note
    naming a process and a time would differ from run to run."""
    path = writer_lock(folder, stage)
    created = not folder.exists()
    lock = lock if lock is not None else FileLock(str(path))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=0)
    except Timeout:
        raise StoreInUse(f"{what} is in use: {_holder(_info(path))} is running {stage} on it; wait for that "
                         f"run to end (or stop it), or {instead}") from None
    except OSError as exc:
        raise StoreError(f"cannot write {what}: {_cannot_write(folder, exc)}; {instead} "
                         "(nothing was written)") from None
    try:
        if lock.lock_counter == 1:
            _info(path).write_text(orjson.dumps({
                "pid": os.getpid(), "host": socket.gethostname(), "stage": stage,
                "since": datetime.now(UTC).isoformat(timespec="seconds"),
            }).decode())
        yield
    finally:
        if leave_nothing and lock.lock_counter == 1:
            for name in writer_files(stage):
                (folder / name).unlink(missing_ok=True)
        lock.release()
        if created and not lock.is_locked:
            _remove_if_only(folder, set(writer_files(stage)))


def _cannot_write(folder: Path, exc: OSError) -> str:
    """What stops a write into `folder`, in a few words naming the folder that refuses it."""
    blocked = paths.unwritable(folder) or folder
    return f"{blocked} is not a folder this process can write ({exc.strerror or type(exc).__name__})"


def _remove_if_only(folder: Path, names: set[str]) -> None:
    """Remove `folder` (made for a writer lock) when it holds nothing but those lock files."""
    with contextlib.suppress(OSError):
        if {p.name for p in folder.iterdir()} <= names:
            for name in names:
                (folder / name).unlink(missing_ok=True)
            folder.rmdir()


class ReproductionStore(RunStore):
    """A finished reproduction's store, opened by a notebook on its default parameters.

    It reads as the reproduction left it. The first write moves it to the notebook's own run
    (`own`, which first receives a copy of every table of the reproduction, so nothing done there is
    done again) and says so: the reproduction's store and its INDEX.md stay exactly
    as `make reproduce` wrote them. An own run that already extends this reproduction (its
    `EXTENDS` file names it, as it was then) is opened at once, so a second notebook goes on there.
    Notebooks 07 and 09 keep their records apart the same way over any run store (`over`); `finished`
    says whether the store read through is a finished reproduction's, so that the first write's line
    names it as what it is.
    """

    MARK = "EXTENDS"

    def __init__(self, reproduction: str | os.PathLike[str], own: str | os.PathLike[str], *,
                 finished: bool = True):
        self.reproduction = Path(reproduction)
        self.own = Path(own)
        self.finished = finished
        mark = self.own / self.MARK
        extended = mark.is_file() and mark.read_text(encoding="utf-8") == self._stamp()
        super().__init__(self.own if extended else self.reproduction)

    @classmethod
    def over(cls, run: RunStore, own: str | os.PathLike[str]) -> ReproductionStore:
        """A store of its own over `run`, read through until its first write; `run` counts as a finished
        reproduction's only while it is a session's view of one that nothing has been written over yet."""
        finished = isinstance(run, ReproductionStore) and run.finished and run.root == run.reproduction
        return cls(run.root, own, finished=finished)

    def described(self) -> str:
        """The own store and the run store it reads through: notebook 09's reviews or 07's records are
        not the run store, and a refusal must not say they are."""
        return f"the store {self.own} (this notebook's own, over the run store {self.reproduction})"

    def _written_folder(self) -> Path:
        """The own run, whether or not it exists yet: its lock excludes a run given that folder as its
        run_dir, and the reproduction's folder is never touched."""
        return self.own

    @property
    def card_folder(self) -> Path | None:
        """None while nothing was written: a stage that made no record is not the reproduction's to note,
        and its card stays as `make reproduce` wrote it."""
        return None if self.root == self.reproduction else self.root

    def extend_with(self, earlier: Sequence[str | os.PathLike[str]]) -> None:
        """Make the own run now, before any plan reads: a copy of the reproduction's tables and of
        `earlier` stores over it (another run's work on the same records, e.g. a reproduction's own
        notebook 07 store, whose run may hold fewer assistants), marked as extending the reproduction as it
        is now; a copy made by an earlier call is extended (a rerun continues it)."""
        start_from(self.reproduction, self.own, extending=True)
        if earlier:
            merge_stores(earlier, self.own, extending=True)
        (self.own / self.MARK).write_text(self._stamp(), encoding="utf-8")
        self.root = self.own
        self._status.clear()
        self._offset.clear()

    def _stamp(self) -> str:
        """The reproduction's store as it is now: a new `make reproduce` into it makes older copies stale."""
        table = self.reproduction / f"{Dialogue.table}.jsonl"
        return f"{self.reproduction.resolve()}\n{table.stat().st_mtime_ns if table.exists() else 0}\n"

    def _extend_json(self, kind: type[Record], records: list[dict[str, Any]]) -> None:
        if records and self.root == self.reproduction:
            with self._lock:
                if self.root == self.reproduction:
                    mark = self.own / self.MARK
                    if mark.is_file():  # it extends an earlier reproduction: its records are not this one's
                        raise StoreError(
                            f"{self.own} extends an earlier `make reproduce` ({mark} names it), not "
                            f"{self.reproduction}: move that run away or pass run_dir to choose where "
                            "new records go; nothing was written")
                    start_from(self.reproduction, self.own)
                    (self.own / self.MARK).write_text(self._stamp(), encoding="utf-8")
                    self.root = self.own
                    self._status.clear()
                    self._offset.clear()
                    what = " is a finished `make reproduce` store and" if self.finished else ""
                    later = "notebooks on their defaults go on" if self.finished else "a rerun goes on"
                    print(f"{self.reproduction}{what} stays as it is; new records go to this notebook's "
                          f"own run {self.own} (a copy of its records plus the new work), where {later}",
                          flush=True)
        super()._extend_json(kind, records)


@dataclass(frozen=True)
class StoredBatches:
    """The `llm.batch.BatchStore` of a run store: its `Batch` and `BatchEntry` tables, each line
    checked against its record type on the way in and out."""

    store: RunStore

    def batches(self) -> list[dict[str, Any]]:
        return [b.to_json() for b in self.store.read(Batch)]

    def results(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.store.read(BatchEntry)]

    def result_ids(self) -> set[str]:
        return self.store.ids(BatchEntry)

    def add_batch(self, record: dict[str, Any]) -> None:
        self.store.append(Batch.from_json(record, "a batch the API accepted"))

    def add_results(self, records: list[dict[str, Any]]) -> None:
        self.store.extend([BatchEntry.from_json(r, "an entry of an ended batch") for r in records])
