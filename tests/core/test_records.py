"""Typed run-store records: stores written before the record types existed still load (those written
before run identity once migrated), byte for byte,
a line that does not fit names its file, line and field, and no table name is spelled outside records."""

from __future__ import annotations

import ast
import dataclasses
import shutil
from pathlib import Path

import orjson
import pytest
from support.records import dialogue_json, write_lines
from support.source_trees import source_tree

import personalens_utils
from personalens_utils.llm import registry
from personalens_utils.runstore.records import (
    RECORD_TYPES,
    Batch,
    BatchEntry,
    Blame,
    ConsistencyCheck,
    Dialogue,
    Judgment,
    MaskStep,
    PersonaPrediction,
    ProbeJudgment,
    RecordError,
    record_type,
)
from personalens_utils.runstore.store import RunStore, StoreMigrated, merge_stores

OLD_STORE = Path(__file__).parents[1] / "fixtures" / "store_v1"
PACKAGE = Path(personalens_utils.__file__).parent
MIGRATED = {Dialogue.table, Judgment.table}
"""The tables of store_v1 written before run identity: migrated when the store is opened."""


def _old_tables() -> list[Path]:
    return sorted(p.relative_to(OLD_STORE) for p in OLD_STORE.rglob("*.jsonl"))


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    """A copy of store_v1, opened once (its dialogues and judgments are migrated then)."""
    shutil.copytree(OLD_STORE, tmp_path / "v1")
    for folder in (tmp_path / "v1", tmp_path / "v1" / "batch"):
        with pytest.warns(StoreMigrated, match="before run identity"):
            RunStore(folder)
    return tmp_path / "v1"


def test_the_old_store_covers_every_record_type():
    assert {record_type(p.stem) for p in _old_tables()} == set(RECORD_TYPES) - {
        record_type("generation_md_tasks"),  # the tiny generation asked for no multi-domain task
        Blame,  # failure reviews came after this store
        PersonaPrediction, ProbeJudgment}  # another benchmark's table, and judge probes: not in this run


@pytest.mark.parametrize("path", _old_tables(), ids=str)
def test_every_old_record_reads_and_writes_back_the_same_bytes(old_store, path):
    kind = record_type(path.stem)
    store = RunStore((old_store / path).parent)
    lines = (old_store / path).read_bytes().splitlines()
    if kind.table not in MIGRATED:
        assert lines == (OLD_STORE / path).read_bytes().splitlines()
    records = store.read(kind)
    assert len(records) == len(lines)
    for line, record in zip(lines, records, strict=True):
        assert isinstance(record, kind)
        assert orjson.dumps(record.to_json()) == line


@pytest.mark.parametrize("kind", [Dialogue, Judgment, ConsistencyCheck])
def test_ids_are_the_ids_computed_from_the_identity_fields(old_store, kind):
    records = RunStore(old_store).read(kind)
    assert records and all(r.id == r.identity() for r in records)


def test_a_new_record_computes_its_id_from_its_identity(old_store):
    old = RunStore(old_store).read(Dialogue)[0]
    assert dataclasses.replace(old, id="").id == old.id
    assert dataclasses.replace(old, id="", assistant_setting="base+I").id != old.id


def test_batch_entries_keep_their_outcome_and_answer(old_store):
    entries = RunStore(old_store / "batch").read(BatchEntry)
    assert {e.status for e in entries} == {"succeeded", "errored"}
    assert all((e.text is not None) == e.succeeded for e in entries)
    batches = RunStore(old_store / "batch").read(Batch)
    assert {c for b in batches for c in b.entries} == {e.id for e in entries}


def test_store_v1_is_migrated_once_and_its_judgments_follow_their_dialogues(old_store):
    store = RunStore(old_store)
    dialogues = {d.id: d for d in store.read(Dialogue)}
    judgments = store.read(Judgment)
    assert judgments and all(j.dialogue_id in dialogues for j in judgments)
    offline_id = registry.lookup("Claude 3 Sonnet").ids["offline"]
    assert {d.user for d in dialogues.values()} == {("offline", offline_id)}
    moved = orjson.loads((old_store / "id_migration.json").read_bytes())
    old_ids = [orjson.loads(line)["id"] for line in (OLD_STORE / "dialogues.jsonl").read_bytes().splitlines()]
    assert sorted(moved[Dialogue.table]) == sorted(old_ids)
    assert sorted(moved[Dialogue.table].values()) == sorted(dialogues)
    kept = (old_store / "dialogues.jsonl.before-run-identity").read_bytes()
    assert kept == (OLD_STORE / "dialogues.jsonl").read_bytes()  # nothing lost


def test_judgments_of_dialogues_kept_elsewhere_are_migrated_and_named_as_such(tmp_path):
    shutil.copytree(OLD_STORE / "batch", tmp_path / "batch")
    with pytest.warns(StoreMigrated, match=r"2 judgment\(s\) of dialogues kept elsewhere still name the old"):
        store = RunStore(tmp_path / "batch")
    old = [orjson.loads(line) for line in (OLD_STORE / "batch" / "judgments.jsonl").read_bytes().splitlines()]
    assert [j.dialogue_id for j in store.read(Judgment)] == [row["dialogue_id"] for row in old]


def test_typed_rows_match_the_stored_layout_through_merge(old_store, tmp_path):
    source = old_store
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
    tree = source_tree(path)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_table_name_is_a_string_literal_outside_the_records_package():
    tables = {kind.table for kind in RECORD_TYPES if kind is not PersonaPrediction}  # "persona_bench" also
    found = [  # names the benchmark: its modules, call kind and folders
        f"{path.relative_to(PACKAGE)}:{line}: {value!r}"
        for path in sorted(PACKAGE.rglob("*.py")) if PACKAGE / "runstore" / "records" not in path.parents
        for line, value in _string_constants(path)
        if value in tables
    ]
    assert found == []


def test_the_table_name_check_sees_a_literal(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""Docstring naming dialogues."""\nTABLE = "judgments"\n')
    assert _string_constants(sample) == [(2, "judgments")]


def test_a_store_is_checked_for_migration_once(old_store, tmp_path, monkeypatch):
    def refuse(root):
        raise AssertionError(f"{root} was checked for lines written before run identity again")

    monkeypatch.setattr("personalens_utils.runstore.store.needs_migration", refuse)
    held = (OLD_STORE / "dialogues.jsonl").read_bytes().splitlines()
    assert len(RunStore(old_store).read(Dialogue)) == len(held)
    new = RunStore(tmp_path / "new")
    new.extend(RunStore(old_store).read(Dialogue)[:1])  # the first write says the store is of today's layout
    assert len(RunStore(tmp_path / "new").read(Dialogue)) == 1
