"""Table 13: dialogue statistics computed from the run store."""

from __future__ import annotations

import pytest
from support.records import put

from personalens_utils.analysis.dialogue_stats import dialogue_stats, table13
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.outputs.tables import read_table, save_table
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore


def record(rid: str, task_type: str, n_turns: int, output_tokens: int, *, status: str = "terminated",
           setting: str = "base", backend: str = "offline", words: int = 3) -> dict:
    turns = []
    for _ in range(n_turns):
        turns += [{"role": "user", "content": " ".join(["word"] * words)},
                  {"role": "assistant", "content": " ".join(["word"] * words)}]
    return {"id": rid, "scenario_id": f"user1/{rid}", "user_id": 1, "task_id": rid, "task_type": task_type,
            "domains": ["Alarm"], "user_model": "u", "assistant_model": "a", "assistant_setting": setting,
            "prompt_version": "v1", "backend": backend, "user_backend": backend, "user_model_id": "u",
            "assistant_backend": backend, "assistant_model_id": "a", "status": status, "error": None,
            "turns": turns,
            "n_turns": n_turns, "usage": {"input_tokens": 5, "output_tokens": output_tokens,
                                          "cache_read_tokens": 0, "cache_write_tokens": 0},
            "cost_usd": 0.0, "retries": 0}


@pytest.fixture
def store(tmp_path):
    run = RunStore(tmp_path / "run")
    put(run, Dialogue, [
        record("SD-1", "SD", 4, 400), record("SD-2", "SD", 2, 100),
        record("SD-3", "SD", 9, 999, status="error"),
        record("MD-1", "MD", 5, 1000), record("MD-2", "MD", 7, 200), record("MD-3", "MD", 6, 300),
        record("SD-4", "SD", 3, 30, setting="base+I"),
    ])
    return run


def test_table13_counts_turns_and_tokens_per_turn(store, tmp_path):
    result = table13(store, assistant_setting="base")
    table, caption = result.frame, result.caption
    rows = table.set_index("Task type")
    assert rows.loc["SD", "# Dialogues"] == 2 and rows.loc["MD", "# Dialogues"] == 3
    assert rows.loc["SD", "Avg. turns per dialogue"] == pytest.approx(3.0)
    assert rows.loc["SD", "Avg. tokens per turn"] == pytest.approx(500 / 6)
    assert rows.loc["MD", "Avg. turns per dialogue"] == pytest.approx(6.0)
    assert rows.loc["MD", "Avg. tokens per turn"] == pytest.approx(1500 / 18)
    assert OFFLINE_LABEL in caption and "booked output tokens" in caption
    assert result.source.n == 5 and result.source.unit == "finished dialogues"
    assert result.source.backends == ("offline",) and result.source.origin == f"run store {store.root.name}/"
    paths = save_table(table, tmp_path / "out", 13, "dialogue_stats", caption)
    assert read_table(paths["csv"])["# Dialogues"].tolist() == [2, 3]


def test_several_settings_must_be_chosen(store):
    with pytest.raises(ValueError, match="assistant_setting"):
        table13(store)
    stats, _ = dialogue_stats(store)
    assert len(stats) == 3  # (base, SD), (base, MD), (base+I, SD)


def test_records_without_usage_are_counted_from_their_text(tmp_path):
    run = RunStore(tmp_path)
    put(run, Dialogue, [record("SD-1", "SD", 2, 0, backend="imported", words=6)])
    result = table13(run)
    table, caption = result.frame, result.caption
    assert "estimated tokens" in caption and OFFLINE_LABEL not in caption
    # 6 words -> 8 tokens per message, two messages per turn
    assert table.set_index("Task type").loc["SD", "Avg. tokens per turn"] == pytest.approx(16.0)
    assert table.set_index("Task type").loc["MD", "# Dialogues"] == 0


def test_no_finished_dialogue_is_an_error(tmp_path):
    run = RunStore(tmp_path)
    put(run, Dialogue, [record("SD-1", "SD", 2, 10, status="error")])
    with pytest.raises(ValueError, match="no finished dialogues"):
        table13(run)
