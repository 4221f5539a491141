"""The prompt set is part of a record's identity: kit and official records never share an id or a mean,
and stores written before prompt sets load with their ids and lines unchanged."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import orjson
import pytest
from support.records import dialogue_json, write_lines

from personalens_utils.measures import scores
from personalens_utils.runstore.identity import Variant
from personalens_utils.runstore.records import Dialogue, Judgment, RecordError
from personalens_utils.runstore.store import RunStore

IDENTITY_KEYS = ("user_backend", "user_model_id", "assistant_backend", "assistant_model_id")


def sha_id(*parts: object) -> str:
    """The id recipe written out independently of records.stable_id."""
    return hashlib.sha256(orjson.dumps([str(p) for p in parts])).hexdigest()[:20]


def identity_line(record_id: str = "x", **fields: object) -> dict:
    return dialogue_json(record_id, user_backend="offline", user_model_id="u-id", assistant_backend="offline",
                         assistant_model_id="a-id", **fields)


def test_a_kit_dialogue_keeps_the_id_and_layout_it_had_before_prompt_sets():
    line = identity_line()
    kit = Dialogue.from_json(line)
    assert kit.prompt_set == "kit" and "prompt_set" not in kit.to_json()
    fresh = replace(kit, id="")
    assert fresh.id == sha_id("user1/SD-Alarm-task-1", "user-sim", "assistant", "base", "v1", "offline",
                              "u-id", "offline", "a-id")
    assert Dialogue.from_json(line).to_json() == line


def test_an_official_dialogue_has_its_own_id_and_says_so_in_its_line():
    kit = replace(Dialogue.from_json(identity_line()), id="")
    official = replace(kit, id="", variant=Variant("v1", "official"))
    assert official.id != kit.id
    stored = official.to_json()
    assert stored["prompt_set"] == "official"
    assert list(stored).index("prompt_set") == list(stored).index("prompt_version") + 1
    again = Dialogue.from_json(stored)
    assert again == official and again.to_json() == stored


def test_judgments_of_the_two_sets_differ_and_kit_ones_are_unchanged():
    base = Judgment(dialogue_id="d1", dimension="personalization", judge_model="J", variant=Variant("v2"),
                    backend="offline", judge_model_id="j-id", status="ok", score=3.0)
    assert base.id == sha_id("d1", "personalization", "J", "v2", "offline", "j-id")
    assert "prompt_set" not in base.to_json()
    official = replace(base, id="", variant=Variant("v2", "official"))
    assert official.id != base.id and Judgment.from_json(official.to_json()) == official


def test_an_unknown_or_impossible_prompt_set_is_refused_with_the_place():
    with pytest.raises(RecordError, match=r"here:3: .*'prompt_set' must be one of \['kit', 'official'\]"):
        Dialogue.from_json(identity_line(prompt_set="paper"), "here:3")
    legacy = {k: v for k, v in identity_line(prompt_set="official").items() if k not in IDENTITY_KEYS}
    with pytest.raises(RecordError, match="before run identity"):
        Dialogue.from_json(legacy)


def test_analysis_keeps_the_two_prompt_sets_apart(tmp_path):
    store = RunStore(tmp_path)
    kit = replace(Dialogue.from_json(identity_line()), id="")
    official = replace(kit, id="", variant=Variant("v1", "official"))
    write_lines(store, Dialogue, [kit.to_json(), official.to_json()])
    judgments = [
        Judgment(dialogue_id=d.id, dimension="personalization", judge_model="J",
                 variant=Variant("v2", d.prompt_set), backend="offline", status="ok", score=score)
        for d, score in ((kit, 2.0), (official, 4.0))
    ]
    write_lines(store, Judgment, [j.to_json() for j in judgments])
    tidy = scores.load_scores(store)
    assert sorted(tidy["dialogue_prompt_set"]) == sorted(tidy["judge_prompt_set"]) == ["kit", "official"]
    with pytest.raises(scores.ScoresError, match=r"would pool .*dialogue prompts official"):
        scores.aggregate(tidy, ["assistant_model"])
    by_set = scores.aggregate(tidy, ["assistant_model", "dialogue_prompt_set", "judge_prompt_set"])
    means = dict(zip(by_set["dialogue_prompt_set"], by_set["mean"], strict=True))
    assert means == {"kit": 2.0, "official": 4.0}
    only = scores.load_scores(store, judge_prompt_set="official")
    assert list(only["score"]) == [4.0]
