"""The run store's id index, read incrementally: other writers, torn tails and error replacement."""

from __future__ import annotations

import pytest

from personalens_utils.store import DuplicateRecordError, RunStore


def test_two_store_objects_see_each_others_appends(tmp_path):
    a, b = RunStore(tmp_path), RunStore(tmp_path)
    a.append("dialogues", {"id": "x", "status": "terminated"})
    assert b.ids("dialogues") == {"x"}
    b.append("dialogues", {"id": "y", "status": "error"})
    assert a.ids("dialogues") == {"x", "y"} and a.ids("dialogues", include_errors=False) == {"x"}
    with pytest.raises(DuplicateRecordError):
        a.append("dialogues", {"id": "x", "status": "terminated"})
    a.append("dialogues", {"id": "y", "status": "terminated"})  # an errored record may be replaced
    with pytest.raises(DuplicateRecordError):
        b.append("dialogues", {"id": "y", "status": "terminated"})
    assert [r["status"] for r in b.records("dialogues")] == ["terminated", "terminated"]


def test_a_torn_last_line_is_ignored_then_cut(tmp_path):
    store = RunStore(tmp_path)
    store.append("dialogues", {"id": "x", "status": "terminated"})
    with store.path("dialogues").open("ab") as fh:
        fh.write(b'{"id": "half", "sta')  # a writer killed mid-line
    fresh = RunStore(tmp_path)
    assert fresh.ids("dialogues") == {"x"}
    fresh.append("dialogues", {"id": "z", "status": "terminated"})
    assert store.ids("dialogues") == {"x", "z"}
    assert [r["id"] for r in RunStore(tmp_path).records("dialogues")] == ["x", "z"]


def test_a_replaced_file_is_read_again(tmp_path):
    store = RunStore(tmp_path)
    store.extend("dialogues", [{"id": "x"}, {"id": "y"}])
    store.path("dialogues").write_text('{"id": "only"}\n')
    assert store.ids("dialogues") == {"only"}
