"""The explorer's catalog answers by queries on the store's columnar copy: pages and counts that agree with
reading every record, the dialogue viewed read in full, shards read together, a torn tail skipped."""

from __future__ import annotations

import logging
import random

import orjson
import pytest
from support.explorer_store import DIALOGUES, build, judgment
from support.records import dialogue_json, put, write_lines

from personalens_utils.explore import Catalog, Filters, explore, side_by_side
from personalens_utils.explore import widgets as widgets_module
from personalens_utils.judging import ALL_DIMENSIONS
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore, StoreError


@pytest.fixture
def store(tmp_path):
    return build(tmp_path / "run")


def _ids(page) -> list[str]:
    return [d.id for d in page.dialogues]


def test_the_catalog_pages_counts_and_places_dialogues_by_query(store):
    catalog = Catalog(store)
    assert catalog.total == 4
    first = catalog.select(Filters(), offset=0, limit=3)
    assert _ids(first) == ["d-base", "d-plus-i", "d-music"] and first.total == 4 and first.offset == 0
    assert _ids(catalog.select(Filters(), offset=3, limit=3)) == ["d-md"]
    assert catalog.select(Filters(), offset=8, limit=3).dialogues == () and catalog.count() == 4
    movies = Filters(domain="Movies")
    assert _ids(catalog.select(movies)) == ["d-base", "d-plus-i", "d-md"] and catalog.count(movies) == 3
    assert catalog.position("d-md", movies) == 2 and catalog.position("d-music", movies) is None
    assert catalog.values("assistant_model") == ["model-a", "model-b"]
    assert catalog.values("setting") == ["base", "base+I"] and catalog.values("user") == [1, 2, 3]
    assert catalog.values("domain") == ["Events", "Movies", "Music"]
    assert catalog.values("task_type") == ["MD", "SD"]
    assert catalog.values("judge_model") == ["judge-1"]
    assert catalog.values("dimension") == [d for d in ALL_DIMENSIONS if d in {
        "personalization", "task_completion", "turn_personalization", "naturalness_assistant"}]
    with pytest.raises(ValueError, match="no explorer filter 'colour'"):
        catalog.values("colour")
    # the search reads the line the list shows: the query's line and `label` are one line
    full = {d.id: d for d in store.read(Dialogue)}
    for summary in catalog.select().dialogues:
        assert Catalog.label(summary) == Catalog.label(full[summary.id])
        assert _ids(catalog.select(Filters(search=Catalog.label(summary).upper()))) == [summary.id]
        assert summary.domains == full[summary.id].domains
    assert _ids(catalog.select(Filters(search="model-a 2 turns"))) == ["d-base"]


def test_view_reads_the_dialogue_and_its_current_judgments_in_full(store):
    catalog = Catalog(store)
    view = catalog.view("d-base")
    stored = next(d for d in store.read(Dialogue) if d.id == "d-base")
    assert view.dialogue == stored and view.dialogue.turns[2].content == "Sounds good <b>bold</b> & more"
    assert [j.dimension for j in view.judgments] == ["task_completion", "personalization",
                                                     "turn_personalization"]  # the paper's order
    assert view.judgments[1].explanation.startswith("personalization of d-base: The assistant proposed")
    assert view.judgments[2].turn_scores == (3.0, None)
    assert catalog.view("d-base", judge_model="judge-2").judgments == ()
    with pytest.raises(KeyError, match=r"d-nowhere.*not in the run store"):
        catalog.view("d-nowhere")
    # a judgment judged again: its later line replaces the earlier in the view and in the score filter
    write_lines(store, Judgment, [judgment("d-music", "personalization", 4.0)])
    again = Catalog(store)
    (personalization,) = [j for j in again.view("d-music").judgments if j.dimension == "personalization"]
    assert personalization.score == 4.0
    low = Filters(dimension="personalization", score_range=(1, 2))
    assert _ids(again.select(low)) == ["d-md"]  # d-music's 1 was replaced by a 4
    assert _ids(again.select(Filters(dimension="personalization", score_range=(3, 4)))) == [
        "d-base", "d-plus-i", "d-music"]
    assert _ids(again.select(Filters(dimension="personalization", judge_model="judge-2"))) == []


def _random_store(root, seed: int) -> RunStore:
    """Dialogues of several users, tasks, assistants and settings; judgments with scores, missing ones, and
    some judged twice (the later line counts)."""
    rng = random.Random(seed)
    store = RunStore(root)
    dialogues, judgments, again = [], [], []
    for i in range(60):
        user, task = rng.randint(1, 6), rng.choice(["SD-Movies-task-1", "SD-Music-task-2", "MD-task-3"])
        domains = ["Movies", "Music"] if task.startswith("MD") else [task.split("-")[1]]
        dialogues.append(dialogue_json(
            f"d{i:02d}", scenario_id=f"user{user}/{task}", user_id=user, task_id=task, task_type=task[:2],
            domains=domains, assistant_model=rng.choice(["model-a", "model-b"]),
            assistant_setting=rng.choice(["base", "base+I"]), status=rng.choice(["terminated", "error"])))
        for judge in rng.sample(["judge-1", "judge-2"], rng.randint(0, 2)):
            score = rng.choice([None, 1.0, 2.0, 3.0, 4.0])
            row = {**judgment(f"d{i:02d}", "personalization", score), "judge_model": judge,
                   "judge_model_id": judge, "id": f"d{i:02d}-{judge}", "status": "ok" if score else "missing"}
            judgments.append(row)
            if rng.random() < 0.3:
                again.append({**row, "score": rng.choice([1.0, 4.0]), "status": "ok"})
    put(store, Dialogue, dialogues)
    put(store, Judgment, judgments)
    write_lines(store, Judgment, again)
    return store


def _reference(store: RunStore, filters: Filters) -> list[str]:
    """The filters applied to every record read whole, as the explorer did before it queried."""
    judgments = store.read(Judgment)
    out = []
    for d in sorted(store.read(Dialogue), key=lambda d: (d.user_id, d.task_id, d.assistant_model,
                                                          d.assistant_setting, d.id)):
        mine = [j for j in judgments if j.dialogue_id == d.id]
        low, high = filters.score_range or (float("-inf"), float("inf"))
        if (filters.assistant_model in (None, d.assistant_model)
                and filters.setting in (None, d.assistant_setting)
                and filters.task_type in (None, d.task_type) and filters.user in (None, d.user_id)
                and (filters.domain is None or filters.domain in d.domains)
                and (filters.judge_model is None or any(j.judge_model == filters.judge_model for j in mine))
                and (filters.dimension is None or any(
                    j.dimension == filters.dimension and j.score is not None and low <= j.score <= high
                    and filters.judge_model in (None, j.judge_model) for j in mine))
                and all(w in Catalog.label(d).lower() for w in filters.search.lower().split())):
            out.append(d.id)
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_pages_of_every_filter_agree_with_reading_every_record(tmp_path, seed):
    store = _random_store(tmp_path / "run", seed)
    catalog = Catalog(store)
    rng = random.Random(seed)
    options = {"assistant_model": ["model-a", "model-b"], "setting": ["base", "base+I"],
               "task_type": ["SD", "MD"], "domain": ["Movies", "Music"], "user": [1, 2, 3],
               "judge_model": ["judge-1", "judge-2"],
               "dimension": ["personalization"], "search": ["error", "user 2", "turns"]}
    for _ in range(25):
        chosen = {name: rng.choice(values) for name, values in options.items() if rng.random() < 0.3}
        if "dimension" in chosen:
            chosen["score_range"] = rng.choice([(1, 2), (3, 4), (2, 2)])
        filters = Filters(**chosen)
        expected = _reference(store, filters)
        pages = [catalog.select(filters, offset=offset, limit=7) for offset in range(0, 63, 7)]
        assert [i for page in pages for i in _ids(page)] == expected, filters
        assert {page.total for page in pages} == {len(expected)}
        for at, dialogue_id in enumerate(expected):
            assert catalog.position(dialogue_id, filters) == at


def _split(tmp_path) -> tuple[RunStore, RunStore]:
    """The test store in two shards: user 1's dialogues and judgments in one, the others' in the other."""
    whole = build(tmp_path / "whole")
    first = {d.id for d in whole.read(Dialogue) if d.user_id == 1}
    shards = RunStore(tmp_path / "shard-1"), RunStore(tmp_path / "shard-2")
    for kind, dialogue_of in ((Dialogue, lambda r: r.id), (Judgment, lambda r: r.dialogue_id)):
        records = whole.read(kind)
        shards[0].extend([r for r in records if dialogue_of(r) in first])
        shards[1].extend([r for r in records if dialogue_of(r) not in first])
    return shards


def test_shards_are_read_together(tmp_path):
    one, two = _split(tmp_path)
    assert {d.id for d in one.read(Dialogue)} == {"d-base", "d-plus-i"}
    whole = Catalog(build(tmp_path / "again"))
    together = Catalog([one, two])
    assert together.total == 4 and _ids(together.select()) == _ids(whole.select())
    for name in ("assistant_model", "domain", "user", "dimension"):
        assert together.values(name) == whole.values(name)
    assert together.view("d-md") == whole.view("d-md")  # read from the second shard
    high = Filters(dimension="personalization", score_range=(3, 4))
    assert _ids(together.select(high)) == ["d-base", "d-plus-i"]
    view = explore([one.root, two.root])
    assert view.count.value == "4 of 4 dialogues" and str(one.root) in view.catalog.where
    put(two, Dialogue, [dialogue_json("d-base", **DIALOGUES["d-base"])])
    with pytest.raises(StoreError, match="'d-base' is in both"):
        Catalog([one, two])


def test_a_torn_last_line_is_skipped_and_said(store, caplog):
    line = orjson.dumps(dialogue_json("d-torn", **DIALOGUES["d-md"]))
    with store.path(Dialogue).open("ab") as fh:
        fh.write(line[: len(line) // 2])  # a run stopped mid-write
    with caplog.at_level(logging.WARNING):
        view = explore(store)
    assert view.count.value == "4 of 4 dialogues" and "d-torn" not in [v for _, v in view.dialogue.options]
    assert any("is torn" in r.getMessage() for r in caplog.records)


def test_the_explorer_asks_for_one_page_never_the_whole_list(store, monkeypatch):
    asked = []
    select = Catalog.select

    def spy(self, *args, offset=0, limit=200):
        asked.append((offset, limit))
        return select(self, *args, offset=offset, limit=limit)

    monkeypatch.setattr(Catalog, "select", spy)
    monkeypatch.setattr(widgets_module, "SHOWN", 2)
    view = explore(store)
    assert [v for _, v in view.dialogue.options] == ["d-base", "d-plus-i"]
    assert view.count.value == "4 of 4 dialogues; showing 1-2"
    view.later.click()
    view.set_filters(domain="Movies")  # a new filter goes back to the first page
    assert [v for _, v in view.dialogue.options] == ["d-base", "d-plus-i"]
    assert asked and {limit for _, limit in asked} == {2} and (2, 2) in asked


def test_side_by_side_offers_a_page_of_scenarios_and_finds_the_others_by_id(store, monkeypatch):
    plus = {"assistant_setting": "base+I"}
    put(store, Dialogue, [dialogue_json("d-md-plus", **{**DIALOGUES["d-md"], **plus}),
                          dialogue_json("d-music-plus", **{**DIALOGUES["d-music"], **plus})])
    catalog = Catalog(store)
    every = ["user1/SD-Movies-task-1", "user2/SD-Music-task-1", "user3/MD-task-1"]
    assert catalog.compared_scenarios() == every
    assert catalog.compared_scenarios(limit=2) == ["user1/SD-Movies-task-1", "user2/SD-Music-task-1"]
    assert catalog.compared_scenarios(search="MD user3") == ["user3/MD-task-1"]
    assert catalog.compared_scenarios(judge_model="judge-1") == ["user1/SD-Movies-task-1"]  # both judged
    monkeypatch.setattr(widgets_module, "SHOWN", 1)
    view = side_by_side(catalog)
    assert list(view.scenario.options) == ["user1/SD-Movies-task-1"]
    view.choose("user3/MD-task-1", left="d-md", right="d-md-plus")  # beyond the first offered
    assert view.search.value == "user3/MD-task-1" and list(view.scenario.options) == ["user3/MD-task-1"]
    assert 'data-scenario="user3/MD-task-1"' in view.page.value
    view.search.value = "music"
    assert list(view.scenario.options) == ["user2/SD-Music-task-1"] and view.left.value == "d-music"
