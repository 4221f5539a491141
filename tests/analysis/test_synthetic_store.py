"""The synthetic run store the analysis tests read (`support.synthetic_store`) holds what it promises."""

from __future__ import annotations

from support.synthetic_store import build_benchmark, build_store

from personalens_utils.runstore.records import Dialogue, Judgment


def test_synthetic_store_is_well_formed(tmp_path):
    store = build_store(tmp_path)
    dialogues = store.records(Dialogue)
    assert len(dialogues) == 8 * 24 * 12  # 8 model x setting runs, 24 users, 12 tasks
    assert sum(d["status"] == "error" for d in dialogues) == 1
    ids = {d["id"] for d in dialogues}
    assert all(j["dialogue_id"] in ids for j in store.records(Judgment))
    bench = build_benchmark()
    assert {d["scenario_id"] for d in dialogues} == set(bench.scenarios["scenario_id"])
