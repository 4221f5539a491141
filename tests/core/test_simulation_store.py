"""The run store's id index, read incrementally: other writers, torn tails and error replacement."""

from __future__ import annotations

import logging

import pytest
from filelock import FileLock
from support.records import dialogue

from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import DuplicateRecordError, RunStore


def test_two_store_objects_see_each_others_appends(tmp_path):
    a, b = RunStore(tmp_path), RunStore(tmp_path)
    a.extend([dialogue("x")])
    assert b.ids(Dialogue) == {"x"}
    b.extend([dialogue("y", "error")])
    assert a.ids(Dialogue) == {"x", "y"} and a.ids(Dialogue, include_errors=False) == {"x"}
    assert a.errored(Dialogue) == {"y"}
    with pytest.raises(DuplicateRecordError):
        a.extend([dialogue("x")])
    a.append(dialogue("y"))  # an errored record may be replaced
    with pytest.raises(DuplicateRecordError):
        b.extend([dialogue("y")])
    assert [r.status for r in b.read(Dialogue)] == ["terminated", "terminated"]


def test_a_torn_last_line_is_ignored_then_cut(tmp_path):
    store = RunStore(tmp_path)
    store.extend([dialogue("x")])
    with store.path(Dialogue).open("ab") as fh:
        fh.write(b'{"id": "half", "sta')  # a writer killed mid-line
    fresh = RunStore(tmp_path)
    assert fresh.ids(Dialogue) == {"x"}
    fresh.extend([dialogue("z")])
    assert store.ids(Dialogue) == {"x", "z"}
    assert [r.id for r in RunStore(tmp_path).read(Dialogue)] == ["x", "z"]


def test_a_torn_last_line_is_said_once_naming_file_line_and_bytes(tmp_path, caplog):
    store = RunStore(tmp_path)
    store.extend([dialogue("x"), dialogue("y")])
    path = store.path(Dialogue)
    torn = b'{"id": "half", "sta'
    with path.open("ab") as fh:
        fh.write(torn)
    with caplog.at_level(logging.WARNING, logger="personalens_utils.runstore.store"):
        with FileLock(str(path) + ".lock"):  # a write under way in another process: not torn yet
            assert len(RunStore(tmp_path).read(Dialogue)) == 2
        assert not caplog.records
        assert [r.id for r in RunStore(tmp_path).read(Dialogue)] == ["x", "y"]
        assert len(RunStore(tmp_path).records(Dialogue)) == 2
        RunStore(tmp_path).extend([dialogue("z")])
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"{path}: line 3 is torn ({len(torn)} bytes with no line end: a run was stopped while "
                    "writing it); it is skipped, and the next append to this table cuts it off"]

    with path.open("ab") as fh:
        fh.write(torn)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="personalens_utils.runstore.store"):
        RunStore(tmp_path).extend([dialogue("w")])  # cut before this append, never read: said then
    assert [r.getMessage().split(" is torn")[0] for r in caplog.records] == [f"{path}: line 4"]
    assert [r.id for r in RunStore(tmp_path).read(Dialogue)] == ["x", "y", "z", "w"]


def test_a_replaced_file_is_read_again(tmp_path):
    store = RunStore(tmp_path)
    store.extend([dialogue("x"), dialogue("y")])
    store.path(Dialogue).write_text('{"id": "only"}\n')
    assert store.ids(Dialogue) == {"only"}


def test_tables_are_named_by_record_type_only(tmp_path):
    store = RunStore(tmp_path)
    with pytest.raises(TypeError, match="record type"):
        store.ids("dialogues")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="records"):
        store.extend([{"id": "x", "status": "terminated"}])  # type: ignore[list-item]
