"""Someone else's run imported as the untrusted input it is (issue 40, parts 1 and 2).

One honest run (two offline dialogues, judged by one offline judge) is exported once; each test edits a
copy of its dataset folder the way a careless or hostile exporter could, and checks the import refuses
it with one line naming the table, row and problem and writes nothing, or (for what is harmless)
imports the honest run byte for byte.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.export.formats import import_run, to_hf_dataset
from personalens_utils.export.official import KIT_KEY, export_official, import_official, import_official_run
from personalens_utils.export.untrusted import MAX_NAME_LENGTH, DuplicatesCollapsed, ExportError
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm import LLMClient
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.run_card import CARD_FILE, RunCardError
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run store (`store`) and its export (`dataset`), made once: a second of offline work."""
    root = tmp_path_factory.mktemp("honest")
    bench = tiny_benchmark(n_users=1)
    store = RunStore(root / "store")
    with LLMClient("offline", progress=False, use_cache=False) as client:
        run_simulation(bench, store, client, SimulationConfig(limit=2))
        run_judging(store, client, benchmark_contexts(bench), JudgingConfig(judge_model="judge-1"))
    to_hf_dataset(store, root / "dataset", license="mit")
    return root


@pytest.fixture
def dataset(honest: Path, tmp_path: Path) -> Path:
    """A copy of the honest export, for a test to spoil."""
    return Path(shutil.copytree(honest / "dataset", tmp_path / "dataset"))


def edit(folder: Path, table: str, change: Callable[[pd.DataFrame], pd.DataFrame | None]) -> None:
    """Rewrite one table of a dataset folder through pandas, as a hand-edited export would be."""
    path = folder / "data" / f"{table}.parquet"
    frame = pd.read_parquet(path)
    changed = change(frame)
    (frame if changed is None else changed).to_parquet(path, index=False)


def line(record: dict[str, Any]) -> str:
    """A record as the store writes it: compact JSON, keys in order."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def set_record(row: int, change: Callable[[dict[str, Any]], object]) -> Callable[[pd.DataFrame], None]:
    """An `edit` that changes the record in one row (its JSON object, in place)."""
    def apply(frame: pd.DataFrame) -> None:
        record = json.loads(frame["record"].iloc[row])
        change(record)
        frame.loc[frame.index[row], "record"] = line(record)
    return apply


def set_card(folder: Path, text: str) -> None:
    edit(folder, "run_card", lambda frame: pd.DataFrame({"run_card": [text]}))


def card_of(folder: Path) -> dict[str, Any]:
    return json.loads(pd.read_parquet(folder / "data" / "run_card.parquet")["run_card"].iloc[0])


def refused(source: Any, target: Path, match: str) -> str:
    """Import `source` into `target`, expecting one line of `ExportError` matching `match`, and no trace."""
    with pytest.raises(ExportError, match=match) as info:
        import_run(source, target)
    message = str(info.value)
    assert "\n" not in message
    assert not target.exists()
    folder = next(p for p in target.parents if p.exists())
    assert not [p for p in folder.rglob("*") if ".import-" in p.name]
    return message


def same_as_honest(store: RunStore, honest: Path) -> None:
    for kind in (Dialogue, Judgment):
        assert store.path(kind).read_bytes() == (honest / "store" / f"{kind.table}.jsonl").read_bytes()
    assert (store.root / CARD_FILE).read_bytes() == (honest / "store" / CARD_FILE).read_bytes()


def test_a_conflicting_duplicate_is_refused_naming_the_id_and_both_rows(dataset, tmp_path):
    def twice(frame: pd.DataFrame) -> pd.DataFrame:
        record = json.loads(frame["record"].iloc[0])
        other = line({**record, "retries": record["retries"] + 1})
        return pd.concat([frame, frame.iloc[[0]].assign(record=other)], ignore_index=True)

    edit(dataset, "dialogues", twice)
    dialogue_id = json.loads(pd.read_parquet(dataset / "data" / "dialogues.parquet")["record"].iloc[0])["id"]
    message = refused(dataset, tmp_path / "run", f"dialogues id '{dialogue_id}' is held by two different")
    assert "dialogues.parquet row 1 and " in message and "dialogues.parquet row 3" in message


def test_an_exact_duplicate_is_stored_once_and_the_count_said(dataset, tmp_path, honest):
    edit(dataset, "judgments", lambda frame: pd.concat([frame, frame.iloc[[0, 1]]], ignore_index=True))
    with pytest.warns(DuplicatesCollapsed, match="2 exact copies of judgments records"):
        store = import_run(dataset, tmp_path / "run")
    same_as_honest(store, honest)


def test_a_record_over_several_lines_is_refused(dataset, tmp_path):
    def pretty(frame: pd.DataFrame) -> None:
        frame.loc[frame.index[1], "record"] = json.dumps(json.loads(frame["record"].iloc[1]), indent=2)

    edit(dataset, "dialogues", pretty)
    refused(dataset, tmp_path / "run", r"dialogues\.parquet row 2: the record spans several lines")


def test_a_judgment_of_a_dialogue_the_run_does_not_hold_is_refused(dataset, tmp_path):
    dropped = json.loads(pd.read_parquet(dataset / "data" / "dialogues.parquet")["record"].iloc[1])["id"]
    judgments = pd.read_parquet(dataset / "data" / "judgments.parquet")
    orphan = next(json.loads(r)["id"] for r in judgments["record"] if json.loads(r)["dialogue_id"] == dropped)
    edit(dataset, "dialogues", lambda frame: frame.iloc[[0]])
    refused(dataset, tmp_path / "run", f"judgment '{orphan}' is about dialogue '{dropped}', which the "
                                       "imported dialogues do not hold")


@pytest.mark.parametrize(("table", "field", "value", "named"), [
    ("dialogues", "task_id", "SD-Alarm-task-1\x00", "unprintable character '\\\\x00'"),
    ("dialogues", "assistant_model_id", "model\nname", "unprintable character '\\\\n'"),
    ("dialogues", "id", "d\x1b[31m", "unprintable character '\\\\x1b'"),
    ("judgments", "judge_model_id", "x" * (MAX_NAME_LENGTH + 1), f"refused beyond {MAX_NAME_LENGTH}"),
    ("judgments", "dialogue_id", "\u202eevil", "unprintable character '\\\\u202e'"),
])
def test_an_unsafe_id_or_name_is_refused(dataset, tmp_path, table, field, value, named):
    edit(dataset, table, set_record(0, lambda record: record.update({field: value})))
    refused(dataset, tmp_path / "run", rf"{table}\.parquet row 1: {table} field '{field}' .*{named}")


@pytest.mark.parametrize(("field", "value"), [
    ("task_id", "SD-Rental Cars-task-3"), ("task_id", "MD-task-12"),
    ("user_model_id", "anthropic.claude-3-sonnet-20240229-v1:0"),
    ("user_model_id", "meta-llama/Llama-3.1-8B-Instruct@http://localhost:8000/v1"),
])
def test_names_the_kit_makes_itself_import(dataset, tmp_path, field, value):
    edit(dataset, "dialogues", set_record(0, lambda record: record.update({field: value})))
    assert getattr(import_run(dataset, tmp_path / "run").read(Dialogue)[0], field) == value


def test_a_failed_import_leaves_no_trace_and_a_retry_succeeds(dataset, tmp_path, honest):
    edit(dataset, "judgments", set_record(3, lambda record: record.update({"score": "high"})))
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(dataset, tmp_path / "new" / "deeper" / "run", r"judgments\.parquet row 4: .*'score'")
    assert not (tmp_path / "new").exists()
    with pytest.raises(ExportError, match="row 4"):
        import_run(dataset, empty)
    assert list(empty.iterdir()) == []
    same_as_honest(import_run(honest / "dataset", empty), honest)
    same_as_honest(import_run(honest / "dataset", tmp_path / "new" / "deeper" / "run"), honest)


def test_a_failure_while_writing_leaves_no_trace(dataset, tmp_path, monkeypatch):
    def full(self: Path, *args: Any, **kwargs: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)  # the card is written last, after both tables
    with pytest.raises(OSError, match="No space left"):
        import_run(dataset, tmp_path / "run")
    assert list(tmp_path.iterdir()) == [dataset]


def _nested_wrong_type(card: dict[str, Any]) -> None:
    card["judges"][0]["model"] = 123


def _official_prompts(card: dict[str, Any]) -> None:
    card["simulations"][0]["prompt_set"] = "official"


def _another_judge(card: dict[str, Any]) -> None:
    card["judges"][0]["model"] = "judge-9"


def _more_dialogues(card: dict[str, Any]) -> None:
    card["counts"]["dialogues"] = {"terminated": 40}


@pytest.mark.parametrize(("spoil", "named"), [
    ("{not json", r"run_card\.parquet: the run card is not valid JSON"),
    ("[1, 2]", "not a run card"),
    (lambda card: card.update(schema_version=2), "run card schema_version 2; this kit reads version 1"),
    (_nested_wrong_type, r"run card field 'judges\[0\]\.model' is not what the kit writes"),
    (_official_prompts, r"'simulations\[0\]\.prompt_set' claims 'official', but the imported dialogues show "
                        r"\['kit'\]"),
    (_another_judge, r"'judges\[0\]\.model' claims 'judge-9', but the imported judgments of that "
                     r"configuration \(prompt_set 'kit', prompt_version 'v2'\) show \['judge-1'\]"),
    (_more_dialogues, r"'counts\.dialogues' claims \{'terminated': 40\}, more than the imported dialogues "
                      r"hold \(\{'terminated': 2\}\)"),
])
def test_a_run_card_that_is_not_the_kits_or_that_its_records_refute_is_refused(dataset, tmp_path, spoil,
                                                                              named):
    if isinstance(spoil, str):
        set_card(dataset, spoil)
    else:
        card = card_of(dataset)
        spoil(card)
        set_card(dataset, json.dumps(card, indent=2))
    refused(dataset, tmp_path / "run", named)


def test_a_card_written_before_its_runs_last_records_imports(dataset, tmp_path):
    """A run interrupted mid-stage has records its card has not counted yet: honest, so imported as is."""
    card = card_of(dataset)
    card["counts"]["dialogues"] = {"terminated": 1}
    set_card(dataset, json.dumps(card, indent=2))
    store = import_run(dataset, tmp_path / "run")
    assert (store.root / "run_card.json").read_text(encoding="utf-8") == json.dumps(card, indent=2)


def test_a_record_that_is_not_json_is_named(dataset, tmp_path):
    edit(dataset, "dialogues", lambda frame: frame.assign(record=["{oops", *frame["record"].iloc[1:]]))
    refused(dataset, tmp_path / "run", r"dialogues\.parquet row 1: the record is not valid JSON \(")


def test_a_garbage_parquet_file_is_named_in_one_line(dataset, tmp_path):
    (dataset / "data" / "judgments.parquet").write_bytes(b"PAR1 this is not a table")
    refused(dataset, tmp_path / "run", r"judgments\.parquet: not a readable Parquet file \(")


def test_a_stray_file_in_data_is_not_read(dataset, tmp_path, honest):
    (dataset / "data" / "notes.parquet").write_bytes(b"someone's notes, not Parquet")
    same_as_honest(import_run(dataset, tmp_path / "run"), honest)


class _Split:
    """A table of a `datasets.DatasetDict` as the import reads it: its column names, columns by name."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame
        self.column_names = list(frame.columns)

    def __getitem__(self, column: str) -> list[Any]:
        return self.frame[column].tolist()


def test_the_record_column_is_read_by_name(dataset, tmp_path, honest):
    for table in ("dialogues", "judgments"):
        edit(dataset, table, lambda frame: frame[["record", *frame.columns.drop("record")]].assign(
            comment="exported by hand"))
    same_as_honest(import_run(dataset, tmp_path / "run"), honest)
    splits = {name: _Split(pd.read_parquet(dataset / "data" / f"{name}.parquet"))
              for name in ("dialogues", "judgments", "run_card")}
    same_as_honest(import_run(splits, tmp_path / "from_splits"), honest)
    edit(dataset, "judgments", lambda frame: frame.rename(columns={"record": "line"}))
    refused(dataset, tmp_path / "renamed", r"judgments\.parquet: no 'record' column \(it has \[.*'line'")
    splits["dialogues"].column_names.remove("record")
    refused(splits, tmp_path / "renamed", "the DatasetDict's 'dialogues' table has no 'record' column")


def test_an_official_import_whose_card_fails_writes_nothing_and_can_be_retried(honest, tmp_path):
    export_official(honest / "store", tmp_path / "official", allow_unofficial=True)
    target = tmp_path / "run"
    target.mkdir()
    (target / CARD_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(RunCardError, match="not valid JSON"):
        import_official_run(tmp_path / "official", into=target)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".run.import-")] == []
    assert [p.name for p in target.iterdir()] == [CARD_FILE]
    (target / CARD_FILE).unlink()
    imported = import_official_run(tmp_path / "official", into=target)
    assert len(RunStore(target).read(Dialogue)) == len(imported.dialogues) == 2


def test_an_official_file_with_an_unsafe_name_is_refused_before_anything_is_written(honest, tmp_path):
    (first, *_) = export_official(honest / "store", tmp_path / "official", allow_unofficial=True)
    payload = json.loads(first.read_text())
    payload[KIT_KEY]["user_model_id"] = "user\x00model"
    first.write_text(json.dumps(payload))
    with pytest.raises(ExportError, match=rf"{first.name}: dialogues field 'user_model_id' holds the "
                                          "unprintable character"):
        import_official(tmp_path / "official", into=tmp_path / "run")
    assert not (tmp_path / "run").exists()
