"""Someone else's run, checked before any of it is written (issue 40).

An imported run (a dataset folder or `DatasetDict` for `formats.import_run`, an official output folder
for `official.import_official_run`) was made by code the kit does not control: it is input to check, not
a store to copy. Every check lives here, so both importers refuse the same things in the same words, and
`write_all_or_nothing` is how both write. Refused, each as one `ExportError` line naming the file or
table, the row and the problem:

- a record that is not one JSON object on one line, or not a record of its table (`Record.from_json`);
- an id, or a field that may become a name (a model, task, scenario, setting, ...), holding characters
  that are not printable (control characters, NUL, newlines) or longer than `MAX_NAME_LENGTH`;
- two different records under one id (unless the earlier one is an error, which the store lets a later
  record replace); exact copies are kept once, and a `DuplicatesCollapsed` warning says how many;
- a judgment of a dialogue the run does not hold;
- a run card that is not one this kit writes (`run_card.check_card`), or whose prompt sets, models or
  counts its records refute.
"""

from __future__ import annotations

import os
import secrets
import shutil
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from personalens_utils.base.errors import KitError
from personalens_utils.runstore import run_card
from personalens_utils.runstore.records import ERROR, LAYOUT_HINT, Dialogue, Judgment, RecordError

MAX_NAME_LENGTH = 256
"""Longest id or name field accepted. The kit's ids are 20 hex digits and its longest names (model ids
served at an endpoint, multi-domain task ids) stay under a hundred characters."""
NAME_FIELDS: Mapping[str, tuple[str, ...]] = {
    Dialogue.table: ("id", "scenario_id", "task_id", "task_type", "domains", "user_model", "assistant_model",
                     "assistant_setting", "prompt_set", "prompt_version", "backend", "user_backend",
                     "user_model_id", "assistant_backend", "assistant_model_id"),
    Judgment.table: ("id", "dialogue_id", "dimension", "judge_model", "prompt_set", "prompt_version",
                     "backend", "judge_model_id"),
}
"""Per table, the fields that identify a record or may name a file, folder or log."""

Imported = Dialogue | Judgment

__all__ = ["MAX_NAME_LENGTH", "DuplicatesCollapsed", "ExportError", "Row", "check_card", "check_links",
           "parse_rows", "record_rows", "unique", "write_all_or_nothing"]


class ExportError(KitError):
    """A run cannot be exported or imported as asked; the message names the store or folder."""


class DuplicatesCollapsed(UserWarning):
    """An imported run held exact copies of records; each is stored once."""


@dataclass(frozen=True)
class Row:
    """One imported record: where it came from, the record, and the line it came as (None when it was
    read from another layout, which the store writes its own line for)."""

    where: str
    record: Imported
    line: str | None = None


def parse_rows(kind: type[Imported], values: Sequence[Any], place: str) -> list[Row]:
    """The records of one imported table (`values`: its stored lines, as text), each checked: one JSON
    object on one line, a record of `kind`, its names printable and short."""
    rows = []
    for n, text in enumerate(values, 1):
        where = f"{place} row {n}"
        if not isinstance(text, str):
            raise ExportError(f"{where}: the record is not text but {type(text).__name__} {text!r:.60}")
        if "\n" in text or "\r" in text:
            raise ExportError(f"{where}: the record spans several lines; a run store holds one record per "
                              "line (write it as compact JSON)")
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise ExportError(f"{where}: the record is not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ExportError(f"{where}: the record is a JSON {type(data).__name__}, not an object")
        rows.append(Row(where, _typed(kind, data, where), text))
    return rows


def record_rows(records: Iterable[tuple[str, Imported]]) -> list[Row]:
    """Records read from another layout (`where`, record), their names checked as `parse_rows` does."""
    rows = []
    for where, record in records:
        _check_names(record, where)
        rows.append(Row(where, record))
    return rows


def _typed(kind: type[Imported], data: dict[str, Any], where: str) -> Imported:
    try:
        record = kind.from_json(data, where)
    except RecordError as exc:
        raise ExportError(str(exc).removesuffix(f"; {LAYOUT_HINT}")) from None
    _check_names(record, where)
    return record


def _check_names(record: Imported, where: str) -> None:
    for field in NAME_FIELDS[record.table]:
        value = getattr(record, field)
        for n, name in enumerate(value) if isinstance(value, tuple) else [(None, value)]:
            what = field if n is None else f"{field}[{n}]"
            if len(name) > MAX_NAME_LENGTH:
                raise ExportError(f"{where}: {record.table} field {what!r} is {len(name)} characters long; "
                                  f"ids and names are refused beyond {MAX_NAME_LENGTH} ({name[:40]!r}...)")
            if not name.isprintable():
                bad = next(c for c in name if not c.isprintable())
                raise ExportError(f"{where}: {record.table} field {what!r} holds the unprintable "
                                  f"character {bad!r} ({name[:80]!r}); ids and names may hold printable "
                                  "characters only")


def unique(rows: Sequence[Row], source: str) -> list[Row]:
    """`rows` (of one table) with each record once. As the store does, a later record under an errored
    one's id replaces it and both lines are kept; a different record under any other stored id is
    refused, naming the id and both rows; an exact copy is left out, and a warning counts them."""
    kept: list[Row] = []
    held: dict[str, Row] = {}
    copies = 0
    for row in rows:
        earlier = held.get(row.record.id)
        if earlier is not None and earlier.record.status != ERROR:
            if earlier.record != row.record:
                raise ExportError(f"{row.record.table} id {row.record.id!r} is held by two different records "
                                  f"({earlier.where} and {row.where}); a run holds one record per id")
            copies += 1
            continue
        held[row.record.id] = row
        kept.append(row)
    if copies:
        table = rows[0].record.table
        warnings.warn(f"{source}: {copies} exact cop{'y' if copies == 1 else 'ies'} of {table} records (same "
                      "id, same content as an earlier row) left out; the store holds each record once",
                      DuplicatesCollapsed, stacklevel=3)
    return kept


def _current(rows: Sequence[Row]) -> list[Imported]:
    """The record each id reads as (the last of an errored one and its replacements)."""
    return list({row.record.id: row.record for row in rows}.values())


def check_links(dialogues: Sequence[Row], judgments: Sequence[Row]) -> None:
    """Refuse a judgment of a dialogue the run does not hold."""
    ids = {row.record.id for row in dialogues}
    for row in judgments:
        about = row.record.dialogue_id if isinstance(row.record, Judgment) else None
        if about not in ids:
            raise ExportError(f"{row.where}: judgment {row.record.id!r} is about dialogue {about!r}, which "
                              "the imported dialogues do not hold")


_SIMULATION_CLAIMS: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("prompt_set", lambda d: d.prompt_set), ("prompt_version", lambda d: d.prompt_version),
    ("user.model", lambda d: d.user_model), ("assistant.model", lambda d: d.assistant_model))
_JUDGE_CLAIMS: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("prompt_set", lambda j: j.prompt_set), ("prompt_version", lambda j: j.prompt_version),
    ("model", lambda j: j.judge_model))


def check_card(text: str, where: str, dialogues: Sequence[Row], judgments: Sequence[Row]) -> None:
    """Refuse a run card that is not JSON, not a card of the version and field kinds this kit writes, or
    that claims what its records refute: a simulation or judge (prompt set and version, models) no
    record was made by, or more records than there are. Counts below the records' are a card written
    before its run's last records (a run interrupted mid-stage), which is honest, so they pass."""
    try:
        card = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ExportError(f"{where}: the run card is not valid JSON ({exc})") from None
    try:
        run_card.check_card(card, where)
    except run_card.RunCardError as exc:
        raise ExportError(str(exc)) from None
    shown = {Dialogue.table: _current(dialogues), Judgment.table: _current(judgments)}
    for section, table, claims in (("simulations", Dialogue.table, _SIMULATION_CLAIMS),
                                   ("judges", Judgment.table, _JUDGE_CLAIMS)):
        for n, entry in enumerate(card[section]):
            _check_entry(where, f"{section}[{n}]", entry, table, shown[table], claims)
    for table, records in shown.items():
        claimed = (card.get("counts") or {}).get(table)
        if claimed is not None and sum(claimed.values()) > len(records):
            counted = dict(sorted(Counter(r.status for r in records).items()))
            raise ExportError(f"{where}: run card field 'counts.{table}' claims {claimed}, more than the "
                              f"imported {table} hold ({counted})")


def _check_entry(where: str, name: str, entry: Mapping[str, Any], table: str, records: Sequence[Imported],
                 claims: Sequence[tuple[str, Callable[[Any], str]]]) -> None:
    """Refuse a card entry no record fits, naming the first claim that narrows the records to none."""
    pool = list(records)
    fitted: list[str] = []
    for field, value_of in claims:
        claimed = _lookup(entry, field)
        if claimed is None:
            continue
        fitting = [r for r in pool if value_of(r) == claimed]
        if not fitting:
            among = f" of that configuration ({', '.join(fitted)})" if fitted else ""
            show = sorted({value_of(r) for r in pool}) or "none"
            raise ExportError(f"{where}: run card field '{name}.{field}' claims {claimed!r}, but the "
                              f"imported {table}{among} show {show}")
        pool = fitting
        fitted.append(f"{field} {claimed!r}")


def _lookup(entry: Mapping[str, Any], field: str) -> Any:
    value: Any = entry
    for key in field.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def write_all_or_nothing(target: Path, write: Callable[[Path], Sequence[str]]) -> None:
    """Run `write` on a new folder beside `target` (same parent: a rename cannot cross file systems);
    it returns the names of the files it made that belong in `target`. Only when it has written them all
    do they move in: the folder renamed to `target` when there is none, else each file moved into it.
    Any failure removes the temporary folder, and any folder made for it, so `target` is as it was."""
    made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.parent / f".{target.name}.import-{secrets.token_hex(6)}"
    temp.mkdir()  # not mkdtemp: a store renamed into place keeps the mode any folder gets (the umask's)
    try:
        names = write(temp)
        if target.exists():
            _move_in(temp, target, names)
        else:
            os.rename(temp, target)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
        for folder in made:  # deepest first
            if not target.exists() and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def _move_in(temp: Path, target: Path, names: Sequence[str]) -> None:
    """Move each named file from `temp` into `target`, replacing one already there; files that were not
    there are taken out again if a later move fails."""
    added: list[Path] = []
    try:
        for name in names:
            destination = target / name
            existed = destination.exists()
            os.replace(temp / name, destination)
            if not existed:
                added.append(destination)
    except BaseException:
        for path in added:
            path.unlink(missing_ok=True)
        raise
