"""Annotation sheets that are safe to open and read back, and one writer per folder of notebook 09's
(issue 40, parts 4 and 5): formula cells escaped and restored exactly, a huge message cut on export with
a note, a CSV the reader refuses named by file and row, a second writer into a folder stopped at once in
one line, and a refused writer told which store is in use."""

from __future__ import annotations

import csv
import json
import os
import re
import threading
from pathlib import Path

import pandas as pd
import pytest
from support.records import put
from support.synthetic_store import JUDGE, build_benchmark, build_store, judgment_record

from personalens_utils.labels import AnnotationError
from personalens_utils.labels.reading import read_sheet
from personalens_utils.labels.sheets import (
    CELL_LIMIT,
    SHEET_NAME,
    escape_cell,
    export_sheet,
    read_table,
    unescape_cell,
    write_table,
    writing_folder,
)
from personalens_utils.measures import scores
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import ReproductionStore, RunStore, StoreInUse
from personalens_utils.session.validity import VALIDITY_STORE
from personalens_utils.validity import anchored
from personalens_utils.validity.anchored import ValidityError

USERS = 2
HOSTILE = "model-h"
FORMULAS = ("=cmd|' /C calc'!A0", "+1", "-3", "@x", "'abc", "'", "''=x", "\tfoo", "\rbar")
"""Ids a spreadsheet would run as a formula, or that start with the escape itself."""
PLAIN = "plain text"
HUGE = "huge"
MESSAGE = 1_000_000


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> RunStore:
    """The small synthetic store plus one assistant whose dialogues carry hostile ids and a 1 MB message."""
    store = build_store(tmp_path_factory.mktemp("hostile") / "run", users=USERS, second_judge=False)
    model = next(d for d in store.records(Dialogue)
                 if (d["assistant_model"], d["assistant_setting"], d["status"]) == ("model-a", "base",
                                                                                   "terminated"))
    added = [{**model, "assistant_model": HOSTILE, "id": did} for did in (*FORMULAS, PLAIN)]
    turns = [{**model["turns"][0], "content": "=" + "x" * MESSAGE}, *model["turns"][1:]]
    added.append({**model, "assistant_model": HOSTILE, "id": HUGE, "turns": turns})
    put(store, Dialogue, added)
    put(store, Judgment, [judgment_record(d["id"], dim, 3.0 if dim != "task_completion" else 1.0)
                          for d in added for dim in anchored.DIMENSIONS])
    return store


@pytest.fixture(scope="module")
def exported(store, tmp_path_factory) -> dict[str, Path]:
    return export_sheet(store, build_benchmark(USERS), tmp_path_factory.mktemp("sheet"), n=100,
                                   where={"assistant_model": HOSTILE})


def _rated(paths: dict[str, Path], folder: Path) -> Path:
    """The exported sheet filled by one annotator, as the kit writes a sheet back."""
    header, rows, delimiter = read_table(paths["sheet"])
    path = folder / "alice.csv"
    write_table(path, header, [dict(r, annotator="alice", personalization="3") for r in rows],
                           delimiter)
    return path


def test_formula_cells_are_escaped_in_the_file_and_read_back_exactly(exported, tmp_path):
    with exported["sheet"].open(encoding="utf-8", newline="") as fh:
        cells = [cell for row in csv.reader(fh) for cell in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")], "a cell a spreadsheet runs"
    assert "'=cmd|' /C calc'!A0" in cells and "''abc" in cells
    ids = [r["dialogue_id"] for r in read_table(exported["sheet"])[1]]
    assert sorted(ids) == sorted((*FORMULAS, PLAIN, HUGE))
    rated = read_sheet(_rated(exported, tmp_path), expected_ids=ids)
    assert set(rated["dialogue_id"]) == {*FORMULAS, PLAIN, HUGE}

    values = (*FORMULAS, PLAIN, "", "'plain", "a=b", "-")
    for value in values:
        assert unescape_cell(escape_cell(value)) == value
    notes = tmp_path / "notes.csv"
    write_table(notes, ["dialogue_id", "notes"], [{"dialogue_id": v, "notes": v} for v in values])
    assert read_table(notes)[1] == [{"dialogue_id": v, "notes": v} for v in values]


def test_a_rating_typed_with_a_sign_is_still_refused_naming_file_row_and_column(exported, tmp_path):
    path = _rated(exported, tmp_path)
    header, rows, _ = read_table(path)
    with path.open("w", encoding="utf-8", newline="") as fh:  # typed by hand, as a spreadsheet saves it
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows({**r, "dialogue_id": escape_cell(r["dialogue_id"]),
                          "personalization": "-1" if i == 1 else "3"} for i, r in enumerate(rows))
    with pytest.raises(AnnotationError, match=rf"^{re.escape(str(path))}, row 3, column personalization: "
                                              "'-1' is not"):
        read_sheet(path)


def test_a_one_megabyte_message_is_exported_cut_with_a_note_and_the_sheet_reads_back(store, exported,
                                                                                    tmp_path):
    rows = {r["dialogue_id"]: r for r in read_table(exported["sheet"])[1]}
    cell = rows[HUGE]["conversation"]
    assert len(cell) <= CELL_LIMIT < csv.field_size_limit()
    assert cell.endswith(f"more characters; the full text is in the run store, dialogue {HUGE}]")
    assert "[cut: " in cell and cell.count("x") > CELL_LIMIT // 2
    kept = next(d for d in store.records(Dialogue) if d["id"] == HUGE)
    assert len(kept["turns"][0]["content"]) == MESSAGE + 1, "the store keeps the whole message"
    assert len(read_sheet(_rated(exported, tmp_path))) == len(rows)


@pytest.mark.parametrize(("bad", "why"), [("x\0y", "NUL"), ("x" * 200_000, "field larger than field limit")],
                         ids=["nul-byte", "over-the-field-limit"])
def test_a_row_the_csv_reader_refuses_is_named_by_file_and_row(tmp_path, bad, why):
    path = tmp_path / "sheet.csv"
    path.write_text(f'"dialogue_id","notes"\n"d1","fine"\n"d2","{bad}"\n', encoding="utf-8")
    with pytest.raises(AnnotationError) as refused:
        read_sheet(path)
    message = str(refused.value)
    assert message.startswith(f"{path}, row 3 ") and why in message and "\n" not in message


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> tuple[RunStore, pd.DataFrame]:
    """A store as notebook 09 reads it (one dialogue per scenario and assistant) and its judge's scores."""
    store = build_store(tmp_path_factory.mktemp("plain") / "run", users=USERS, second_judge=False)
    return store, scores.load_scores(store, judge_model=JUDGE)


def _sample(plain: tuple[RunStore, pd.DataFrame], folder: Path, seed: int) -> tuple[list[Path], Path]:
    store, tidy = plain
    return anchored.synthetic_sample(store, build_benchmark(USERS), tidy, folder, n=12, seed=seed,
                                     where={"assistant_setting": "base"})


def test_a_second_run_of_09_into_a_folder_being_written_stops_in_one_line(plain, tmp_path, monkeypatch):
    folder = tmp_path / "anchored_sample"
    writing, finish = threading.Event(), threading.Event()
    fill = anchored.synthetic_sheets

    def paused(*args, **kwargs):  # the first run stops between drawing its sample and filling it
        if threading.current_thread().name == "first":
            writing.set()
            finish.wait(timeout=60)
        return fill(*args, **kwargs)

    monkeypatch.setattr(anchored, "synthetic_sheets", paused)
    done: dict[str, object] = {}
    first = threading.Thread(target=lambda: done.update(result=_sample(plain, folder, 0)), name="first")
    first.start()
    try:
        assert writing.wait(timeout=60), "the first run did not start writing"
        with pytest.raises(ValidityError) as refused:
            _sample(plain, folder, 1)
    finally:
        finish.set()
        first.join(timeout=120)
    message = str(refused.value)
    assert "\n" not in message and f"the annotation folder {folder} is in use" in message
    assert f"process {os.getpid()} " in message
    sheets, manifest = done["result"]
    assert json.loads(manifest.read_text())["seed"] == 0
    ids = json.loads(manifest.read_text())["dialogue_ids"]
    assert len(read_table(folder / SHEET_NAME)[1]) == len(ids) == 12
    for sheet in sheets:
        assert b"\0" not in sheet.read_bytes()
        assert len(read_sheet(sheet, expected_ids=ids)) > 0
    marker = json.loads((folder / anchored.KIT_MARKER).read_text())["files"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([*marker, anchored.KIT_MARKER]), "no lock left"


def test_an_export_into_a_folder_held_by_another_writer_stops_before_writing(store, tmp_path):
    folder = tmp_path / "annotation"
    with writing_folder(folder), pytest.raises(AnnotationError) as refused:
        export_sheet(store, build_benchmark(USERS), folder, n=5)
    message = str(refused.value)
    assert "\n" not in message and f"the annotation folder {folder} is in use" in message
    assert not folder.exists(), "nothing written, and the lock's folder removed with it"


def test_the_lock_message_names_the_store_that_is_in_use(tmp_path):
    run = RunStore(tmp_path / "run")
    own = tmp_path / "records" / VALIDITY_STORE
    holder, second = ReproductionStore.over(run, own), ReproductionStore.over(run, own)
    with holder.writing("blame"), pytest.raises(StoreInUse) as refused, second.writing("blame"):
        pass
    message = str(refused.value)
    assert message.startswith(f"the store {own} (this notebook's own, over the run store {run.root}) "
                              "is in use: process ")
    assert "running blame on it" in message and "\n" not in message
    in_use = rf"^the run store {re.escape(str(run.root))} is in use"
    other = RunStore(run.root)
    with run.writing("judging"), pytest.raises(StoreInUse, match=in_use), other.writing("judging"):
        pass
