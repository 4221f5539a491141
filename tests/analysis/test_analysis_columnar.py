"""Analysis out of core (issue 24): the loaders and Table 13 read the columnar copy of the run store, and
give the frames and CSV tables the line-by-line reading gave (`support.legacy_analysis`), on offline
runs made here with repeats, an errored dialogue, a missing judgment, a torn tail and two shards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import orjson
import pandas as pd
import pytest
from support import legacy_analysis as legacy
from support.records import write_lines
from support.synthetic_store import JUDGE as SYNTHETIC_JUDGE
from support.synthetic_store import build_store
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import analysis, judging
from personalens_utils.analysis import dialogue_stats, tables
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures import scores, stats
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.plots import FigureResult
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore, StoreError, merge_stores
from personalens_utils.simulation import SimulationConfig, run_simulation
from personalens_utils.trust import audit

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

JUDGE = "Claude 3.5 Sonnet"
USER = "Claude 3 Sonnet"
SHARDS = 2


def _lines(store: RunStore, kind: type) -> list[dict]:
    return [orjson.loads(line) for line in store.path(kind).read_bytes().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[RunStore]:
    """Two shards' run folders of an offline run (2 simulations x 2 judgments of each scenario), the
    first with an errored dialogue, a judgment answered again as missing, and a torn last line."""
    root = tmp_path_factory.mktemp("shards")
    bench = tiny_benchmark(n_users=3)
    stores = []
    with LLMClient("offline", progress=False) as client:
        for index in range(1, SHARDS + 1):
            store = RunStore(root / f"shard{index}")
            shard = f"{index}/{SHARDS}"
            run_simulation(bench, store, client, SimulationConfig(repeats=2, shard=shard))
            judging.run_judging(store, client, judging.benchmark_contexts(bench),
                                judging.JudgingConfig(judge_model=JUDGE, judge_samples=2, shard=shard))
            stores.append(store)
    first = stores[0]
    dialogue = _lines(first, Dialogue)[0]
    write_lines(first, Dialogue, [{**dialogue, "id": "errored-dialogue", "status": "error",
                                   "error": "RetriesExhaustedError: made by the test", "turns": [],
                                   "n_turns": 0}])
    judgment = next(j for j in _lines(first, Judgment) if j["status"] == "ok")
    write_lines(first, Judgment, [{**judgment, "status": "missing", "score": None, "turn_scores": None}])
    with first.path(Judgment).open("ab") as fh:
        fh.write(orjson.dumps(judgment)[:40])  # a judging process died mid-write
    return stores


@pytest.fixture(scope="module")
def merged(shards: list[RunStore], tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    target = tmp_path_factory.mktemp("merged")
    merge_stores(shards, target)
    return RunStore(target)


LOADERS: dict[str, tuple[Callable, Callable]] = {
    "load_dialogues": (legacy.load_dialogues, scores.load_dialogues),
    "load_judgments strict": (legacy.load_judgments, scores.load_judgments),
    "load_judgments official": (lambda s: legacy.load_judgments(s, "official"),
                                lambda s: scores.load_judgments(s, "official")),
    "load_scores": (lambda s: legacy.load_scores(s, judge_model=JUDGE, user_model=USER),
                    lambda s: scores.load_scores(s, judge_model=JUDGE, user_model=USER)),
    "load_scores official kit prompts": (
        lambda s: legacy.load_scores(s, judge_model=JUDGE, judge_prompt_set="kit", scoring="official"),
        lambda s: scores.load_scores(s, judge_model=JUDGE, judge_prompt_set="kit", scoring="official")),
}


def same_values(after: pd.DataFrame, before: pd.DataFrame) -> None:
    """The frames hold the same values; the columns of a few repeated texts are categoricals now, and the
    tidy frame (the one with dialogue columns next to judgment ones) no longer carries judgment ids."""
    if "judgment_id" in before.columns and "scenario_id" in before.columns:
        assert "judgment_id" not in after.columns
        before = before.drop(columns="judgment_id")
    few = [c for c in (*scores.DIALOGUE_FEW, *scores.JUDGMENT_FEW, "scoring") if c in after.columns]
    assert few and all(isinstance(after[c].dtype, pd.CategoricalDtype) for c in few)
    assert all(list(after[c].cat.categories) == sorted(after[c].cat.categories) for c in few)
    texts = after.astype({c: before[c].dtype for c in few})
    pd.testing.assert_frame_equal(texts, before)


@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_store_reads_as_the_line_by_line_reading_read_it(shards, loader: str) -> None:
    old, new = LOADERS[loader]
    store = shards[0]
    before, after = old(store), new(store)
    same_values(after, before)
    assert after.attrs == before.attrs
    if "dialogue_status" in after.columns and loader == "load_dialogues":
        assert "error" in set(after["dialogue_status"])
    if "judgment_status" in after.columns:
        assert "missing" in set(after["judgment_status"])
    if "sample" in after.columns:
        assert set(after["sample"]) == {0, 1}


@pytest.mark.parametrize("loader", list(LOADERS))
def test_shards_read_together_as_their_merged_store(shards, merged, loader: str) -> None:
    old, new = LOADERS[loader]
    before, after = old(merged), new(shards)
    same_values(after, before)
    if "origin" in after.attrs:
        assert after.attrs["origin"] == "run store shard1+shard2/"


def test_the_scores_of_some_dialogues_are_those_rows_of_the_whole_frame(merged) -> None:
    whole = scores.load_scores(merged, judge_model="Claude 3.5 Sonnet")
    some = sorted(set(whole["dialogue_id"]))[::3]
    part = scores.load_scores(merged, judge_model="Claude 3.5 Sonnet", dialogue_ids=set(some))
    expected = whole[whole["dialogue_id"].isin(some)].reset_index(drop=True)
    pd.testing.assert_frame_equal(part.reset_index(drop=True), expected, check_categorical=False)
    assert set(part["dialogue_id"]) == set(some)


def test_a_record_in_two_shards_is_refused(shards, tmp_path: Path) -> None:
    copy = RunStore(tmp_path / "copy")
    write_lines(copy, Dialogue, _lines(shards[1], Dialogue)[:1])
    with pytest.raises(StoreError, match="is in both"):
        scores.load_dialogues([shards[1], copy])


@pytest.mark.parametrize("choice", [{"user_model": "nobody"}, {"judge_model": "Claude 3.7 Sonnet"},
                                    {"judge_backend": "anthropic"}, {"judge_prompt_version": "v9"},
                                    {"judge_prompt_set": "official"}])
def test_a_choice_the_store_does_not_hold_is_refused_as_before(shards, choice: dict) -> None:
    with pytest.raises(scores.ScoresError) as old:
        legacy.load_scores(shards[1], **choice)
    with pytest.raises(scores.ScoresError) as new:
        scores.load_scores(shards[1], **choice)
    assert str(new.value) == str(old.value)


def test_a_line_that_is_not_json_is_named_by_file_and_line(shards, tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    lines = shards[1].path(Judgment).read_bytes().splitlines(keepends=True)
    write_lines(store, Dialogue, _lines(shards[1], Dialogue))
    store.path(Judgment).write_bytes(b"".join([*lines[:2], b"{not json\n", *lines[2:]]))
    with pytest.raises(StoreError, match=rf"^{store.path(Judgment)}:3: not valid JSON"):
        scores.load_scores(store)


def _csv_bytes(results: dict[str, object], out: Path) -> dict[str, bytes]:
    written = {}
    for name, result in results.items():
        kind = "figure" if isinstance(result, FigureResult) else "table"
        paths = result.save(out, OutputId(kind, name, "t"))  # type: ignore[attr-defined]
        if getattr(result, "data", None) is not None:
            paths = {**paths, "data": result.save_data(out, OutputId(kind, name, "data"))["csv"]}  # type: ignore[attr-defined]
        written.update({f"{name} {kind}": Path(path).read_bytes() for kind, path in paths.items()
                        if kind in ("csv", "data")})
    return written


def _notebook_tables(store: RunStore | list[RunStore], judge: str, assistant: str, user: str | None,
                     load: Callable, frames: Callable) -> dict[str, object]:
    """Notebook 06's tables (and 07's Table T3) the way the notebooks call them."""
    tidy = load(store, judge_model=judge, user_model=user)
    models = sorted(tidy.loc[tidy["assistant_setting"] == "base", "assistant_model"].unique())
    dialogues = frames(store)
    if user is not None:
        dialogues = dialogues[dialogues["user_model"] == user]
    ids = sorted(tidy["dialogue_id"].unique())
    flags = pd.DataFrame({"dialogue_id": ids, "any_flag": [k % 3 == 0 for k in range(len(ids))]})
    return {
        "3": analysis.table3(tidy, setting="base", models=models),
        "12": analysis.table12(tidy[tidy["assistant_model"].isin(models)], setting="base"),
        "13": dialogue_stats.table13(dialogues, assistant_model=assistant, assistant_setting="base"),
        "4": analysis.table4(tidy, assistant_model=assistant),
        "J2": analysis.judge_scores(tidy),
        "T3": audit.table3_without_flagged(tidy, flags, setting="base"),
    }


@pytest.fixture(scope="module")
def settings_store(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    """Three assistants under `base` and model-a under every setting (Table 4), with a second judge."""
    return build_store(tmp_path_factory.mktemp("settings"))


@pytest.mark.parametrize("which", ["settings", "offline shards"])
def test_notebook_tables_write_the_same_csv_bytes_as_before(settings_store, shards, merged, which: str,
                                                           tmp_path: Path, monkeypatch) -> None:
    if which == "settings":
        old_store = new_store = settings_store
        args: tuple = (SYNTHETIC_JUDGE, "model-a", None)
    else:
        old_store, new_store = merged, shards
        assistant = scores.load_dialogues(merged)["assistant_model"].iloc[0]
        args = (JUDGE, assistant, USER)
    new = _csv_bytes(_notebook_tables(new_store, *args, scores.load_scores, dialogue_stats.dialogues_frame),
                     tmp_path / "new")
    monkeypatch.setattr(tables, "run_label", legacy.run_label)
    old = _csv_bytes(_notebook_tables(old_store, *args, legacy.load_scores, legacy.dialogues_frame),
                     tmp_path / "old")
    assert sorted(new) == sorted(old) and len(new) == 10
    for name in old:
        assert new[name] == old[name], name


def test_table13_reads_token_counts_without_the_texts(shards) -> None:
    frame = dialogue_stats.dialogues_frame(shards)
    assert "turns" not in frame.columns and "usage" not in frame.columns
    assert set(dialogue_stats.TOKEN_COLUMNS) <= set(frame.columns)
    records = legacy.dialogues_frame(shards[0])
    by_id = frame.set_index("id")
    for rec in records.itertuples(index=False):
        assert by_id.loc[rec.id, "output_tokens"] == rec.usage["output_tokens"]
        assert by_id.loc[rec.id, "estimated_tokens"] == sum(
            dialogue_stats.count_tokens(t["content"]) for t in rec.turns)


def test_run_label_names_each_run_as_the_row_by_row_labels_did(settings_store) -> None:
    tidy = scores.load_scores(settings_store, judge_model=SYNTHETIC_JUDGE)
    other = tidy[tidy["assistant_model"] == "model-b"].assign(assistant_backend="anthropic",
                                                               assistant_model_id="model-b-2")
    both = pd.concat([tidy, other], ignore_index=True)
    pd.testing.assert_series_equal(scores.run_label(both, "assistant_model"),
                                   legacy.run_label(both, "assistant_model"))
    assert scores.run_label(both, "assistant_model").str.contains("anthropic:model-b-2").any()


def test_the_user_agent_audit_reads_the_dialogues_in_batches_as_it_read_them_all(shards, monkeypatch) -> None:
    bench = tiny_benchmark(n_users=3)
    monkeypatch.setattr(audit, "AUDIT_BATCH", 5)
    batched = audit.audit_dialogues(shards[0], bench)
    assert len(batched) > 5 and "errored-dialogue" not in set(batched["dialogue_id"])
    monkeypatch.setattr(audit, "_finished", legacy.finished_dialogues)
    pd.testing.assert_frame_equal(batched, audit.audit_dialogues(shards[0], bench))


def test_row_bootstrap_draws_the_same_means_in_smaller_chunks(monkeypatch) -> None:
    values = np.sort(np.random.default_rng(5).integers(1, 6, size=3000).astype(float))
    whole = stats.bootstrap_ci(values, n_resamples=600, seed=4)
    monkeypatch.setattr(stats, "MAX_DRAWS", 7 * len(values))  # 7 resamples at a time, not 256
    assert stats.bootstrap_ci(values, n_resamples=600, seed=4) == whole
