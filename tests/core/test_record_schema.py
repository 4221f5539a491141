"""One schema per record: a field added to a record type's dataclass is stored, read back and copied into
the columnar copy with no other change (no hand-written JSON layout or column type list)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import orjson
import pytest
from support.source_trees import source_tree

import personalens_utils
from personalens_utils.runstore import columnar
from personalens_utils.runstore.identity import Variant
from personalens_utils.runstore.records import Judgment, RecordError
from personalens_utils.runstore.store import RunStore


def _judgment_with_confidence() -> type[Judgment]:
    """A judgment type made here with one more field, on a table of its own."""

    @dataclass(frozen=True, kw_only=True)
    class ConfidentJudgment(Judgment):
        table: ClassVar[str] = "confident_judgments"
        summary_fields: ClassVar[tuple[str, ...]] = (*Judgment.summary_fields, "confidence")
        confidence: float | None = None

    return ConfidentJudgment


@pytest.fixture
def confident(monkeypatch: pytest.MonkeyPatch) -> type[Judgment]:
    kind = _judgment_with_confidence()
    monkeypatch.setitem(columnar.TABLES, kind, columnar.TableSpec(kind))
    return kind


def _made(kind: type[Judgment], confidence: float | None, dialogue: str = "d1") -> Judgment:
    return kind(dialogue_id=dialogue, dimension="personalization", judge_model="judge", variant=Variant("v1"),
                backend="offline", status="ok", score=4.0, turn_scores=(4.0, None), explanation="fine",
                raw="4", attempts=1, confidence=confidence)


def test_a_new_field_is_stored_read_back_and_copied(confident: type[Judgment], tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.extend([_made(confident, 0.75), _made(confident, None, "d2")])
    line = orjson.loads(store.path(confident).read_bytes().splitlines()[0])
    assert list(line)[-1] == "confidence" and line["confidence"] == 0.75
    assert [r.confidence for r in RunStore(tmp_path).read(confident)] == [0.75, None]
    with columnar.Columnar(store, tables=[confident]) as copy:
        frame = copy.sql("SELECT confidence, score, turn_scores FROM confident_judgments ORDER BY confidence")
        described = copy.connection().execute("DESCRIBE confident_judgments").fetchall()
    types = {name: kind for name, kind, *_ in described}
    assert frame["confidence"].tolist()[0] == 0.75 and frame["score"].tolist() == [4.0, 4.0]
    assert types["confidence"] == "DOUBLE"


def test_a_new_field_of_the_wrong_type_is_named(confident: type[Judgment], tmp_path: Path) -> None:
    row = {**_made(confident, 0.5).to_json(), "confidence": "high"}
    with pytest.raises(RecordError, match=r"^x\.jsonl:3: ConfidentJudgment record field 'confidence' must be "
                                          r"a number or null, got 'high'"):
        confident.from_json(row, "x.jsonl:3")


def test_a_summary_field_without_a_column_type_is_named() -> None:
    @dataclass(frozen=True, kw_only=True)
    class NotedJudgment(Judgment):
        table: ClassVar[str] = "noted_judgments"
        summary_fields: ClassVar[tuple[str, ...]] = (*Judgment.summary_fields, "notes")
        notes: dict[str, str]

    with pytest.raises(columnar.ColumnTypeError, match=r"NotedJudgment\.notes is a dict\[str, str\]"):
        columnar.TableSpec(NotedJudgment).schema()


def test_no_module_of_the_package_writes_a_json_layout_by_hand() -> None:
    """Only the records' one mechanism (`runstore/records/base.py`) defines `to_json`/`from_json`; every
    other JSON a module writes goes through msgspec or orjson from its dataclass."""
    root = Path(personalens_utils.__file__).parent
    mechanism = root / "runstore" / "records" / "base.py"
    found = [f"{path.relative_to(root)}:{node.lineno} {node.name}"
             for path in sorted(root.rglob("*.py")) if path != mechanism
             for node in ast.walk(source_tree(path))
             if isinstance(node, ast.FunctionDef) and node.name in ("to_json", "from_json")]
    assert found == []
