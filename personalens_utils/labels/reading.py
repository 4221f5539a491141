"""Filled sheets read back: untrusted input, so read strictly. A value that is not a rating on the
dimension's scale is an error naming the file, row and column; a blank cell is "not rated" and stays
missing; a dialogue not in the exported sample, a sheet with two annotators' names or two sheets by
one annotator are refused. Nothing is ever filled in for an annotator."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from personalens_utils.judging import DIMENSIONS
from personalens_utils.labels import AnnotationError
from personalens_utils.labels.sampling import read_manifest
from personalens_utils.labels.sheets import MANIFEST_NAME, RATED, SHEET_NAME, read_table

RATINGS_COLUMNS = ("annotator", "dialogue_id", "dimension", "score")
"""The long ratings frame of `read_sheets`."""
_TRUE = {"true", "t", "yes", "y", "1", "1.0"}
_FALSE = {"false", "f", "no", "n", "0", "0.0"}


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


def ratings_of(sheets: pd.DataFrame | str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
               manifest: str | os.PathLike[str]) -> pd.DataFrame:
    """Long ratings: `sheets` itself when it is already `read_sheets`' frame, else the sheets read."""
    if isinstance(sheets, pd.DataFrame):
        absent = [c for c in RATINGS_COLUMNS if c not in sheets.columns]
        if absent:
            raise AnnotationError(f"the ratings frame has no column(s) {absent}; read the sheets with "
                                  "labels.reading.read_sheets, or pass their paths")
        return sheets
    return read_sheets(sheets, manifest=manifest)


def given_sheets(sheets: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                 manifest: str | os.PathLike[str] | None = None) -> tuple[Any, Path]:
    """People's filled sheets and their sample's manifest, for notebook 09: the manifest given, or
    `annotation_sample.json` beside the first sheet."""
    if manifest is None:
        named = [str(sheets)] if isinstance(sheets, str | os.PathLike) else [str(p) for p in sheets]
        first = sorted(Path(p) for name in named for p in glob.glob(name))
        if not first:
            raise AnnotationError(f"annotation_sheets={sheets!r}: no file matches")
        manifest = first[0].parent / MANIFEST_NAME
    if not Path(manifest).is_file():
        raise AnnotationError(f"no annotation manifest at {manifest}: pass the sample's "
                            "annotation_sample.json (annotation_manifest), written with the sheet")
    return sheets, Path(manifest)
