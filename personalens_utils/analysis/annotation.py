"""Human annotation for Table 5: export a sample of dialogues to a sheet, read filled sheets back.

The export writes three files: the sheet (CSV, one row per dialogue, rating columns left blank),
the guidelines (Markdown: the judge's own instructions for every dimension, so people and judge
rate by the same rules, as in the paper), and a manifest of the sampled dialogue ids and of how they
were drawn (`SampleDesign`: a simple random sample, or one per stratum such as each assistant). Filled
sheets from any number of annotators are read back strictly: a value that is not a rating on the
dimension's scale is an error naming the file, row and column; a blank cell is "not rated" and
stays missing. Nothing is ever filled in for an annotator.

Sheets are opened in spreadsheets, so every cell the kit writes is safe there: a cell that would run
as a formula is escaped (`escape_cell`, undone on reading), a cell longer than the reader takes is cut
with a note saying so, and each file is written whole or not at all, by one writer of its folder at a
time (`writing_folder`).
"""

from __future__ import annotations

import contextlib
import csv
import glob
import io
import json
import os
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from personalens_utils.base.errors import KitError
from personalens_utils.base.files import atomic_file
from personalens_utils.judging import DIMENSIONS, JUDGEABLE_STATUSES, benchmark_contexts
from personalens_utils.prompt_templates import judge as judge_prompts
from personalens_utils.prompt_templates.render import (
    render_conversation,
    render_interactions,
    render_preferences,
)
from personalens_utils.runstore.columnar import Columnar
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
_TRUE = {"true", "t", "yes", "y", "1", "1.0"}
_FALSE = {"false", "f", "no", "n", "0", "0.0"}


class AnnotationError(KitError, ValueError):
    """A filled sheet cannot be read: the message names the file, row and column."""


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


@dataclass(frozen=True)
class Stratum:
    """One stratum of an annotation sample: its value of the stratifying field, how many finished
    dialogues it held when the sample was drawn (None in manifests written before designs were
    recorded) and the dialogues drawn from it."""

    value: Any
    population: int | None
    dialogue_ids: tuple[str, ...]

    @property
    def probability(self) -> float:
        """The chance each of the stratum's dialogues had of being drawn (a simple random sample)."""
        if not self.population:
            raise AnnotationError(f"stratum {self.value!r}: the manifest does not record how many dialogues "
                                  "it was drawn from")
        return len(self.dialogue_ids) / self.population


@dataclass(frozen=True)
class SampleDesign:
    """How an annotation sample was drawn, recorded in its manifest so an estimator can weight each
    label by the inverse of its chance of being drawn: a simple random sample of the pool (`by` None,
    one stratum), or one simple random sample per value of the field `by` (e.g. `assistant_model`)."""

    by: str | None
    strata: tuple[Stratum, ...]

    @property
    def kind(self) -> str:
        return "simple" if self.by is None else "stratified"

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> SampleDesign:
        """The manifest's design; a manifest from before designs were recorded held a simple random
        sample (the only kind drawn then), of a pool whose size it did not record."""
        design = manifest.get("design")
        if design is None:
            return cls(None, (Stratum(None, None, tuple(manifest["dialogue_ids"])),))
        try:
            return msgspec.convert(design, cls)
        except msgspec.ValidationError as exc:
            raise AnnotationError(f"the manifest's sample design is malformed ({exc}); "
                                  "export the sample again to another folder") from exc

    def weights(self, dialogue_ids: Sequence[str]) -> np.ndarray:
        """Inverse-probability weights of labelled dialogues (1 for every one of a simple sample)."""
        if self.by is None:
            chance = {}
        else:
            chance = {did: 1 / s.probability for s in self.strata for did in s.dialogue_ids}
        drawn = {did for s in self.strata for did in s.dialogue_ids}
        stray = [did for did in dialogue_ids if did not in drawn]
        if stray:
            raise AnnotationError(f"{len(stray)} labelled dialogue(s) are not in the sample's design, e.g. "
                                  f"{stray[0]!r}: rate only the exported sheet's dialogues")
        return np.array([chance.get(did, 1.0) for did in dialogue_ids], dtype=float)


def allocate(n: int, sizes: Sequence[int]) -> list[int]:
    """`n` draws shared equally among strata of `sizes` (the first strata get one more when it does not
    divide), none given more than it holds; what a small stratum cannot take goes to the others."""
    counts = [0] * len(sizes)
    left = min(n, sum(sizes))
    while left:
        room = [i for i, size in enumerate(sizes) if counts[i] < size]
        share, extra = divmod(left, len(room))
        for rank, i in enumerate(room):
            take = min(share + (rank < extra), sizes[i] - counts[i])
            counts[i] += take
            left -= take
    return counts


def shared_equally(n: int, strata: int) -> int:
    """Each stratum's draw when `n` is shared equally among `strata` drawn apart: rounded up, so the
    sample holds at least `n` (fewer only when strata hold fewer dialogues)."""
    return -(-n // strata) if strata else 0


def draw_sample(
    store: RunStore, n: int = 100, *, seed: int = 0, where: Mapping[str, Any] | None = None,
    stratify_by: str | None = None, apart: bool = False,
) -> tuple[list[dict[str, Any]], SampleDesign]:
    """A seeded random sample of finished dialogues (all of them if fewer than `n`) and its design.

    `where` keeps only dialogues whose fields equal the given values (e.g. one setting); `stratify_by`
    names a field whose every value gets its own simple random sample, `n` shared equally among them
    (`allocate`), so e.g. every assistant gets as many labels. `apart` draws each stratum on its own:
    `shared_equally(n, strata)` dialogues (all it holds if fewer) by a generator seeded with `seed` and
    the stratum's value, so a stratum added to the pool (a new assistant) never changes which
    dialogues another stratum gets, as long as each stratum's count stays the same.
    """
    where = dict(where or {})
    with Columnar(store, tables=[Dialogue]) as cols:
        fields = list(cols.sql("SELECT * FROM dialogues LIMIT 0").columns)
        for key, value in [*where.items(), *([(stratify_by, "each value")] if stratify_by else [])]:
            if key not in fields:
                raise AnnotationError(f"cannot sample dialogues by {key!r} = {value!r}: {key!r} is not "
                                      f"one of the fields a sample can be chosen by {sorted(fields)}")
        chosen_by = list(dict.fromkeys([*where, *([stratify_by] if stratify_by else [])]))
        columns = ", ".join(["id", "_source", "_offset", "_length", *chosen_by])
        pool = cols.sql(f"SELECT {columns} FROM dialogues "
                        "WHERE status IN (SELECT unnest(?)) ORDER BY id", [list(JUDGEABLE_STATUSES)])
        for key, value in where.items():
            pool = pool[pool[key] == value]
        rng = random.Random(seed)
        if stratify_by is None:
            chosen = pool.iloc[rng.sample(range(len(pool)), min(n, len(pool)))]
            design = SampleDesign(None, (Stratum(None, len(pool), tuple(chosen["id"])),))
        else:
            groups = list(pool.groupby(stratify_by, sort=True))
            if apart:
                each = shared_equally(n, len(groups))
                picks = [part.iloc[random.Random(f"{seed}:{_plain(value)}").sample(range(len(part)),
                                                                                   min(each, len(part)))]
                         for value, part in groups]
            else:
                counts = allocate(n, [len(part) for _, part in groups])
                picks = [part.iloc[rng.sample(range(len(part)), k)]
                         for (_, part), k in zip(groups, counts, strict=True)]
            chosen = pd.concat(picks) if picks else pool.iloc[:0]
            design = SampleDesign(stratify_by, tuple(
                Stratum(_plain(value), len(part), tuple(pick["id"]))
                for (value, part), pick in zip(groups, picks, strict=True)))
        return list(cols.lines(Dialogue, chosen)), design


def _plain(value: Any) -> Any:
    """A stratum's value as JSON writes it (numpy integers read from the store become ints)."""
    return value.item() if isinstance(value, np.generic) else value


def sample_dialogues(
    store: RunStore, n: int = 100, *, seed: int = 0, where: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """A seeded simple random sample of finished dialogues (`draw_sample` without its design)."""
    return draw_sample(store, n, seed=seed, where=where)[0]


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


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        manifest = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise AnnotationError(f"{path}: cannot read the annotation manifest ({exc})") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("dialogue_ids"), list):
        raise AnnotationError(f"{path}: not an annotation manifest (no 'dialogue_ids' list)")
    return manifest


def rating(raw: str, dimension: str, where: str) -> float | None:
    """One sheet cell read strictly: None when blank, else a value on the dimension's scale (or an error)."""
    text = raw.strip()
    if not text:
        return None
    dim = DIMENSIONS[dimension]
    if dim.family == "task_completion":
        low = text.lower()
        if low in _TRUE:
            return 1.0
        if low in _FALSE:
            return 0.0
        raise AnnotationError(f"{where}: {text!r} is not a task-completion rating (True/False, yes/no, 1/0)")
    try:
        value = float(text)
    except ValueError:
        raise AnnotationError(f"{where}: {text!r} is not a number ({dim.low}-{dim.high} expected)") from None
    if not value.is_integer() or not dim.low <= value <= dim.high:
        raise AnnotationError(f"{where}: {text!r} is not a whole number from {dim.low} to {dim.high}")
    return value


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


def _read_csv(path: Path) -> list[dict[str, str]]:
    return read_table(path)[1]


def read_sheet(path: str | os.PathLike[str], *, expected_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """One filled sheet -> long ratings (annotator, dialogue_id, dimension, score), blanks left out."""
    path = Path(path)
    rows = _read_csv(path)
    if not rows:
        raise AnnotationError(f"{path}: the sheet has no rows")
    missing = [c for c in ("dialogue_id", *RATED) if c not in rows[0]]
    if missing:
        raise AnnotationError(f"{path}: missing column(s) {missing}; keep the exported header row")
    names = {(r.get("annotator") or "").strip() for r in rows} - {""}
    if len(names) > 1:
        raise AnnotationError(
            f"{path}: the annotator column holds several names {sorted(names)}; one sheet is one annotator"
        )
    annotator = names.pop() if names else path.stem
    expected = set(expected_ids) if expected_ids is not None else None
    seen: set[str] = set()
    out = []
    for line, row in enumerate(rows, start=2):
        raw = row.get("dialogue_id") or ""
        did = raw if expected is not None and raw in expected else raw.strip()
        if not did:
            raise AnnotationError(f"{path}, row {line}: empty dialogue_id")
        if did in seen:
            raise AnnotationError(f"{path}, row {line}: dialogue {did} appears twice")
        if expected is not None and did not in expected:
            raise AnnotationError(f"{path}, row {line}: dialogue {did} is not in the exported sample")
        seen.add(did)
        for dim in RATED:
            score = rating(row.get(dim) or "", dim, f"{path}, row {line}, column {dim}")
            if score is not None:
                out.append({"annotator": annotator, "dialogue_id": did, "dimension": dim, "score": score})
    if not out:
        raise AnnotationError(f"{path}: no ratings are filled in (every rating cell is blank)")
    return pd.DataFrame(out)


def read_sheets(
    sheets: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    manifest: str | os.PathLike[str] | None = None,
) -> pd.DataFrame:
    """Filled sheets of any number of annotators (paths or one glob) -> one long frame of ratings.

    With a manifest, every dialogue id must belong to the exported sample. Two sheets by the same
    annotator are refused, since their ratings would be counted twice.
    """
    if isinstance(sheets, str | os.PathLike):
        pattern = str(sheets)
        if glob.has_magic(pattern):  # a glob over the export folder skips the blank sheet itself
            paths = [p for p in sorted(Path(p) for p in glob.glob(pattern)) if p.name != SHEET_NAME]
        else:
            paths = [Path(pattern)]
    else:
        paths = [Path(p) for p in sheets]
    if not paths:
        raise AnnotationError(f"no filled annotation sheets found at {sheets!s}")
    expected = read_manifest(manifest)["dialogue_ids"] if manifest is not None else None
    frames, owners = [], {}
    for path in paths:
        if not path.is_file():
            raise AnnotationError(f"{path}: no such sheet")
        frame = read_sheet(path, expected_ids=expected)
        name = frame["annotator"].iloc[0]
        if name in owners:
            raise AnnotationError(
                f"{path}: annotator {name!r} already rated in {owners[name]}; give each annotator one sheet"
            )
        owners[name] = path
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
