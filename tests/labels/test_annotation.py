"""Annotation sheets: export a sample with guidelines, read filled sheets strictly, feed Table 5."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pandas as pd
import pytest
from support.synthetic_store import JUDGE, build_benchmark, build_store

from personalens_utils import analysis
from personalens_utils.labels import AnnotationError
from personalens_utils.labels.reading import read_sheet, read_sheets
from personalens_utils.labels.sampling import draw_sample, sample_dialogues
from personalens_utils.labels.sheets import RATED, SHEET_COLUMNS, export_sheet, read_table, write_table
from personalens_utils.measures import scores
from personalens_utils.prompt_templates import judge as judge_prompts
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("annot")
    store = build_store(root / "run", users=6, second_judge=False)
    paths = export_sheet(store, build_benchmark(6), root / "sheets", n=20, seed=3)
    return store, paths


def _fill(
    paths, name: str, *, seed: int, annotator_column: bool = True, blank_every: int = 0
) -> pd.DataFrame:
    sheet = pd.read_csv(paths["sheet"], dtype=str, keep_default_na=False)
    rng = np.random.default_rng(seed)
    for i in range(len(sheet)):
        sheet.loc[i, "task_completion"] = str(rng.choice(["True", "False", "yes", "0"]))
        sheet.loc[i, "personalization"] = str(rng.integers(1, 5))
        for col in ("naturalness_user", "naturalness_assistant", "coherence_user", "coherence_assistant"):
            sheet.loc[i, col] = str(rng.integers(1, 6))
        if blank_every and i % blank_every == 0:
            sheet.loc[i, "personalization"] = ""
    if annotator_column:
        sheet["annotator"] = name
    return sheet


def _write(sheet: pd.DataFrame, path, **kw) -> str:
    sheet.to_csv(path, index=False, **kw)
    return str(path)


def test_export_writes_sheet_guidelines_and_manifest(exported):
    store, paths = exported
    sheet = pd.read_csv(paths["sheet"], dtype=str, keep_default_na=False)
    assert list(sheet.columns) == list(SHEET_COLUMNS)
    assert len(sheet) == 20 and sheet["dialogue_id"].is_unique
    assert (sheet[list(RATED)] == "").all().all()  # nothing is pre-filled
    assert sheet["conversation"].str.contains("USER").all()
    assert sheet["task_goal"].str.startswith("Finish").all()
    manifest = json.loads(paths["manifest"].read_text())
    assert manifest["dialogue_ids"] == list(sheet["dialogue_id"])
    finished = {d["id"] for d in store.records(Dialogue) if d["status"] != "error"}
    assert set(manifest["dialogue_ids"]) <= finished
    guide = paths["guidelines"].read_text()
    assert judge_prompts.PERSONALIZATION_LEVELS.strip() in guide
    assert "1 - very incoherent" in guide and "VERDICT" in guide
    for column in RATED:
        assert f"## Column `{column}`" in guide
    assert "{" not in guide.replace("{}", "")  # every template field was filled in


def test_sample_is_seeded_and_export_never_overwrites_a_sheet(exported, tmp_path):
    store, paths = exported
    first = [d["id"] for d in sample_dialogues(store, 20, seed=3)]
    assert first == json.loads(paths["manifest"].read_text())["dialogue_ids"]
    assert first != [d["id"] for d in sample_dialogues(store, 20, seed=4)]
    again = export_sheet(store, build_benchmark(6), paths["sheet"].parent, n=20, seed=3)
    assert again == paths
    with pytest.raises(AnnotationError, match="already exists"):
        export_sheet(store, build_benchmark(6), paths["sheet"].parent, n=20, seed=9)
    only_a = sample_dialogues(store, 1000, where={"assistant_model": "model-a"})
    assert only_a and {d["assistant_model"] for d in only_a} == {"model-a"}


def test_filled_sheets_from_three_annotators_are_read(exported, tmp_path):
    _, paths = exported
    for k in range(3):
        _write(_fill(paths, f"ann{k}", seed=k, blank_every=5 if k == 0 else 0), tmp_path / f"ann{k}.csv")
    ratings = read_sheets(str(tmp_path / "*.csv"), manifest=paths["manifest"])
    assert sorted(ratings["annotator"].unique()) == ["ann0", "ann1", "ann2"]
    per = ratings.groupby(["annotator", "dimension"]).size()
    assert per[("ann1", "personalization")] == 20
    assert per[("ann0", "personalization")] == 16  # every fifth left blank: not rated, not guessed
    assert set(ratings.loc[ratings["dimension"] == "task_completion", "score"]) <= {0.0, 1.0}


def test_annotator_name_from_file_and_excel_style_csv(exported, tmp_path):
    _, paths = exported
    sheet = _fill(paths, "", seed=1, annotator_column=False)
    path = _write(sheet, tmp_path / "annotator_bo.csv", sep=";", encoding="utf-8-sig")
    ratings = read_sheet(path)
    assert set(ratings["annotator"]) == {"annotator_bo"}
    assert len(ratings) == 20 * 6


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.drop(columns=["coherence_user"]), "missing column"),
        (
            lambda s: s.assign(personalization=["7"] * len(s)),
            r"row 2, column personalization: '7' is not a whole",
        ),
        (lambda s: s.assign(personalization=["2.5"] * len(s)), "not a whole number from 1 to 4"),
        (lambda s: s.assign(naturalness_user=["good"] * len(s)), "'good' is not a number"),
        (lambda s: s.assign(task_completion=["maybe"] * len(s)), "not a task-completion rating"),
        (lambda s: pd.concat([s, s.iloc[[0]]]), "appears twice"),
        (lambda s: s.assign(dialogue_id=["x", *list(s["dialogue_id"][1:])]), "not in the exported sample"),
        (lambda s: s.assign(**{c: [""] * len(s) for c in RATED}), "no ratings are filled in"),
        (lambda s: s.assign(annotator=["a"] + ["b"] * (len(s) - 1)), "several names"),
    ],
)
def test_bad_sheets_are_refused_with_file_row_and_column(exported, tmp_path, change, message):
    _, paths = exported
    path = _write(change(_fill(paths, "ann", seed=0)), tmp_path / "bad.csv")
    with pytest.raises(AnnotationError, match=message) as info:
        read_sheets([path], manifest=paths["manifest"])
    assert "bad.csv" in str(info.value)


def test_one_annotator_twice_and_no_sheets_are_refused(exported, tmp_path):
    _, paths = exported
    a = _write(_fill(paths, "same", seed=0), tmp_path / "one.csv")
    b = _write(_fill(paths, "same", seed=1), tmp_path / "two.csv")
    with pytest.raises(AnnotationError, match="already rated"):
        read_sheets([a, b])
    with pytest.raises(AnnotationError, match="no filled annotation sheets"):
        read_sheets(str(tmp_path / "nothing-*.csv"))
    with pytest.raises(AnnotationError, match="no such sheet"):
        read_sheets([tmp_path / "absent.csv"])


def test_sheets_feed_table5(exported, tmp_path):
    store, paths = exported
    for k in range(2):
        _write(_fill(paths, f"ann{k}", seed=10 + k), tmp_path / f"ann{k}.csv")
    ratings = read_sheets(str(tmp_path / "ann*.csv"), manifest=paths["manifest"])
    tidy = scores.load_scores(store, judge_model=JUDGE)
    judge = tidy[tidy["dialogue_id"].isin(ratings["dialogue_id"])]
    result = analysis.table5(judge, ratings, judge_model=JUDGE, backend_names={"offline"})
    assert "2 human annotator(s) on 20 dialogues" in result.caption
    assert (result.frame["items"] == 20).all() and (result.frame["raters"] == 2).all()


def test_sheets_written_atomically_follow_the_users_umask_and_keep_their_mode(exported, tmp_path):
    header, rows, _ = read_table(exported[1]["sheet"])
    old = os.umask(0o027)
    try:
        write_table(tmp_path / "new.csv", header, rows)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o640  # not mkstemp's private 0600
    shared = tmp_path / "shared.csv"
    shared.write_text("x\n", encoding="utf-8")
    shared.chmod(0o664)
    write_table(shared, header, rows)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o664 and read_table(shared)[1] == rows


def test_a_stratum_drawn_apart_keeps_its_dialogues_when_another_stratum_joins(exported, tmp_path):
    store, _ = exported
    drawing = {"seed": 5, "where": {"assistant_setting": "base"}, "stratify_by": "assistant_model",
               "apart": True}
    two = RunStore(tmp_path / "two")
    two.extend([d for d in store.read(Dialogue) if d.assistant_model != "model-c"])
    _, before = draw_sample(two, 8, **drawing)
    _, after = draw_sample(store, 12, **drawing)
    drawn = {s.value: s.dialogue_ids for s in after.strata}
    assert [s.value for s in after.strata] == ["model-a", "model-b", "model-c"]
    assert {s.value: s.dialogue_ids for s in before.strata} == {k: drawn[k] for k in ("model-a", "model-b")}
    assert all(len(ids) == 4 for ids in drawn.values())
