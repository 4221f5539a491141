"""The columnar copy of a run store: the same current records as the JSONL, kept up to date by reading only
what was appended, with the store's rules for torn and corrupt lines, and shards read together."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import duckdb
import pandas as pd
import psutil
import pytest
from support.records import dialogue_json, put, write_lines

from personalens_utils.base.errors import KitError
from personalens_utils.runstore import columnar
from personalens_utils.runstore.columnar import Columnar
from personalens_utils.runstore.records import Dialogue, Judgment, RecordError
from personalens_utils.runstore.store import RunStore, StoreError


def judgment_json(record_id: str, dialogue_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": record_id, "dialogue_id": dialogue_id, "dimension": "personalization",
            "judge_model": "Claude 3.5 Sonnet", "prompt_version": "v2", "backend": "offline",
            "judge_model_id": "claude-3-5-sonnet-20241022", "status": "ok", "score": 4.0, "turn_scores": None,
            "explanation": "fits", "raw": "Personalization Score: 4", "attempts": 1, **fields}


def _store(tmp_path: Path, n: int = 5) -> RunStore:
    store = RunStore(tmp_path / "run")
    put(store, Dialogue, [dialogue_json(f"d{i}", user_id=i, scenario_id=f"user{i}/SD-Alarm-task-1")
                          for i in range(n)])
    put(store, Judgment, [judgment_json(f"j{i}", f"d{i}", score=float(i % 5 + 1),
                                        raw=f"Personalization Score: {i % 5 + 1}") for i in range(n)])
    return store


def test_views_hold_the_current_records_without_texts(tmp_path: Path) -> None:
    store = _store(tmp_path)
    put(store, Dialogue, [dialogue_json("e1", status="error", error="RetriesExhaustedError: x")])
    put(store, Dialogue, [dialogue_json("e1", status="terminated")])  # a rerun replaces the errored record
    with Columnar(store) as cols:
        frame = cols.sql("SELECT id, status, user_id, domains FROM dialogues ORDER BY id")
        assert list(frame["id"]) == sorted(r["id"] for r in store.records(Dialogue))
        assert frame.set_index("id").loc["e1", "status"] == "terminated"
        assert list(frame.set_index("id").loc["d3", "domains"]) == ["Alarm"]
        assert "turns" not in cols.sql("SELECT * FROM dialogues LIMIT 0").columns
        judged = cols.sql("SELECT id, score, official_score FROM judgments ORDER BY id")
        assert list(judged["score"]) == [1.0, 2.0, 3.0, 4.0, 5.0]
        assert list(judged["official_score"]) == list(judged["score"])
        rows = cols.sql("SELECT _source, _offset, _length FROM dialogues WHERE id = 'e1'")
        (full,) = cols.records(Dialogue, rows)
        assert full.turns and full.status == "terminated"


def test_only_appended_bytes_are_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path)
    with Columnar(store) as cols:
        assert cols.sql("SELECT count(*) AS n FROM dialogues")["n"][0] == 5
    parsed: list[int] = []
    original = columnar._rows

    def counting(spec: columnar.TableSpec, source: Path, data: bytes, offset: int, lineno: int) -> Any:
        parsed.append(data.count(b"\n"))
        return original(spec, source, data, offset, lineno)

    monkeypatch.setattr(columnar, "_rows", counting)
    put(store, Dialogue, [dialogue_json("d9", user_id=9)])
    with Columnar(store) as cols:
        assert cols.sql("SELECT count(*) AS n FROM dialogues")["n"][0] == 6
    assert parsed == [1]  # one new dialogue line; the judgments were not parsed at all


def test_a_replaced_table_file_rebuilds_the_copy(tmp_path: Path) -> None:
    store = _store(tmp_path)
    Columnar(store).refresh()
    store.path(Dialogue).unlink()
    put(RunStore(store.root), Dialogue, [dialogue_json("x1"), dialogue_json("x2"), dialogue_json("x3"),
                                         dialogue_json("x4"), dialogue_json("x5"), dialogue_json("x6")])
    with Columnar(store) as cols:
        assert list(cols.sql("SELECT id FROM dialogues ORDER BY id")["id"]) == [f"x{i}" for i in range(1, 7)]


def test_a_torn_tail_is_skipped_and_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = _store(tmp_path)
    with store.path(Dialogue).open("ab") as fh:
        fh.write(b'{"id": "torn", "scen')
    with caplog.at_level(logging.WARNING), Columnar(store) as cols:
        assert "torn" not in set(cols.sql("SELECT id FROM dialogues")["id"])
    assert "line 6 is torn" in caplog.text and "dialogues.jsonl" in caplog.text
    put(store, Dialogue, [dialogue_json("after")])  # the append cuts the torn line off
    with Columnar(store) as cols:
        assert set(cols.sql("SELECT id FROM dialogues")["id"]) == {"d0", "d1", "d2", "d3", "d4", "after"}


def test_a_corrupt_line_names_its_file_and_line(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with store.path(Judgment).open("ab") as fh:
        fh.write(b"{not json\n")
    with pytest.raises(StoreError, match=r"judgments\.jsonl:6: not valid JSON"):
        Columnar(store).refresh()
    store = _store(tmp_path / "b")
    write_lines(store, Judgment, [{**judgment_json("j9", "d1"), "score": "four"}])
    with pytest.raises(RecordError, match=r"judgments\.jsonl:6"):
        Columnar(store).refresh()


def test_shards_are_read_together_and_a_shared_id_is_refused(tmp_path: Path) -> None:
    one, two = RunStore(tmp_path / "shard1"), RunStore(tmp_path / "shard2")
    put(one, Dialogue, [dialogue_json("a"), dialogue_json("b")])
    put(two, Dialogue, [dialogue_json("c")])
    with Columnar([one, str(two.root)]) as cols:
        frame = cols.sql("SELECT id, _source FROM dialogues ORDER BY id")
        assert list(frame["id"]) == ["a", "b", "c"] and list(frame["_source"]) == [0, 0, 1]
        assert [d.id for d in cols.records(Dialogue, cols.sql("SELECT * FROM dialogues ORDER BY id"))] == [
            "a", "b", "c"]
        assert cols.name == "shard1+shard2"
    put(two, Dialogue, [dialogue_json("b")])
    with pytest.raises(StoreError, match=r"'b' is in both .*shard1.*shard2"):
        Columnar([one, two]).refresh()


def test_many_small_refreshes_are_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columnar, "MAX_PARTS", 3)
    store = RunStore(tmp_path / "run")
    for i in range(5):
        put(store, Dialogue, [dialogue_json(f"d{i}")])
        Columnar(store, tables=[Dialogue]).refresh()
    (copy,) = Columnar(store).copies(Dialogue)
    assert len(copy.files()) <= 3
    with Columnar(store) as cols:
        assert list(cols.sql("SELECT id FROM dialogues ORDER BY id")["id"]) == [f"d{i}" for i in range(5)]


def test_the_parquet_files_open_without_the_kit(tmp_path: Path) -> None:
    store = _store(tmp_path)
    Columnar(store).refresh()
    files = sorted(str(p) for p in (store.root / "_columnar" / "judgments").glob("*.parquet"))
    ((count, mean),) = duckdb.sql(f"SELECT count(*), avg(score) FROM read_parquet({files!r})").fetchall()
    assert (count, mean) == (5, 3.0)


def test_reading_while_a_writer_appends(tmp_path: Path) -> None:
    store = _store(tmp_path, n=0)
    done = threading.Event()

    def write() -> None:
        writer = RunStore(store.root)
        for i in range(300):
            put(writer, Dialogue, [dialogue_json(f"w{i:03d}")])
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    while not done.is_set():
        with Columnar(store, tables=[Dialogue]) as cols:
            ids = list(cols.sql("SELECT id FROM dialogues ORDER BY id")["id"])
        assert ids == [f"w{i:03d}" for i in range(len(ids))]  # a prefix of what was written, whole lines
    thread.join()
    with Columnar(store) as cols:
        assert cols.sql("SELECT count(*) AS n FROM dialogues")["n"][0] == 300


def test_a_line_edited_in_place_is_noticed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    Columnar(store).refresh()
    path = store.path(Judgment)
    time.sleep(0.05)  # file times are coarse: an edit a few milliseconds after the copy could share its time
    path.write_bytes(path.read_bytes().replace(b'"score":1.0', b'"score":2.0'))  # the same length
    with Columnar(store) as cols:
        assert list(cols.sql("SELECT score FROM judgments ORDER BY id")["score"]) == [2.0, 2.0, 3.0, 4.0, 5.0]
    time.sleep(0.05)
    path.write_bytes(path.read_bytes().replace(b'"score":2.0', b'"score":3.25', 1))  # longer: lines shift
    put(store, Judgment, [judgment_json("j9", "d1")])
    with Columnar(store) as cols:
        scores = list(cols.sql("SELECT score FROM judgments ORDER BY id")["score"])
    assert scores == [3.25, 2.0, 3.0, 4.0, 5.0, 4.0]


def test_a_large_append_is_parsed_on_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columnar, "CHUNK_BYTES", 4000)
    store = _store(tmp_path, n=40)
    (copy,) = Columnar(store, tables=[Dialogue]).copies(Dialogue)
    copy.refresh()
    assert len(copy.files()) >= columnar.PARALLEL_CHUNKS
    with Columnar(store) as cols:
        ids = list(cols.sql("SELECT id FROM dialogues ORDER BY id")["id"])
    assert ids == sorted(f"d{i}" for i in range(40))
    lines = store.path(Judgment).read_bytes().splitlines(keepends=True)
    lines[33] = b'{"id": "bad", "dialogue_id": 3}\n'
    store.path(Judgment).write_bytes(b"".join(lines))
    with pytest.raises(RecordError, match=r"judgments\.jsonl:34: Judgment record field"):
        Columnar(store).refresh()


def test_an_up_to_date_copy_is_left_byte_for_byte(tmp_path: Path) -> None:
    store = _store(tmp_path)
    Columnar(store).refresh()
    before = {p: p.read_bytes() for p in sorted((store.root / "_columnar").rglob("*")) if p.is_file()}
    time.sleep(0.05)
    with Columnar(store) as cols:
        cols.sql("SELECT count(*) FROM judgments")
    assert {p: p.read_bytes() for p in sorted((store.root / "_columnar").rglob("*")) if p.is_file()} == before


def test_a_script_without_a_main_guard_refreshes_on_workers(tmp_path: Path) -> None:
    """Workers run this module, not the caller's script again (which would wait on the copy's lock)."""
    store = _store(tmp_path, n=40)
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from personalens_utils.runstore import columnar\n"
        "columnar.CHUNK_BYTES = 4000\n"
        f"cols = columnar.Columnar({str(store.root)!r})\n"
        "n = cols.sql('SELECT count(*) AS n FROM dialogues')['n'][0]\n"
        "print(n, len(cols.copies(columnar.Dialogue)[0].files()))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 0, done.stderr
    count, parts = map(int, done.stdout.split())
    assert count == 40 and parts >= columnar.PARALLEL_CHUNKS


def test_queries_draw_no_progress_bar(tmp_path: Path) -> None:
    """DuckDB draws one on standard output for long queries: into notebook outputs and parsed output."""
    with Columnar(_store(tmp_path)) as cols:
        ((shown,),) = cols.connection().execute("SELECT current_setting('enable_progress_bar')").fetchall()
    assert shown is False


def _several_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int = 40) -> RunStore:
    """A store whose judgments copy has several parts, made in this process."""
    monkeypatch.setattr(columnar, "CHUNK_BYTES", 4000)
    monkeypatch.setattr(columnar, "PARALLEL_CHUNKS", 10**6)
    return _store(tmp_path, n=n)


def _tables(store: RunStore) -> dict[str, pd.DataFrame]:
    """Both views in full (their list column as text), and a count and sum over the judgments."""
    with Columnar(store) as cols:
        tables = {view: cols.sql(f"SELECT * EXCLUDE ({listed}), CAST({listed} AS VARCHAR) AS listed "
                                 f"FROM {view} ORDER BY id")
                  for view, listed in (("dialogues", "domains"), ("judgments", "turn_scores"))}
        tables["sums"] = cols.sql("SELECT count(*) AS n, sum(score) AS total FROM judgments")
        return tables


def _damage(part: Path, how: str) -> None:
    data = part.read_bytes()
    if how == "truncated":
        part.write_bytes(data[: len(data) - 100])
    elif how == "altered":  # the same size, bytes flipped in the middle (data pages)
        mid = len(data) // 2
        part.write_bytes(data[:mid] + bytes(b ^ 0x5A for b in data[mid:mid + 16]) + data[mid + 16:])
    else:
        part.unlink()


def _rebuilt_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "copied again" in r.getMessage()]


@pytest.mark.parametrize("how", ["truncated", "altered", "missing"])
def test_a_damaged_part_is_copied_again_from_the_table_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, how: str) -> None:
    store = _several_parts(tmp_path, monkeypatch)
    fresh = _tables(store)
    (copy,) = Columnar(store).copies(Judgment)
    parts = {p: p.read_bytes() for p in copy.files()}
    assert len(parts) >= 3
    damaged = copy.files()[1]
    _damage(damaged, how)
    with caplog.at_level(logging.WARNING):
        again = _tables(store)
    for view, frame in fresh.items():
        pd.testing.assert_frame_equal(again[view], frame)
    (line,) = _rebuilt_lines(caplog)
    assert damaged.name in line and how in line and "judgments.jsonl" in line and "\n" not in line
    assert {p: p.read_bytes() for p in copy.files()} == parts  # the part made again is the one made first
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _tables(store)
    assert not _rebuilt_lines(caplog)  # the repair stays


def test_a_damaged_merged_part_is_copied_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(columnar, "MAX_PARTS", 2)
    store = _several_parts(tmp_path, monkeypatch)
    fresh = _tables(store)
    (copy,) = Columnar(store).copies(Judgment)
    (merged,) = copy.files()
    assert ".m" in merged.name
    _damage(merged, "altered")
    with caplog.at_level(logging.WARNING):
        again = _tables(store)
    for view, frame in fresh.items():
        pd.testing.assert_frame_equal(again[view], frame)
    assert len(_rebuilt_lines(caplog)) == 1


@pytest.mark.parametrize("cause", ["table file", "disk"])
def test_a_part_that_cannot_be_copied_again_is_a_short_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cause: str) -> None:
    store = _several_parts(tmp_path, monkeypatch, n=60)
    _tables(store)
    (copy,) = Columnar(store).copies(Judgment)
    manifest = json.loads(copy.manifest_path.read_bytes())
    name, first = manifest["parts"][1][:2]
    if cause == "table file":  # a line of the part's bytes broken on disk, the file's size and time kept
        path, stat = store.path(Judgment), store.path(Judgment).stat()
        data = bytearray(path.read_bytes())
        data[first] = ord("[")
        path.write_bytes(bytes(data))
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    else:
        def full(*args: Any) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(columnar, "_write_parquet", full)
    _damage(copy.folder / name, "truncated")
    kept = {p.name: p.read_bytes() for p in copy.files() if p.name != name}
    with pytest.raises(columnar.DamagedCopyError) as raised:
        _tables(store)
    message = str(raised.value)
    assert name in message and "truncated" in message and "could not be copied again" in message
    assert ("judgments.jsonl:" in message) if cause == "table file" else ("No space left" in message)
    assert isinstance(raised.value, KitError) and len(message) < 600
    assert {p.name: p.read_bytes() for p in copy.files() if p.name != name} == kept
    assert json.loads(copy.manifest_path.read_bytes()) == manifest


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_workers_die_with_a_killed_refresh(tmp_path: Path) -> None:
    """A refresh SIGKILLed while its workers copy leaves no worker running and no part written after."""
    store = _store(tmp_path, n=400)
    script = tmp_path / "refresh.py"
    script.write_text("from personalens_utils.runstore import columnar\n"
                      "columnar.CHUNK_BYTES = 1500\n"
                      f"columnar.Columnar({str(store.root)!r}).refresh()\n")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    folder, workers = store.root / "_columnar", []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                workers = [child for child in psutil.Process(proc.pid).children()
                           if "personalens_utils.runstore.columnar" in child.cmdline()]
            if len(workers) > 1 and len(list(folder.rglob("*.parquet"))) > 2:
                break
            time.sleep(0.05)
        assert len(workers) > 1 and proc.poll() is None, "the refresh ended before its workers could be seen"
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while not all(_gone(worker) for worker in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(worker) for worker in workers)
    written = {p: p.stat().st_size for p in folder.rglob("*") if p.is_file()}
    time.sleep(2)
    assert {p: p.stat().st_size for p in folder.rglob("*") if p.is_file()} == written
    with Columnar(store) as cols:  # the next read finishes the copy
        assert cols.sql("SELECT count(*) AS n FROM dialogues")["n"][0] == 400


def _columns(part: Path) -> list[str]:
    with duckdb.connect() as con:
        described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(part)]).fetchall()
    return [row[0] for row in described]


def test_parts_made_on_workers_hold_every_column_of_the_schema(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers are fresh interpreters that import only this module: their parts once lacked the
    `official_score` column that judging registered in the parent, and every query of it failed."""
    monkeypatch.setattr(columnar, "CHUNK_BYTES", 4000)
    store = _store(tmp_path, n=60)
    with Columnar(store) as cols:
        judged = cols.sql("SELECT score, official_score FROM judgments ORDER BY id")
        (copy,) = cols.copies(Judgment)
    assert len(copy.files()) >= columnar.PARALLEL_CHUNKS
    assert {tuple(_columns(part)) for part in copy.files()} == {tuple(columnar.TABLES[Judgment].schema())}
    assert judged["official_score"].tolist() == judged["score"].tolist()


def test_a_copy_with_a_part_of_other_columns_is_made_again_with_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A copy left by a kit whose parts disagreed on the columns (same stamp, whole checksums) heals."""
    store = _store(tmp_path)
    (copy,) = Columnar(store).copies(Judgment)
    copy.refresh()
    (part,) = copy.files()
    narrow = part.with_suffix(".narrow")
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT * EXCLUDE (official_score) FROM read_parquet('{part}')) TO '{narrow}' "
                    "(FORMAT parquet)")
    os.replace(narrow, part)
    manifest = json.loads(copy.manifest_path.read_bytes())
    manifest["parts"][0][3:] = [part.stat().st_size, columnar.checksum(part)]
    del manifest["columns_seen"]  # a copy made before the manifest said its parts' columns were seen
    copy.manifest_path.write_text(json.dumps(manifest))
    with caplog.at_level(logging.WARNING, logger=columnar.__name__), Columnar(store) as cols:
        judged = cols.sql("SELECT official_score FROM judgments ORDER BY id")
    assert judged["official_score"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    (said,) = [r.getMessage() for r in caplog.records]
    assert f"{copy.folder}: the columnar copy has a part" in said and "['official_score']" in said
    assert "copying it again from" in said
    assert _columns(copy.files()[0]) == list(columnar.TABLES[Judgment].schema())


def test_a_copy_whose_parts_were_seen_whole_is_not_opened_again_to_read_their_columns(tmp_path: Path) -> None:
    """The columns of an old copy's parts are read once; the manifest then says so, and a copy this code
    made says so from the start, so a refresh that finds nothing new opens no part."""
    store = _store(tmp_path)
    (copy,) = Columnar(store).copies(Judgment)
    copy.refresh()
    stamp = columnar.TABLES[Judgment].stamp()
    assert json.loads(copy.manifest_path.read_bytes())["columns_seen"] == stamp
    manifest = json.loads(copy.manifest_path.read_bytes())
    del manifest["columns_seen"]
    copy.manifest_path.write_text(json.dumps(manifest))
    copy.refresh()  # an old copy: its parts are read, found whole, and the manifest says so
    assert json.loads(copy.manifest_path.read_bytes())["columns_seen"] == stamp
    with patch.object(columnar, "_connect", side_effect=AssertionError("a part was opened")):
        copy.refresh()


def test_readers_of_two_stores_open_at_once_each_see_their_own_records(tmp_path: Path) -> None:
    """Readers share the process's DuckDB database: each one's views are its own all the same."""
    one, two = _store(tmp_path / "one"), _store(tmp_path / "two", n=3)
    with Columnar(one) as first, Columnar(two) as second:
        assert first.sql("SELECT count(*) AS n FROM judgments")["n"][0] == 5
        assert second.sql("SELECT count(*) AS n FROM judgments")["n"][0] == 3
        assert first.sql("SELECT count(*) AS n FROM judgments")["n"][0] == 5


def test_a_copy_made_under_another_stamp_is_made_again_with_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = _store(tmp_path)
    (copy,) = Columnar(store).copies(Judgment)
    copy.refresh()
    manifest = json.loads(copy.manifest_path.read_bytes())
    copy.manifest_path.write_text(json.dumps({**manifest, "stamp": "made-by-another-kit"}))
    with caplog.at_level(logging.WARNING, logger=columnar.__name__), Columnar(store) as cols:
        assert cols.sql("SELECT count(*) AS n FROM judgments")["n"][0] == 5
    (said,) = [r.getMessage() for r in caplog.records]
    assert "was made under another schema" in said
    assert json.loads(copy.manifest_path.read_bytes())["stamp"] == columnar.TABLES[Judgment].stamp()
