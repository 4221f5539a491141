"""Shards: a run split with shard="i/n" covers every dialogue once, merges into the store an unsplit
run makes, and a record two shards hold is refused with the id and both files named."""

from __future__ import annotations

import hashlib
from collections import Counter

import orjson
import pytest
from support.records import dialogue_json
from support.roles import user_of
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import judging
from personalens_utils.judging import JudgingConfig
from personalens_utils.llm.client import LLMClient
from personalens_utils.persona_bench.items import iter_items
from personalens_utils.persona_bench.runner import run_items
from personalens_utils.persona_bench.synthetic import write_synthetic
from personalens_utils.runstore.records import (
    Batch,
    BatchEntry,
    Dialogue,
    Judgment,
    PersonaPrediction,
    ProbeJudgment,
)
from personalens_utils.runstore.shards import Shard, ShardError
from personalens_utils.runstore.store import DuplicateRecordError, RunStore, StoreError, merge_stores
from personalens_utils.simulation import SimulationConfig, plan_dialogues, run_simulation
from personalens_utils.trust.probes import Padding, run_probe

SETTINGS = ["base", "base+I"]
DIMENSIONS = ["task_completion", "personalization", "turn_personalization"]


@pytest.mark.parametrize(("spec", "index", "count"), [("1/4", 1, 4), (" 3 / 3 ", 3, 3), ("1/1", 1, 1)])
def test_shard_specs_parse(spec, index, count):
    assert Shard.parse(spec) == Shard(index, count) and str(Shard.parse(spec)) == f"{index}/{count}"


@pytest.mark.parametrize("spec", ["0/4", "5/4", "1/0", "1-4", "a/b", "", "1/4/2"])
def test_bad_shard_specs_raise(spec):
    with pytest.raises(ShardError, match="shard"):
        Shard.parse(spec)


def test_every_id_belongs_to_exactly_one_shard_by_its_hash():
    ids = [hashlib.sha1(str(i).encode()).hexdigest()[:20] for i in range(3000)]
    shards = [Shard(i, 3) for i in (1, 2, 3)]
    owners = [[s for s in shards if s.owns(rid)] for rid in ids]
    assert all(len(o) == 1 for o in owners)
    sizes = Counter(o[0].index for o in owners)
    assert all(900 < n < 1100 for n in sizes.values())  # a hash split is close to even
    # the assignment is the documented one: first 8 bytes of SHA-256 modulo n (stable across machines)
    rid = ids[0]
    expected = int.from_bytes(hashlib.sha256(rid.encode()).digest()[:8], "big") % 3 + 1
    assert Shard(expected, 3).owns(rid)


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark(n_users=8, seed=4)


def run(bench, run_dir, shard=None):
    with LLMClient("offline", max_concurrency=4, progress=False) as client:
        summary = run_simulation(bench, run_dir, client, SimulationConfig(settings=SETTINGS, shard=shard))
        judging.run_judging(RunStore(run_dir), client, judging.benchmark_contexts(bench),
                            JudgingConfig(dimensions=DIMENSIONS, shard=shard))
    return summary


def records(path):
    return sorted(RunStore(path).records(Dialogue), key=lambda r: r["id"]), sorted(
        RunStore(path).records(Judgment), key=lambda r: r["id"])


def test_shards_split_the_run_and_merge_into_the_unsplit_result(bench, tmp_path):
    total = len(bench.scenarios) * len(SETTINGS)
    parts = [run(bench, tmp_path / f"shard{i}", f"{i}/3") for i in (1, 2, 3)]
    assert sum(p.stored for p in parts) == total and all(p.stored > 0 for p in parts)
    assert [p.shard for p in parts] == ["1/3", "2/3", "3/3"]
    ids = [{r["id"] for r in RunStore(tmp_path / f"shard{i}").records(Dialogue)} for i in (1, 2, 3)]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])

    report = merge_stores([tmp_path / f"shard{i}" for i in (1, 2, 3)], tmp_path / "merged")
    assert set(report["table"]) == {"dialogues", "judgments"}
    assert report["appended"].sum() == report["records"].sum() == total + total * len(DIMENSIONS)

    run(bench, tmp_path / "whole")
    assert records(tmp_path / "merged") == records(tmp_path / "whole")

    again = merge_stores([tmp_path / f"shard{i}" for i in (1, 2, 3)], tmp_path / "merged")
    assert again["appended"].sum() == 0 and again["already_in_target"].sum() == report["records"].sum()
    # the planner agrees: nothing of any shard is left to run in the merged store
    merged = RunStore(tmp_path / "merged")
    config = SimulationConfig(settings=SETTINGS)
    assert plan_dialogues(bench, merged, config, user=user_of(config, "offline")).items == []


def write(path, recs):
    """Dialogues with the given ids and fields, written as lines (as another shard's run would)."""
    path.mkdir(parents=True, exist_ok=True)
    rows = [dialogue_json(r.pop("id"), **r) for r in map(dict, recs)]
    (path / "dialogues.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))


def test_a_record_in_two_shards_is_refused_naming_the_id_and_both_files(tmp_path):
    write(tmp_path / "a", [{"id": "d1", "status": "terminated"}, {"id": "d2", "status": "terminated"}])
    write(tmp_path / "b", [{"id": "d3", "status": "terminated"}, {"id": "d2", "status": "turn_cap"}])
    with pytest.raises(DuplicateRecordError) as err:
        merge_stores([tmp_path / "a", tmp_path / "b"], tmp_path / "merged")
    message = str(err.value)
    assert "'d2'" in message
    assert all(str(tmp_path / name / "dialogues.jsonl") in message for name in ("a", "b"))
    assert not (tmp_path / "merged" / "dialogues.jsonl").exists()  # refused before anything was written


def test_a_record_held_unchanged_by_two_shards_is_merged_once(tmp_path):
    shared = {"id": "d0", "status": "terminated"}  # a record both shards copied from one run store
    write(tmp_path / "a", [shared, {"id": "d1", "status": "terminated"}])
    write(tmp_path / "b", [shared, {"id": "d2", "status": "turn_cap"}])
    merge_stores([tmp_path / "a", tmp_path / "b"], tmp_path / "merged")
    assert sorted(r["id"] for r in RunStore(tmp_path / "merged").records(Dialogue)) == ["d0", "d1", "d2"]


def test_merging_against_a_filled_target(tmp_path):
    done = {"id": "d1", "status": "terminated", "retries": 1}
    write(tmp_path / "a", [done, {"id": "d2", "status": "terminated"}])
    write(tmp_path / "target", [done, {"id": "d2", "status": "error"}])
    report = merge_stores([tmp_path / "a"], tmp_path / "target", kinds=[Dialogue])
    # d1 is there unchanged (skipped); the errored d2 is replaced
    assert report.loc[0, "appended"] == 1 and report.loc[0, "already_in_target"] == 1
    assert {r["id"]: r["status"] for r in RunStore(tmp_path / "target").records(Dialogue)} == {
        "d1": "terminated", "d2": "terminated"}

    write(tmp_path / "c", [{"id": "d1", "status": "terminated", "retries": 2}])
    before = (tmp_path / "target" / "dialogues.jsonl").read_bytes()
    with pytest.raises(DuplicateRecordError, match="'d1'") as err:
        merge_stores([tmp_path / "c"], tmp_path / "target", kinds=[Dialogue])
    assert str(tmp_path / "c" / "dialogues.jsonl") in str(err.value)
    assert str(tmp_path / "target" / "dialogues.jsonl") in str(err.value)
    assert (tmp_path / "target" / "dialogues.jsonl").read_bytes() == before


def test_merge_refuses_bad_sources(tmp_path):
    write(tmp_path / "a", [{"id": "d1", "status": "terminated"}])
    with pytest.raises(StoreError, match="no such run folder"):
        merge_stores([tmp_path / "a", tmp_path / "missing"], tmp_path / "merged")
    with pytest.raises(StoreError, match="source and the target"):
        merge_stores([tmp_path / "a"], tmp_path / "a")
    with pytest.raises(StoreError, match="twice"):
        merge_stores([tmp_path / "a", tmp_path / "a"], tmp_path / "merged")
    (tmp_path / "a" / "dialogues.jsonl").write_bytes(b'{"id": "d1"}\n{"status": "ok"}\n')
    with pytest.raises(StoreError, match=r"dialogues.jsonl:2: record has no 'id'"):
        merge_stores([tmp_path / "a"], tmp_path / "merged")


def test_every_table_of_the_shards_is_merged_and_an_unknown_one_is_refused_by_name(bench, tmp_path):
    whole = RunStore(tmp_path / "whole")
    run(bench, whole.root)
    with LLMClient("offline", max_concurrency=4, progress=False) as client:
        run_probe(whole, client, judging.benchmark_contexts(bench), Padding(),
                  JudgingConfig(dimensions=DIMENSIONS[:1]))
        run_items(client, iter_items(write_synthetic(tmp_path / "data", 4, seed=2)), whole)
    whole.extend([
        Batch(id="b1", backend="offline", submitted_at="2026-01-01", entries={"c1": "k1", "c2": "k2"}),
        BatchEntry(id="c1", key="k1", batch_id="b1", status="errored", backend="offline", error="refused"),
        BatchEntry(id="c2", key="k2", batch_id="b1", status="expired", backend="offline"),
    ])
    tables = {path.stem: path.read_bytes().splitlines(keepends=True) for path in whole.root.glob("*.jsonl")}
    assert {"probe_judgments", "persona_bench", "batches", "batch_results"} <= set(tables)
    for i in (1, 2, 3):  # each line to the shard its id hashes to, as written
        (tmp_path / f"s{i}").mkdir()
        for table, lines in tables.items():
            mine = [line for line in lines if Shard(i, 3).owns(orjson.loads(line)["id"])]
            (tmp_path / f"s{i}" / f"{table}.jsonl").write_bytes(b"".join(mine))

    report = merge_stores([tmp_path / f"s{i}" for i in (1, 2, 3)], tmp_path / "merged")
    counts = report.groupby("table")[["records", "appended"]].sum()
    assert counts.to_dict("index") == {table: {"records": len(lines), "appended": len(lines)}
                                       for table, lines in tables.items()}
    merged = RunStore(tmp_path / "merged")
    for kind in (Dialogue, Judgment, ProbeJudgment, PersonaPrediction, Batch, BatchEntry):
        assert sorted(merged.read(kind), key=lambda r: r.id) == sorted(whole.read(kind), key=lambda r: r.id)

    (tmp_path / "s2" / "rankings.jsonl").write_bytes(b'{"id": "r1", "status": "ok"}\n')
    with pytest.raises(StoreError, match=r"s2/rankings.jsonl: no record type .* named 'rankings'"):
        merge_stores([tmp_path / f"s{i}" for i in (1, 2, 3)], tmp_path / "again")
    assert not (tmp_path / "again").exists()  # refused before anything was written
    only = merge_stores([tmp_path / f"s{i}" for i in (1, 2, 3)], tmp_path / "again", kinds=[Batch])
    assert list(only["table"].unique()) == ["batches"]
