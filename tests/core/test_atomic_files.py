"""Files written whole or not at all (`base.files`): every writer of a single file goes through it."""

from __future__ import annotations

import os
import stat

import pytest

from personalens_utils.base.files import atomic_file, atomic_write_bytes, atomic_write_text


def test_a_file_appears_whole_with_an_ordinary_files_permissions(tmp_path):
    target = tmp_path / "new" / "card.json"
    atomic_write_bytes(target, b"{}\n")
    assert target.read_bytes() == b"{}\n"
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask  # not mkstemp's private 0600
    target.chmod(0o640)
    atomic_write_text(target, "ünïcode\r\n")
    assert target.read_bytes() == "ünïcode\r\n".encode()  # UTF-8, newlines as written
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # an existing file keeps its own
    assert [p.name for p in target.parent.iterdir()] == ["card.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "sheet.csv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_file(target) as fh:
        fh.write("half a ")
        raise RuntimeError("the writer stopped")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["sheet.csv"]
