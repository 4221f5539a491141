"""Annotation sheets for people: write a sample of dialogues to a sheet, and the sheet's file format.

The export writes three files: the sheet (CSV, one row per dialogue, rating columns left blank),
the guidelines (Markdown: the judge's own instructions for every dimension, so people and judge
rate by the same rules, as in the paper), and the manifest of the sampled dialogue ids and of how they
were drawn (`sampling.SampleDesign`). Filled sheets are read back by `reading`.

Sheets are opened in spreadsheets, so every cell the kit writes is safe there: a cell that would run
as a formula is escaped (`escape_cell`, undone on reading), a cell longer than the reader takes is cut
with a note saying so, and each file is written whole or not at all, by one writer of its folder at a
time (`writing_folder`).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from personalens_utils.base.errors import KitError
from personalens_utils.base.files import atomic_file
from personalens_utils.judging import DIMENSIONS, benchmark_contexts
from personalens_utils.labels import AnnotationError
from personalens_utils.labels.sampling import draw_sample, read_manifest
from personalens_utils.prompt_templates import judge as judge_prompts
from personalens_utils.prompt_templates.render import (
    render_conversation,
    render_interactions,
    render_preferences,
)
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore, StoreError, folder_writer

RATED = (
    "task_completion",
    "personalization",
    "naturalness_user",
    "naturalness_assistant",
    "coherence_user",
    "coherence_assistant",
)
CONTEXT_COLUMNS = (
    "dialogue_id",
    "task_type",
    "domains",
    "task_description",
    "task_goal",
    "demographics",
    "preferences",
    "past_interactions",
    "situation",
    "conversation",
)
SHEET_COLUMNS = (*CONTEXT_COLUMNS, "annotator", *RATED, "notes")
SHEET_NAME = "annotation_sheet.csv"
GUIDELINES_NAME = "annotation_guidelines.md"
MANIFEST_NAME = "annotation_sample.json"
WRITER_STAGE = "annotation-sheets"
"""The stage whose writer lock a folder of annotation files is held by while anything writes there."""
CELL_LIMIT = 100_000
"""Characters of the longest cell an export writes: under the CSV reader's field limit (131,072), with
room for the escape and for other tools' readers, which share that limit."""
ESCAPE = "'"
_ESCAPED = frozenset("=+-@\t\r" + ESCAPE)
"""First characters of a cell written with `ESCAPE` before them: what a spreadsheet reads as the
start of a formula (OWASP, CSV injection), and the escape itself, so that unescaping is exact."""


def escape_cell(value: Any) -> Any:
    """A cell as a sheet stores it: text starting with a formula character or with the escape gets one
    `'` in front, so a spreadsheet shows it as text instead of running it (OWASP's advice on CSV
    injection); anything else is stored as it is."""
    if isinstance(value, str) and value[:1] in _ESCAPED:
        return ESCAPE + value
    return value


def unescape_cell(value: Any) -> Any:
    """A stored cell read back: the `'` that `escape_cell` put before a formula character or before a
    `'` is dropped, so ids and text come back exactly as they were; other cells are left as typed."""
    if isinstance(value, str) and value[:1] == ESCAPE and value[1:2] in _ESCAPED:
        return value[1:]
    return value


def fit_cell(text: Any, dialogue_id: str) -> Any:
    """`text` cut to `CELL_LIMIT` characters, ending with a note of what was cut and where the whole text
    is, so a dialogue with a huge message still gives a sheet the kit (and a spreadsheet) can read."""
    if not isinstance(text, str) or len(text) <= CELL_LIMIT:
        return text
    note = "… [cut: {} more characters; the full text is in the run store, dialogue {}]"
    keep = CELL_LIMIT - len(note.format(len(text), dialogue_id))
    return text[:keep] + note.format(len(text) - keep, dialogue_id)


@contextlib.contextmanager
def writing_folder(folder: str | os.PathLike[str], error: type[KitError] = AnnotationError,
                   instead: str = "export to another folder") -> Iterator[None]:
    """Hold `folder` as the one writer of annotation files there, with the run store's writer lock: two
    exports (or two runs of notebook 09) into one folder would interleave their sheets and manifests,
    so the second stops at once with one `error` naming the folder and the run holding it. The lock's
    files go with the hold, so the folder ends holding only the sample."""
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(folder_writer(Path(folder), WRITER_STAGE, f"the annotation folder {folder}",
                                             instead, leave_nothing=True))
        except StoreError as exc:
            raise error(str(exc)) from None
        yield


def _fields(values: Mapping[str, Any]) -> str:
    return "\n".join(f"{k}: {', '.join(v) if isinstance(v, list | tuple) else v}" for k, v in values.items())


def sheet_rows(dialogues: Iterable[Mapping[str, Any]], benchmark: Any) -> list[dict[str, str]]:
    """One sheet row per dialogue with what the judge sees: task, profile for its domains, conversation."""
    context_for = benchmark_contexts(benchmark)
    rows = []
    for dialogue in dialogues:
        ctx = context_for(Dialogue.from_json(dialogue, f"dialogue {dialogue.get('id')!r} to annotate"))
        did = dialogue["id"]
        task = ctx["task"]
        context = {
            "task_type": dialogue.get("task_type", ""),
            "domains": ", ".join(dialogue.get("domains") or []),
            "task_description": task.get("task_description", ""),
            "task_goal": task.get("task_goal", ""),
            "demographics": _fields(ctx.get("demographics") or {}),
            "preferences": render_preferences(ctx.get("preferences") or {}),
            "past_interactions": render_interactions(ctx.get("interactions") or {}),
            "situation": _fields(ctx.get("situation") or {}),
            "conversation": render_conversation(dialogue["turns"]),
        }
        rows.append({"dialogue_id": did, **{key: fit_cell(text, did) for key, text in context.items()},
                     **dict.fromkeys(("annotator", *RATED, "notes"), "")})
    return rows


class _Pointer(dict):
    """Template fields -> a pointer to the sheet column holding that material."""

    COLUMNS: Mapping[str, str] = {
        "conversation": "conversation",
        "goal": "task_goal",
        "task_description": "task_description",
        "demographics": "demographics",
        "preferences": "preferences",
        "interactions": "past_interactions",
        "situation": "situation",
    }

    def __missing__(self, key: str) -> str:
        return f"[see the sheet's `{self.COLUMNS.get(key, key)}` column]"


def _template(dimension: str) -> str:
    family = DIMENSIONS[dimension].family
    return {
        "task_completion": judge_prompts.TASK_COMPLETION,
        "personalization": judge_prompts.PERSONALIZATION,
        "naturalness": judge_prompts.NATURALNESS,
        "coherence": judge_prompts.COHERENCE,
    }[family]


def guidelines() -> str:
    """The annotation guide: how to fill the sheet, then the judge's instructions for each column."""
    parts = [
        "# Annotation guidelines",
        "",
        "Rate every dialogue of the sheet on the six columns below. The instructions under each column "
        "are exactly what the judge model is given, so your ratings and the judge's can be compared. "
        "Where they ask for a reply format, write only the number (or True/False) in the sheet's "
        "column instead. Leave a cell blank if you cannot rate it: blanks are left out, never guessed.",
        "",
        "- Write your name or an id in the `annotator` column (the same on every row), or leave it blank "
        "and name the file after yourself (e.g. `annotator_alice.csv`).",
        "- Do not change `dialogue_id` or the order of columns; add free text in `notes` if useful.",
        "- Save as CSV (UTF-8). Each annotator fills their own copy of the sheet.",
        "",
    ]
    for name in RATED:
        dim = DIMENSIONS[name]
        scale = "True or False" if dim.family == "task_completion" else f"a whole number {dim.low}-{dim.high}"
        values = _Pointer(levels=judge_prompts.PERSONALIZATION_LEVELS)
        if dim.speaker:
            values.update(speaker=dim.speaker, speaker_upper=dim.speaker.upper())
        text = _template(name).format_map(values)
        parts += [f"## Column `{name}` ({scale})", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(parts)


def export_sheet(
    store: RunStore | str | os.PathLike[str],
    benchmark: Any,
    out_dir: str | os.PathLike[str],
    *,
    n: int = 100,
    seed: int = 0,
    where: Mapping[str, Any] | None = None,
    stratify_by: str | None = None,
    apart: bool = False,
) -> dict[str, Path]:
    """Write the blank sheet, the guidelines and the sample manifest; an existing sheet is never overwritten.

    Filled copies are usually saved next to the blank one; refusing to overwrite keeps a re-run from
    destroying anyone's work. Delete the folder's sheet to export a new sample. The manifest records
    the sample's design (`SampleDesign`: simple, or stratified by `stratify_by`, drawn `apart` or not),
    which the human-anchored estimates (`validity.anchored`) weight the labels by.

    The folder is held while it is checked and written (`writing_folder`), so a second export into it
    stops at once instead of mixing two samples; the sheet is written last, so a run stopped midway
    leaves no sheet without its manifest.
    """
    store = store if isinstance(store, RunStore) else RunStore(store)
    out = Path(out_dir)
    with writing_folder(out):
        return _export(store, benchmark, out, n=n, seed=seed, where=where, stratify_by=stratify_by,
                       apart=apart)


def _export(store: RunStore, benchmark: Any, out: Path, *, n: int, seed: int,
            where: Mapping[str, Any] | None, stratify_by: str | None, apart: bool) -> dict[str, Path]:
    paths = {"sheet": out / SHEET_NAME, "guidelines": out / GUIDELINES_NAME, "manifest": out / MANIFEST_NAME}
    if paths["sheet"].exists():
        manifest = read_manifest(paths["manifest"]) if paths["manifest"].exists() else None
        drawn = {"seed": seed, "n": n, "stratify_by": stratify_by, "apart": apart}
        if manifest is None or {key: manifest.get(key, False) for key in drawn} != drawn:
            raise AnnotationError(
                f"{paths['sheet']} already exists from another sample; move it away (it may hold "
                "someone's ratings) or export to another folder"
            )
        return paths
    dialogues, design = draw_sample(store, n, seed=seed, where=where, stratify_by=stratify_by, apart=apart)
    if not dialogues:
        raise AnnotationError(f"{store.root}: no finished dialogues to sample for annotation")
    cells = _cells(paths["sheet"], sheet_rows(dialogues, benchmark))
    with atomic_file(paths["guidelines"]) as fh:
        fh.write(guidelines())
    manifest = {
        "store": str(store.root),
        "n": n,
        "seed": seed,
        "where": dict(where or {}),
        "stratify_by": stratify_by,
        "apart": apart,
        "dialogue_ids": [d["id"] for d in dialogues],
        "design": {"kind": design.kind, **msgspec.to_builtins(design)},
    }
    with atomic_file(paths["manifest"]) as fh:
        fh.write(json.dumps(manifest, indent=1))
    _write_cells(paths["sheet"], SHEET_COLUMNS, cells)
    return paths


def read_table(path: str | os.PathLike[str]) -> tuple[list[str], list[dict[str, str]], str]:
    """A sheet as written: its header, its rows (text cells, `escape_cell` undone) and its delimiter (a
    spreadsheet saving with `;` or tabs is read as well), so it can be written back in the same form
    (`write_table`). A row the CSV reader refuses (a NUL byte, a cell over its limit) is named by its
    file, row and line."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")  # as stored: a carriage return in a cell stays one
    except (OSError, UnicodeDecodeError) as exc:
        raise AnnotationError(f"{path}: cannot read the sheet as UTF-8 text ({exc})") from exc
    header = text.splitlines()[0] if text.strip() else ""
    delimiter = max(",;\t", key=header.count)
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows: list[dict[str, str]] = []
    try:
        fields = list(reader.fieldnames or ())
        for row in reader:
            if any("\0" in value for value in row.values() if isinstance(value, str)):
                raise csv.Error("a NUL byte: the file was damaged while it was written")
            rows.append({key: unescape_cell(value) for key, value in row.items()})
    except csv.Error as exc:
        row = len(rows) + 2 if reader.line_num > 1 else 1
        raise AnnotationError(f"{path}, row {row} (line {reader.line_num}): not a CSV row the kit can read "
                              f"({exc}); save the sheet again as CSV") from None
    return fields, rows, delimiter


def write_table(path: str | os.PathLike[str], header: Sequence[str], rows: Iterable[Mapping[str, str]],
                delimiter: str = ",") -> None:
    """Write a sheet atomically (`atomic_file`), quoted as the export quotes it and every cell escaped
    (`escape_cell`): a crash or a closed tab mid-write leaves the previous sheet whole, and opening it
    in a spreadsheet runs no formula. A cell the reader would refuse is refused here, before writing."""
    _write_cells(Path(path), header, _cells(Path(path), rows), delimiter)


def _cells(path: Path, rows: Iterable[Mapping[str, str]]) -> list[dict[str, Any]]:
    """The rows escaped for the sheet at `path`; a cell the reader could not read back is refused,
    naming row and column, so a sheet is never written that the kit cannot read."""
    stored = []
    for line, row in enumerate(rows, start=2):
        cells = {key: escape_cell(value) for key, value in row.items()}
        for column, value in cells.items():
            if isinstance(value, str) and len(value) > csv.field_size_limit():
                raise AnnotationError(f"{path}, row {line}, column {column}: {len(value)} characters, more "
                                      "than a sheet can be read back with; nothing was written")
            if isinstance(value, str) and "\x00" in value:
                raise AnnotationError(f"{path}, row {line}, column {column}: a NUL character, which no "
                                      "sheet can be read back with; nothing was written")
        stored.append(cells)
    return stored


def _write_cells(path: Path, header: Sequence[str], cells: list[dict[str, Any]],
                 delimiter: str = ",") -> None:
    with atomic_file(path) as fh:
        writer = csv.DictWriter(fh, fieldnames=list(header), delimiter=delimiter,
                                quoting=csv.QUOTE_NONNUMERIC, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(cells)


def scale(dimension: str) -> str:
    """The values a dimension's column takes, as the guidelines state them."""
    dim = DIMENSIONS[dimension]
    return "True or False" if dim.family == "task_completion" else f"{dim.low}-{dim.high}"


def sheet_for(sheet: str | os.PathLike[str], annotator: str | None) -> Path:
    """The sheet to fill: `sheet` itself, or for the blank exported sheet (or its folder) the
    annotator's own copy beside it (`annotator_<name>.csv`, made from the blank once)."""
    path = Path(sheet)
    if path.is_dir():
        path = path / SHEET_NAME
    if path.name != SHEET_NAME:
        return path
    if not annotator:
        raise AnnotationError(
            f"{path} is the blank exported sheet, shared by every annotator: pass annotator= "
            "to fill your own copy beside it"
        )
    if not path.is_file():
        raise AnnotationError(f"{path}: no exported sheet; run the Table 5 cell of notebook 06 first")
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", annotator).strip("_") or "annotator"
    copy = path.with_name(f"annotator_{name}.csv")
    if not copy.exists():
        shutil.copyfile(path, copy)
    return copy


def is_rated(row: Mapping[str, str]) -> bool:
    """Whether a sheet row holds any rating."""
    return any((row.get(dim) or "").strip() for dim in RATED)


def stored_rating(dimension: str, value: float) -> str:
    """A rating as a sheet cell holds it, the form `reading.rating` reads back."""
    if DIMENSIONS[dimension].family == "task_completion":
        return "True" if value == 1 else "False"
    return str(int(value))
