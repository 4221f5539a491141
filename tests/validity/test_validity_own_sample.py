"""Notebook 09's own sample (`anchored.synthetic_sample`) run again on the same output folder (issue 39):
the same store gives the same files, a store grown by one assistant gives a sample with its stratum, and
a sheet someone filled or put in the folder is never overwritten and never stops the run: one line names
it and the sample goes to a folder of its own."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from support.records import put
from support.synthetic_store import JUDGE, build_benchmark, build_store, judgment_record

from personalens_utils.labels.sheets import MANIFEST_NAME, SHEET_NAME, read_table, write_table
from personalens_utils.measures import scores
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.validity import anchored

USERS = 6
WHERE = {"assistant_setting": "base"}
NEW = "model-d"


def _sample(store: RunStore, out: Path) -> tuple[list[Path], Path]:
    tidy = scores.load_scores(store, judge_model=JUDGE)
    return anchored.synthetic_sample(store, build_benchmark(USERS), tidy, out, n=12, seed=0, where=WHERE)


def _files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _strata(manifest: Path) -> list[str]:
    return sorted(s["value"] for s in json.loads(manifest.read_text())["design"]["strata"])


def _add_assistant(store: RunStore) -> None:
    """One more assistant's base dialogues, judged: what `make evaluate` adds to a reproduction's store."""
    dialogues, judgments = [], []
    for old in store.records(Dialogue):
        if (old["assistant_model"], old["assistant_setting"], old["status"]) != ("model-a", "base",
                                                                                 "terminated"):
            continue
        new = {**old, "assistant_model": NEW, "id": f"{old['id']}-{NEW}"}
        dialogues.append(new)
        judgments += [judgment_record(new["id"], dim, 3.0 if dim != "task_completion" else 1.0)
                      for dim in anchored.DIMENSIONS]
    put(store, Dialogue, dialogues)
    put(store, Judgment, judgments)


@pytest.fixture
def store(tmp_path) -> RunStore:
    return build_store(tmp_path / "run", users=USERS, second_judge=False)


def test_a_rerun_keeps_its_own_sample_and_a_grown_store_draws_the_new_assistant(store, tmp_path, capsys):
    out = tmp_path / "out" / "anchored_sample"
    sheets, manifest = _sample(store, out)
    first = _files(out)
    assert [p.name for p in sheets] == ["synthetic_annotator_1.csv", "synthetic_annotator_2.csv"]
    assert set(json.loads((out / anchored.KIT_MARKER).read_text())["files"]) == set(first) - {
        anchored.KIT_MARKER}
    assert _sample(store, out) == (sheets, manifest) and _files(out) == first  # the same bytes
    _add_assistant(store)
    sheets, manifest = _sample(store, out)  # ba410d1: the old sample, without model-d
    assert manifest == out / MANIFEST_NAME and _strata(manifest) == [
        "model-a", "model-b", "model-c", NEW]
    rated = pd.concat(pd.read_csv(p, dtype=str) for p in sheets)
    assert rated["dialogue_id"].str.endswith(NEW).any()
    assert rated["annotator"].str.startswith("synthetic-").all()
    assert not list(tmp_path.glob("out/.anchored_sample*")) and capsys.readouterr().out == ""
    result = anchored.human_anchored(scores.load_scores(store, judge_model=JUDGE), sheets, manifest=manifest,
                                     options=anchored.AnchorOptions(n_resamples=50))
    assert NEW in set(result.estimates["assistant"])


def _edit_synthetic(folder: Path) -> Path:
    path = folder / "synthetic_annotator_1.csv"
    header, rows, delimiter = read_table(path)
    write_table(path, header, [dict(r, annotator="alice", notes="") for r in rows], delimiter)
    return path


def _fill_blank(folder: Path) -> Path:
    path = folder / SHEET_NAME
    header, rows, delimiter = read_table(path)
    write_table(path, header, [dict(r, annotator="bob", personalization="3") for r in rows],
                           delimiter)
    return path


def _add_beside(folder: Path) -> Path:
    path = folder / "carol.csv"
    path.write_text("dialogue_id,personalization\n", encoding="utf-8")
    return path


def _unmarked(folder: Path) -> Path:
    """A sample written before 09 marked its files (ba410d1): nothing there is known as the kit's."""
    (folder / anchored.KIT_MARKER).unlink()
    return folder / SHEET_NAME


@pytest.mark.parametrize("touch", [_edit_synthetic, _fill_blank, _add_beside, _unmarked])
def test_a_sheet_someone_filled_is_left_as_it_is_and_named_in_one_line(store, tmp_path, capsys, touch):
    out = tmp_path / "anchored_sample"
    _sample(store, out)
    touched = touch(out)
    kept = _files(out)
    capsys.readouterr()
    _add_assistant(store)
    sheets, manifest = _sample(store, out)  # ba410d1: ValidityError, or the old sample reused
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 1 and said[0].startswith(str(touched)) and "left as it is" in said[0], said
    assert str(tmp_path / "anchored_sample_2") in said[0]
    assert _files(out) == kept  # nothing there overwritten, moved or removed
    assert manifest.parent == tmp_path / "anchored_sample_2" and NEW in _strata(manifest)
    assert sheets == [manifest.parent / f"synthetic_annotator_{k}.csv" for k in (1, 2)]
    assert _sample(store, out) == (sheets, manifest)  # the next rerun: the same two folders, one line again
    assert len(capsys.readouterr().out.splitlines()) == 1 and not (tmp_path / "anchored_sample_3").exists()
