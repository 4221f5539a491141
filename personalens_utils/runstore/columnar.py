"""A columnar copy of run stores, queried out of core: analysis at any size without loading every record.

The append-only JSONL tables stay the write path (crash-safe, resumable). Readers that need many
records at once (analysis, the explorer, planning) query a Parquet copy of each table's summary
fields with DuckDB instead: `Columnar(store).sql("select ... from judgments")`. The copy lives in
`<store>/_columnar/<table>/` (Parquet parts plus a `manifest.json`) and is brought up to date on
read: only the bytes appended since the last read are parsed, with the store's own rules (a torn last
line is skipped and reported, a line that is not JSON or does not fit its record type is an error
naming file and line). Texts (turns, judge answers) are not copied; each row keeps where its line
sits (`_offset`, `_length`), so `Columnar.lines` reads a few records in full.

The JSONL stays the truth: the manifest keeps each part's size and checksum, every read checks them, and
a part that is missing, truncated or altered is copied again from its bytes of the table file (one
warning line says so; `DamagedCopyError` when that fails). Parts are made one chunk at a time, on worker
processes that die with the process that started them, so building the copy of a store of any size
holds a bounded amount of memory.

Views, one row per current record (a later line for an id replaces an errored one, as in
`RunStore.records`): `dialogues` and `judgments`, with the record type's `summary_fields`, any
derived column (`judgments.official_score`, the official gather script's reading of the answer;
`dialogues.output_tokens`, the booked output tokens, and `dialogues.estimated_tokens`, the offline
backend's word-based count of the turns, for Table 13) and
`_source` (which of the given stores it came from). Several stores (the run folders of
`shard="i/n"` machines) are read together: an id held by two of them is refused, as `merge_stores`
would. The Parquet files are plain Parquet; any engine that reads Parquet opens them (docs/scale.md).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import inspect
import logging
import os
import signal
import subprocess
import sys
import tempfile
import types
import typing
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import orjson
import pandas as pd
from filelock import FileLock

from personalens_utils.base.errors import KitError
from personalens_utils.base.files import atomic_write_bytes
from personalens_utils.llm.offline import count_tokens
from personalens_utils.reference.rubric import Scale
from personalens_utils.runstore.official_reading import official_column
from personalens_utils.runstore.records import ERROR, Dialogue, Judgment, Record, RecordError, stored_hints
from personalens_utils.runstore.store import (
    COLUMNAR_FOLDER,
    RunStore,
    StoreError,
    _last_line_end,
    _lines_before,
    _report_torn,
    parse_record,
)

log = logging.getLogger(__name__)

FORMAT = 2
"""Bumped when the layout of the copy changes; a copy of another format is rebuilt."""
FOLDER = COLUMNAR_FOLDER
CHUNK_BYTES = 32 << 20
"""JSONL bytes parsed into one Parquet part: bounds the memory a refresh holds."""
MAX_PARTS = 16
"""More parts than this (many small refreshes) are merged into one."""
MEMORY_LIMIT = "512MB"
"""DuckDB's working memory; larger sorts and joins spill to a temporary folder."""
POSITION = {"_offset": "BIGINT", "_length": "BIGINT"}
"""Where each row's line sits in its JSONL file (byte offset, bytes)."""
PARALLEL_CHUNKS = 3
"""A refresh with this many chunks to parse or more spreads them over worker processes (one per core)."""
PR_SET_PDEATHSIG = 1
"""Linux's prctl option: the signal a process gets when the thread that started it ends."""


class DamagedCopyError(StoreError):
    """A part of a columnar copy is missing or damaged and could not be copied again from its table file."""


_DUCK = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN"}
"""The DuckDB type of each scalar Python type a record field may have."""


def column_type(hint: Any, where: str) -> str:
    """The DuckDB type of a field's Python type (optional: its type; a tuple of X: a list of X)."""
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        if len(args) == 1:
            return column_type(args[0], where)
    elif typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return column_type(args[0], where) + "[]"
    elif hint in _DUCK:
        return _DUCK[hint]
    raise ColumnTypeError(f"{where} is a {hint}, which the columnar copy has no column type for; keep it out "
                          "of the record type's summary_fields, or give it a str, int, float or bool type")


class ColumnTypeError(KitError, TypeError):
    """A summary field whose Python type has no DuckDB column type."""


@dataclass(frozen=True)
class TableSpec:
    """What a table's copy holds: the record type's `summary_fields`, typed by its fields
    (`records.stored_hints`), and columns derived from the whole line (computed once, when the line is
    copied)."""

    kind: type[Record]
    derived: Mapping[str, tuple[str, Callable[[dict[str, Any]], Any]]] = field(default_factory=dict)
    stamp_sources: tuple[str, ...] = ()
    """Source files whose code the derived columns run; a change rebuilds the copy."""

    @property
    def view(self) -> str:
        return self.kind.table

    @functools.cached_property
    def columns(self) -> dict[str, str]:
        """The stored fields copied, with their DuckDB types."""
        hints = stored_hints(self.kind)
        return {name: column_type(hints[name], f"{self.kind.__name__}.{name}")
                for name in self.kind.summary_fields}

    def schema(self) -> dict[str, str]:
        return {**self.columns, **{name: kind for name, (kind, _) in self.derived.items()}, **POSITION}

    def stamp(self) -> str:
        digest = hashlib.sha256(f"{FORMAT}\n{sorted(self.schema().items())}".encode())
        for source in self.stamp_sources:
            digest.update(Path(source).read_bytes())
        return digest.hexdigest()


def _output_tokens(rec: dict[str, Any]) -> int | None:
    usage = rec.get("usage")
    return usage.get("output_tokens") if isinstance(usage, dict) else None


def _estimated_tokens(rec: dict[str, Any]) -> int:
    return sum(count_tokens(turn["content"]) for turn in rec.get("turns") or ())


TABLES: dict[type[Record], TableSpec] = {
    Dialogue: TableSpec(Dialogue, {"output_tokens": ("BIGINT", _output_tokens),
                                   "estimated_tokens": ("BIGINT", _estimated_tokens)},
                        (inspect.getfile(count_tokens),)),
    Judgment: TableSpec(Judgment, {"official_score": ("DOUBLE", official_column)},
                        (inspect.getfile(official_column), inspect.getfile(Scale))),
}
"""The tables with a columnar copy, each with every column it holds: the same in any process, whatever it
imported (a worker, a kernel, the reproduce process). A new table or derived column is one entry here."""


StoreLike = RunStore | str | os.PathLike[str]


class Place(NamedTuple):
    """Where a record's line sits: which of the given stores, its byte offset and its length."""

    source: int
    offset: int
    length: int


def copy_folder(root: Path) -> Path:
    """Where the copy of the store in `root` lives: inside it, or (a folder this process cannot write)
    in a temporary folder named after it."""
    if os.access(root, os.W_OK) or not root.exists():
        return root / FOLDER
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "personalens-columnar" / name


@dataclass
class _Manifest:
    stamp: str
    head: str
    end: int = 0
    lines: int = 0
    parts: list[list[Any]] = field(default_factory=list)
    """[file name, first byte, end byte, file size, sha256 of the file] of each part, in file order."""
    size: int = 0
    mtime: int = 0
    """The table file's size and modification time when the copy was last brought up to date."""
    columns_seen: str = ""
    """The stamp under which every part was seen (or made, by this code) to hold the schema's columns, so
    that later refreshes need not open every part again; empty in copies made before it was kept."""

    @classmethod
    def read(cls, path: Path) -> _Manifest | None:
        """The manifest, or None when there is none or it is not one (the copy is then made again)."""
        try:
            manifest = cls(**orjson.loads(path.read_bytes()))
        except (OSError, orjson.JSONDecodeError, TypeError):
            return None
        if not isinstance(manifest.parts, list) or not all(_Part.fits(entry) for entry in manifest.parts):
            return None
        return manifest

    def write(self, path: Path) -> None:
        atomic_write_bytes(path, orjson.dumps(self.__dict__))


class _Part(NamedTuple):
    """A manifest's entry for one Parquet part."""

    name: str
    first: int
    end: int
    size: int
    sha256: str

    @staticmethod
    def fits(entry: Any) -> bool:
        return isinstance(entry, list) and len(entry) == len(_Part._fields) and all(
            isinstance(value, kind) for value, kind in zip(entry, (str, int, int, int, str), strict=True))


def checksum(path: Path) -> str:
    """The sha256 of a part file, kept in the manifest and checked on every read (docs/scale.md: what it
    costs)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _fingerprint(path: Path, end: int) -> str:
    """The first and the last 4 KiB of a table file's first `end` bytes: a replaced file (a new run into the
    folder) or a line edited by hand, which shifts the lines after it, no longer matches."""
    with path.open("rb") as fh:
        digest = hashlib.sha256(fh.read(min(end, 4096)))
        fh.seek(max(0, end - 4096))
        digest.update(fh.read(end - fh.tell()))
    return digest.hexdigest()


class TableCopy:
    """The Parquet copy of one table of one store."""

    def __init__(self, store: RunStore, spec: TableSpec):
        self.store, self.spec = store, spec
        self.source = store.path(spec.kind)
        self.folder = copy_folder(store.root) / spec.kind.table
        self.manifest_path = self.folder / "manifest.json"

    def files(self) -> list[Path]:
        """The Parquet parts, in file order, once `refresh` has run."""
        manifest = _Manifest.read(self.manifest_path)
        return [self.folder / entry[0] for entry in manifest.parts] if manifest else []

    def refresh(self) -> None:
        """Bring the copy up to date with the table file: parse only what was appended since."""
        if not self.source.exists():
            if self.folder.exists():
                self._clear()
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.folder) + ".lock"):
            manifest = self._current_manifest()
            self._repair(manifest)
            self._copy(manifest, self._ranges(manifest.end, self.source.stat().st_size, manifest.lines))
            if len(manifest.parts) > MAX_PARTS:
                self._merge(manifest)
            stat = self.source.stat()
            if (manifest.size, manifest.mtime) != (stat.st_size, stat.st_mtime_ns):  # else left byte for byte
                manifest.size, manifest.mtime = stat.st_size, stat.st_mtime_ns
                manifest.write(self.manifest_path)

    def _current_manifest(self) -> _Manifest:
        manifest = _Manifest.read(self.manifest_path)
        misfit = None if manifest is None else self._misfit(manifest)
        if misfit is not None:
            log.warning("%s: the columnar copy %s; copying it again from %s", self.folder, misfit,
                        self.source)
        if manifest is not None and misfit is None and manifest.end <= self.source.stat().st_size \
                and self._continues(manifest):
            kept = {entry[0] for entry in manifest.parts} | {self.manifest_path.name}
            for stray in self.folder.glob("*"):  # parts of a refresh that stopped before its manifest
                if stray.name not in kept:
                    stray.unlink()
            if manifest.columns_seen != manifest.stamp:
                manifest.columns_seen = manifest.stamp
                manifest.write(self.manifest_path)
            return manifest
        self._clear()
        self.folder.mkdir(parents=True, exist_ok=True)
        return _Manifest(self.spec.stamp(), "", columns_seen=self.spec.stamp())

    def _misfit(self, manifest: _Manifest) -> str | None:
        """Why a copy cannot be continued under this table's schema (None: it can): made under another
        stamp (another schema or another version of its derived columns' code), or a part whose columns
        are not the schema's (as the copies made by processes that had registered fewer columns were)."""
        if manifest.stamp != self.spec.stamp():
            return "was made under another schema or another version of its derived columns"
        if manifest.columns_seen == manifest.stamp:
            return None
        wanted = list(self.spec.schema())
        with _connect() as con:
            for entry in manifest.parts:
                path = self.folder / entry[0]
                if not path.exists():
                    continue  # a missing part is repaired from its bytes by `_repair`
                try:
                    held = [row[0] for row in con.execute("DESCRIBE SELECT * FROM read_parquet(?)",
                                                          [str(path)]).fetchall()]
                except duckdb.Error:
                    continue  # a damaged part: `_repair` finds it by its checksum
                if held != wanted:
                    missing = sorted(set(wanted) - set(held)) or sorted(set(held) - set(wanted))
                    return f"has a part ({path.name}) whose columns differ from the schema's ({missing})"
        return None

    def _continues(self, manifest: _Manifest) -> bool:
        """Whether the table file still starts with the bytes the copy was made of."""
        if manifest.end == 0:
            return True
        with self.source.open("rb") as fh:
            fh.seek(manifest.end - 1)
            if fh.read(1) != b"\n" or manifest.head != _fingerprint(self.source, manifest.end):
                return False
        stat = self.source.stat()
        return stat.st_size != manifest.size or stat.st_mtime_ns == manifest.mtime  # rewritten in place

    def _clear(self) -> None:
        for part in self.folder.glob("*"):
            part.unlink()

    def _repair(self, manifest: _Manifest) -> None:
        """Copy again, from its bytes of the table file, each part that is missing, truncated or altered,
        with one warning line each; `DamagedCopyError` when that fails (the parts already whole are kept)."""
        index = 0
        while index < len(manifest.parts):
            part = _Part(*manifest.parts[index])
            damage = self._damage(part)
            if damage is None:
                index += 1
                continue
            try:
                with self.source.open("rb") as fh:
                    made = [entry for entry, _ in self._new_parts(_chunks(fh, part.first, part.end))]
            except (KitError, OSError, duckdb.Error) as exc:
                raise DamagedCopyError(
                    f"{self.folder / part.name}, the columnar copy of bytes {part.first}-{part.end} of "
                    f"{self.source}, is {damage} and could not be copied again: {exc}") from exc
            if part.name not in {entry[0] for entry in made}:
                (self.folder / part.name).unlink(missing_ok=True)
            manifest.parts[index:index + 1] = made
            manifest.write(self.manifest_path)
            index += len(made)
            log.warning("%s: this part of the columnar copy was %s; copied again from bytes %d-%d of %s",
                        self.folder / part.name, damage, part.first, part.end, self.source)

    def _damage(self, part: _Part) -> str | None:
        """What is wrong with a part's file (checked on every read: its size, then its checksum), or None."""
        path = self.folder / part.name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return "missing"
        if size != part.size:
            how = "truncated" if size < part.size else "longer"
            return f"{how} ({size:,} bytes instead of {part.size:,})"
        if checksum(path) != part.sha256:
            return "altered (its checksum differs)"
        return None

    def _ranges(self, start: int, size: int, lines: int) -> list[tuple[int, int]]:
        """Byte ranges of the complete lines from `start`, about `CHUNK_BYTES` each; a torn last line (no
        line end yet) is left out and reported."""
        with self.source.open("rb") as fh:
            last = _last_line_end(fh, start, size)
            ranges = _chunks(fh, start, last)
            if last < size:
                fh.seek(start)
                lineno = lines + fh.read(last - start).count(b"\n") + 1
                _report_torn(self.source, lineno, last, size - last)
        return ranges

    def _copy(self, manifest: _Manifest, ranges: list[tuple[int, int]]) -> None:
        """Parse the ranges into Parquet parts and record each part in the manifest as it is made."""
        for entry, lines in self._new_parts(ranges):
            manifest.parts.append(entry)
            manifest.end, manifest.lines = entry[2], manifest.lines + lines
            manifest.head = _fingerprint(self.source, manifest.end)
            manifest.write(self.manifest_path)

    def _new_parts(self, ranges: list[tuple[int, int]]) -> Iterator[tuple[list[Any], int]]:
        """Each range parsed into a Parquet part (on worker processes when there are many), in file order as
        they are made: the part's manifest entry and its number of lines. A line that does not fit raises
        naming its file and line."""
        table, source = self.spec.kind.table, str(self.source)
        stamp = self.spec.stamp()
        jobs = [(table, stamp, source, a, b, str(self.folder / f"{a:016d}-{b:016d}.parquet"))
                for a, b in ranges]
        workers = min(len(jobs), len(os.sched_getaffinity(0))) if len(jobs) >= PARALLEL_CHUNKS else 1
        done = _copy_on_workers(jobs, workers) if workers > 1 else (_copy_range(*job) for job in jobs)
        try:
            for (_, _, _, first, end, target), made in zip(jobs, done, strict=True):
                if made is None:  # a line that does not fit: read it here to raise with its line number
                    _rows(self.spec, self.source, _read(self.source, first, end), first,
                          _lines_before(self.source, first))
                    raise StoreError(f"{self.source}: bytes {first}-{end} could not be copied")
                lines, size, sha256 = made
                yield [Path(target).name, first, end, size, sha256], lines
        finally:
            done.close()

    def _merge(self, manifest: _Manifest) -> None:
        """The parts as one, streamed in file order by one thread: no sort, and no row groups held for
        other threads, so its memory does not grow with the store (docs/scale.md: 0.25 GB at the 10x
        store's size, against 0.71 GB sorted)."""
        files = [str(self.folder / entry[0]) for entry in manifest.parts]
        target = self.folder / f"{0:016d}-{manifest.end:016d}.m{len(files)}.parquet"
        with duckdb.connect() as con:
            _settings(con)
            con.execute("SET preserve_insertion_order = true")
            con.execute("SET threads = 1")
            con.execute(f"COPY (SELECT * FROM read_parquet({files!r})) TO '{target}' "
                        "(FORMAT parquet, COMPRESSION zstd)")
        manifest.parts = [[target.name, 0, manifest.end, target.stat().st_size, checksum(target)]]
        manifest.write(self.manifest_path)
        for old in files:
            Path(old).unlink()


def _chunks(fh: Any, start: int, last: int) -> list[tuple[int, int]]:
    """Byte ranges of about `CHUNK_BYTES` each, cut at line ends, covering the complete lines of an open
    table file from `start` to `last` (a line end)."""
    ranges, pos = [], start
    while pos < last:
        fh.seek(min(pos + CHUNK_BYTES, last) - 1)
        end = fh.tell() + len(fh.readline())
        ranges.append((pos, end))
        pos = end
    return ranges


def _read(path: Path, start: int, end: int) -> bytes:
    with path.open("rb") as fh:
        fh.seek(start)
        return fh.read(end - start)


def _rows(spec: TableSpec, source: Path, data: bytes, offset: int, lineno: int) -> bytearray:
    """Complete lines projected to JSON rows for DuckDB to type, one per line, checked as the store checks
    them (`lineno`: lines before `data`, for the messages). One buffer, not a list of rows: each bytes
    object orjson returns keeps its whole working buffer (about 8 KiB for a 300-byte row), which made a
    32 MiB chunk's rows hold 100 MB."""
    kind, fields, derived = spec.kind, list(spec.columns), spec.derived
    out = bytearray()
    for line in data.splitlines(keepends=True):
        lineno += 1
        length = len(line)
        if line.strip():
            where = f"{source}:{lineno}"
            rec = parse_record(line, where)
            kind.from_json(rec, where)
            row = {name: rec.get(name) for name in fields}
            for name, (_, derive) in derived.items():
                row[name] = derive(rec)
            row.update(_offset=offset, _length=length)
            out += orjson.dumps(row)
            out += b"\n"
        offset += length
    return out


def _copy_range(table: str, stamp: str, source: str, start: int, end: int, target: str) -> list[Any] | None:
    """Copy the lines in bytes [start, end) of a table file into the Parquet file `target` (in a worker
    process, or in this one): [lines, file size, checksum], or None when a line does not fit (the caller
    reads it again to say where)."""
    spec = next(spec for spec in TABLES.values() if spec.kind.table == table)
    if spec.stamp() != stamp:
        raise StoreError(f"copying {source} into its columnar copy: this process's schema of the {table} "
                         "table is not the one of the process that asked for the copy (two kits installed?)")
    data = _read(Path(source), start, end)
    try:
        rows = _rows(spec, Path(source), data, start, 0)
    except (StoreError, RecordError):
        return None
    _write_parquet(rows, spec.schema(), Path(target))
    return [data.count(b"\n"), Path(target).stat().st_size, checksum(Path(target))]


Job = tuple[str, str, str, int, int, str]
"""What a copy worker does: (table, schema stamp, table file, first byte, end byte, Parquet part)."""


def _copy_on_workers(jobs: list[Job], workers: int) -> Generator[list[Any] | None]:
    """`_copy_range` of every job, spread over `workers` processes running this module (`python -m`, so
    a caller's script is never imported again in them, as a multiprocessing pool would), yielded in job
    order as they are done. The workers die with this process (`_die_with`), and are stopped when the
    caller stops reading (an error, an interrupt)."""
    path = [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    procs: list[tuple[subprocess.Popen[bytes], Any]] = []
    with ExitStack() as stack:
        try:
            for group in (jobs[i::workers] for i in range(workers)):
                errors = stack.enter_context(tempfile.TemporaryFile())
                proc = subprocess.Popen([sys.executable, "-m", __name__, str(os.getpid())], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
                procs.append((proc, errors))
                assert proc.stdin is not None
                proc.stdin.write(orjson.dumps(group))
                proc.stdin.close()
            for index, job in enumerate(jobs):
                proc, errors = procs[index % workers]
                assert proc.stdout is not None
                line = proc.stdout.readline()
                if not line:
                    proc.wait()
                    errors.seek(0)
                    raise StoreError(f"a worker copying {job[2]} into its columnar copy failed:\n"
                                     f"{errors.read().decode(errors='replace')[-2000:]}")
                yield orjson.loads(line)
            for proc, _ in procs:
                proc.wait()
        finally:
            for proc, _ in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                assert proc.stdout is not None
                proc.stdout.close()


def _die_with(parent: int) -> None:
    """Have the kernel kill this worker when the process that started it ends (Linux's prctl), and end now
    if it already has: a killed refresh leaves no worker behind writing parts."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)


def _work(parent: int) -> None:
    """A worker of `_copy_on_workers`: its jobs on stdin, each one's result on a line of stdout when done."""
    _die_with(parent)
    for job in orjson.loads(sys.stdin.buffer.read()):
        sys.stdout.buffer.write(orjson.dumps(_copy_range(*job)) + b"\n")
        sys.stdout.buffer.flush()


def _settings(con: duckdb.DuckDBPyConnection) -> None:
    """Bounded memory, and no progress bar: DuckDB draws one on standard output for queries over two
    seconds, which would land in notebook outputs and in the output of scripts that parse it."""
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET enable_progress_bar = false")
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"SET temp_directory = '{Path(tempfile.gettempdir()) / 'personalens-duckdb'}'")


_DATABASES: dict[int, duckdb.DuckDBPyConnection] = {}
"""The process's in-memory DuckDB database, made on first use, under the id of the process that made it
(a forked child makes its own)."""


def _connect() -> duckdb.DuckDBPyConnection:
    """A connection of its own (its views and temporary tables seen by no other) to the process's one
    in-memory database. Making and closing a database costs about 15 ms, a connection to one under 1 ms;
    a notebook makes dozens of readers and the test suite thousands. The database's settings are
    `_settings`; `_merge`, which needs others, makes a database of its own."""
    database = _DATABASES.get(os.getpid())
    if database is None:
        database = duckdb.connect()
        _settings(database)
        database = _DATABASES.setdefault(os.getpid(), database)
    con = database.cursor()
    con.execute("SET enable_progress_bar = false")
    return con


def _write_parquet(rows: bytearray, schema: Mapping[str, str], target: Path) -> None:
    """Type the projected rows (`_rows`) with the table's schema and write them as one Parquet file."""
    columns = "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in schema.items()) + "}"
    with tempfile.NamedTemporaryFile("wb", suffix=".jsonl", dir=target.parent, delete=False) as tmp:
        tmp.write(rows)
    staged = target.with_suffix(".tmp")
    try:
        with _connect() as con:
            con.execute(f"COPY (SELECT * FROM read_json('{tmp.name}', columns = {columns}, "
                        f"format = 'newline_delimited')) TO '{staged}' (FORMAT parquet, COMPRESSION zstd)")
        os.replace(staged, target)
    finally:
        Path(tmp.name).unlink(missing_ok=True)


class Columnar:
    """The columnar copies of one or several run stores, as one DuckDB connection with a view per table.

    `stores` is a run store (or its folder), or several (one per shard) to read together.
    """

    def __init__(self, stores: StoreLike | Sequence[StoreLike],
                 tables: Sequence[type[Record]] = tuple(TABLES)):
        given = [stores] if isinstance(stores, RunStore | str | os.PathLike) else list(stores)
        if not given:
            raise StoreError("no run store given to read")
        self.stores = [s if isinstance(s, RunStore) else RunStore(s) for s in given]
        roots = [s.root.resolve() for s in self.stores]
        for root in roots:
            if roots.count(root) > 1:
                raise StoreError(f"{root} is given twice as a store to read")
        self.specs = [TABLES[kind] for kind in tables]
        self._con: duckdb.DuckDBPyConnection | None = None

    @property
    def name(self) -> str:
        """The store folder's name, or the names of the shards' folders joined with '+'."""
        return "+".join(s.root.name for s in self.stores)

    def copies(self, kind: type[Record]) -> list[TableCopy]:
        return [TableCopy(store, TABLES[kind]) for store in self.stores]

    def refresh(self) -> duckdb.DuckDBPyConnection:
        """Bring every copy up to date and (re)make the views over them; the connection."""
        if self._con is None:
            self._con = _connect()
        for spec in self.specs:
            sources = []
            for index, copy in enumerate(self.copies(spec.kind)):
                copy.refresh()
                if files := [str(f) for f in copy.files()]:
                    sources.append(f"SELECT *, {index} AS _source FROM read_parquet({files!r})")
            schema = spec.schema()
            empty = ", ".join(f"NULL::{kind} AS {name}" for name, kind in schema.items())
            lines = " UNION ALL ".join(sources) or f"SELECT {empty}, 0 AS _source WHERE false"
            self._con.execute(f"CREATE OR REPLACE TEMP VIEW {spec.view}_lines AS {lines}")
            self._con.execute(
                f"CREATE OR REPLACE TEMP VIEW {spec.view} AS SELECT * FROM {spec.view}_lines "
                "QUALIFY row_number() OVER (PARTITION BY id, _source ORDER BY _offset DESC) = 1")
            if len(sources) > 1:
                self._check_disjoint(spec)
        return self._con

    def _check_disjoint(self, spec: TableSpec) -> None:
        assert self._con is not None
        clash = self._con.execute(
            f"SELECT id, min(_source), max(_source) FROM {spec.view}_lines GROUP BY id "
            "HAVING min(_source) <> max(_source) ORDER BY id LIMIT 1").fetchone()
        if clash:
            rid, first, second = clash
            raise StoreError(
                f"record id {rid!r} is in both {self.stores[first].path(spec.kind)} and "
                f"{self.stores[second].path(spec.kind)}; each shard's work must come from one run folder: "
                "remove the record (or the folder) you do not trust and read again")

    def version(self, kind: type[Record]) -> tuple[tuple[str, int, str], ...]:
        """What the copies of a table hold now (folder, bytes copied, fingerprint per store): equal
        versions mean the same current records, so a reader may keep what it made of them."""
        self.connection()
        return tuple((str(copy.folder), manifest.end, manifest.head) for copy in self.copies(kind)
                     if (manifest := _Manifest.read(copy.manifest_path)) is not None)

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The connection, refreshed on first use only (call `refresh` to see later appends)."""
        return self._con if self._con is not None else self.refresh()

    def sql(self, query: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """A query's result as a frame (the views are brought up to date on first use)."""
        return self.connection().execute(query, params or []).df()

    def lines(self, kind: type[Record], rows: pd.DataFrame | Iterable[Place]) -> Iterator[dict[str, Any]]:
        """The stored JSON of the records in `rows` (with `_source`, `_offset`, `_length`; or those three
        values of each, as a planner keeps them), in their order."""
        places = (rows[["_source", "_offset", "_length"]].itertuples(index=False)
                  if isinstance(rows, pd.DataFrame) else rows)
        handles: dict[int, Any] = {}
        try:
            for source, offset, length in places:
                fh = handles.get(source)
                if fh is None:
                    fh = handles[source] = self.stores[source].path(kind).open("rb")
                fh.seek(offset)
                yield orjson.loads(fh.read(length))
        finally:
            for fh in handles.values():
                fh.close()

    def records(self, kind: type[Record], rows: pd.DataFrame | Iterable[Place]) -> list[Record]:
        """The records in `rows` as `kind`, read in full from their files."""
        return [kind.from_json(rec) for rec in self.lines(kind, rows)]

    def stored(self, kind: type[Record]) -> tuple[set[str], set[str]]:
        """The ids of a table's records, and those whose current record errored (`RunStore.ids` and
        `RunStore.errored` read from the copy): what a planner checks its work against."""
        con, view = self.connection(), TABLES[kind].view
        ids = set(con.execute(f"SELECT id FROM {view}_lines").fetchnumpy()["id"].tolist())
        errored = con.execute(
            f"SELECT id FROM (SELECT id, status, row_number() OVER (PARTITION BY id, _source ORDER BY "
            f"_offset DESC) AS latest FROM {view}_lines WHERE id IN (SELECT id FROM {view}_lines WHERE "
            "status = ?)) "
            "WHERE latest = 1 AND status = ?", [ERROR, ERROR]).fetchnumpy()["id"].tolist()
        return ids, set(errored)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> Columnar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":  # a worker of `_copy_on_workers`, given the id of the process that started it
    _work(int(sys.argv[1]))
