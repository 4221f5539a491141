"""Typed run-store records: stores written before the record types existed still load, byte for byte,
a line that does not fit names its file, line and field, and no table name is spelled outside records."""

from __future__ import annotations

import ast
import dataclasses
import shutil
from pathlib import Path

import orjson
import pytest
from support.records import dialogue_json, write_lines

import personalens_utils
from personalens_utils.records import (
    RECORD_TYPES,
    Batch,
    BatchEntry,
    ConsistencyCheck,
    Dialogue,
    Judgment,
    MaskStep,
    RecordError,
    record_type,
)
from personalens_utils.store import RunStore, merge_stores

OLD_STORE = Path(__file__).parent / "fixtures" / "store_v1"
PACKAGE = Path(personalens_utils.__file__).parent


def _old_tables() -> list[Path]:
    return sorted(OLD_STORE.rglob("*.jsonl"))


def test_the_old_store_covers_every_record_type():
    assert {record_type(p.stem) for p in _old_tables()} == set(RECORD_TYPES) - {
        record_type("generation_md_tasks")}  # the tiny generation asked for no multi-domain task


@pytest.mark.parametrize("path", _old_tables(), ids=lambda p: str(p.relative_to(OLD_STORE)))
def test_every_old_record_reads_and_writes_back_the_same_bytes(path):
    kind = record_type(path.stem)
    store = RunStore(path.parent)
    lines = path.read_bytes().splitlines()
    records = store.read(kind)
    assert len(records) == len(lines)
    for line, record in zip(lines, records, strict=True):
        assert isinstance(record, kind)
        assert orjson.dumps(record.to_json()) == line


@pytest.mark.parametrize("kind", [Dialogue, Judgment, ConsistencyCheck])
def test_old_ids_are_the_ids_computed_from_the_identity_fields(kind):
    records = RunStore(OLD_STORE).read(kind)
    assert records and all(r.id == r.identity() for r in records)


def test_a_new_record_computes_its_id_with_the_old_recipe():
    old = RunStore(OLD_STORE).read(Dialogue)[0]
    assert dataclasses.replace(old, id="").id == old.id
    assert dataclasses.replace(old, id="", assistant_setting="base+I").id != old.id


def test_batch_entries_keep_their_outcome_and_answer():
    entries = RunStore(OLD_STORE / "batch").read(BatchEntry)
    assert {e.status for e in entries} == {"succeeded", "errored"}
    assert all((e.text is not None) == e.succeeded for e in entries)
    batches = RunStore(OLD_STORE / "batch").read(Batch)
    assert {c for b in batches for c in b.entries} == {e.id for e in entries}


def test_typed_rows_match_the_stored_layout_through_merge(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(OLD_STORE, source)
    merge_stores([source], tmp_path / "merged", kinds=[Dialogue, Judgment, ConsistencyCheck, MaskStep])
    for kind in (Dialogue, Judgment, ConsistencyCheck, MaskStep):
        merged = RunStore(tmp_path / "merged").path(kind)
        assert merged.read_bytes() == RunStore(source).path(kind).read_bytes()


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"turns": "hello"}, "turns", "must be a list"),
        ({"turns": [{"role": "narrator", "content": "x"}]}, "turns", "item 0"),
        ({"user_id": "seven"}, "user_id", "must be an integer"),
        ({"usage": {"tokens": 3}}, "usage", "four token counts"),
        ({"scenario_id": None}, "scenario_id", "must be a string"),
    ],
)
def test_a_line_that_does_not_fit_names_file_line_and_field(tmp_path, change, field, problem):
    store = RunStore(tmp_path)
    write_lines(store, Dialogue, [dialogue_json("a"), dialogue_json("b", **change)])
    with pytest.raises(RecordError) as caught:
        store.read(Dialogue)
    message = str(caught.value)
    assert f"{store.path(Dialogue)}:2" in message and repr(field) in message and problem in message
    assert "docs/architecture.md" in message and "delete" in message


def test_a_missing_field_is_named(tmp_path):
    store = RunStore(tmp_path)
    row = dialogue_json("a")
    del row["assistant_setting"]
    write_lines(store, Dialogue, [row])
    with pytest.raises(RecordError, match=r":1: Dialogue record field 'assistant_setting' is missing"):
        store.read(Dialogue)


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_table_name_is_a_string_literal_outside_the_records_module():
    tables = {kind.table for kind in RECORD_TYPES}
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {value!r}"
        for path in sorted(PACKAGE.rglob("*.py")) if path.name != "records.py" or path.parent != PACKAGE
        for line, value in _string_constants(path)
        if value in tables
    ]
    assert found == []


def test_the_table_name_check_sees_a_literal(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""Docstring naming dialogues."""\nTABLE = "judgments"\n')
    assert _string_constants(sample) == [(2, "judgments")]
