"""A wrong-typed field in a run store (issue 21, item 2): every reader validates records on load and
names the file, the line and the field, instead of failing later somewhere else."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import judging
from personalens_utils.analysis.dialogue_stats import dialogues_frame
from personalens_utils.explore.catalog import Catalog
from personalens_utils.labels.sampling import sample_dialogues
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures.scores import load_dialogues, load_scores
from personalens_utils.runstore.records import Dialogue, Judgment, RecordError
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import run_simulation

READERS: dict[str, Callable[[RunStore], Any]] = {
    "store.records": lambda s: s.records(Dialogue),
    "store.frame": lambda s: s.frame(Dialogue),
    "store.read": lambda s: s.read(Dialogue),
    "load_dialogues": load_dialogues,
    "load_scores": lambda s: load_scores(s, judge_model="Claude 3.5 Sonnet"),
    "dialogues_frame (Table 13)": dialogues_frame,
    "explorer catalog": Catalog,
    "annotation sample": lambda s: sample_dialogues(s, n=3, seed=0),
}


@pytest.fixture(scope="module")
def banana(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunStore, int]:
    """A judged run whose third dialogue line says "user_id": "banana"; the line's number."""
    root = tmp_path_factory.mktemp("banana")
    bench = tiny_benchmark(n_users=2)
    store = RunStore(root)
    with LLMClient("offline", progress=False) as client:
        run_simulation(bench, store, client)
        judging.run_judging(store, client, judging.benchmark_contexts(bench),
                            judging.JudgingConfig(judge_model="Claude 3.5 Sonnet"))
    path = store.path(Dialogue)
    lines = path.read_bytes().splitlines(keepends=True)
    record = orjson.loads(lines[2])
    lines[2] = orjson.dumps({**record, "user_id": "banana"}) + b"\n"
    path.write_bytes(b"".join(lines))
    return RunStore(root), 3


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_names_the_file_line_and_field_of_a_wrong_typed_record(banana, reader: str) -> None:
    store, line = banana
    with pytest.raises(RecordError) as refused:
        READERS[reader](store)
    assert str(refused.value).startswith(f"{store.path(Dialogue)}:{line}: Dialogue record field 'user_id' ")
    assert re.search(r"banana|str", str(refused.value))


def test_a_wrong_typed_judgment_is_named_too(banana, tmp_path: Path) -> None:
    store, _ = banana
    path = tmp_path / "judgments.jsonl"
    lines = store.path(Judgment).read_bytes().splitlines(keepends=True)
    record = orjson.loads(lines[0])
    path.write_bytes(orjson.dumps({**record, "score": "high"}) + b"\n" + b"".join(lines[1:]))
    with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}:1: Judgment record field 'score' "):
        RunStore(tmp_path).frame(Judgment)
