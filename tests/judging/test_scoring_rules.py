"""The two scoring rules on crafted judge answers: where the strict reading and the official gather
script's reading agree and where they part, from one stored answer; and how analysis and the judging
report show both."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from support.records import dialogue_json, put

from personalens_utils import analysis, judging
from personalens_utils.judging import DIMENSIONS, JudgingError, score_under
from personalens_utils.judging.answers import combine, judgment_record, score_fields
from personalens_utils.llm.role import Role
from personalens_utils.measures import scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.identity import Variant
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore

JUDGE = Role.of("judge", "offline")
CASES = [
    # dimension, answer, strict, official
    ("personalization", "Personalization Score: 3\nJustification: fine", 3.0, 3.0),
    ("personalization", "<response>\nPersonalization Score: 2\n</response>", 2.0, 2.0),
    ("personalization", "personalization score: 3", 3.0, None),  # the official label is case-sensitive
    ("personalization", "**Personalization Score:** 3", 3.0, None),  # markdown between label and number
    ("personalization", "Personalization Score:3", 3.0, None),  # one space after the colon, exactly
    ("personalization", "Personalization Score: [3]", 3.0, None),
    ("personalization", "Personalization Score: 7", None, 7.0),  # no range check
    ("personalization", "Personalization Score: 3.5", None, 3.0),  # digits only: the 3 of 3.5
    ("personalization", "Personalization Score: 2\nOn reflection, Personalization Score: 4", None, 2.0),
    ("personalization", "Personalization Score: 2-3", None, 2.0),
    ("personalization", "I cannot rate this.", None, None),
    ("naturalness_user", "Naturalness Score: 0", None, 0.0),
    ("naturalness_assistant", "## Naturalness Score: 4", 4.0, 4.0),
    ("coherence_user", "Coherence score: 4", 4.0, None),
    ("coherence_assistant", "Coherence Score: 5 out of 5", 5.0, 5.0),
    ("task_completion", "VERDICT: True\nEXPLANATION: done", 1.0, 1.0),
    ("task_completion", "VERDICT: False\nEXPLANATION: not done", 0.0, 0.0),
    ("task_completion", "verdict: true", 1.0, 1.0),  # the official verdict ignores case
    ("task_completion", "VERDICT:True", 1.0, 0.0),  # unreadable there: a failure, not missing
    ("task_completion", "Verdict: **True**", 1.0, 0.0),
    ("task_completion", " True\nEXPLANATION: the user got it", 1.0, 0.0),  # the kit prompt ends on VERDICT:
    ("task_completion", "VERDICT: maybe", None, 0.0),
    ("task_completion", "VERDICT: Trueish", None, 1.0),  # no word boundary in the official pattern
    ("task_completion", "VERDICT: False\nOn second thought, VERDICT: True", None, 0.0),
    ("task_completion", "", None, 0.0),
]


def readings(dimension: str, first: str, second: str | None = None) -> tuple[float | None, float | None]:
    """(strict, official) of an answer stored the way judging stores it (with a reply to the reminder)."""
    dim = DIMENSIONS[dimension]
    fields = score_fields(dim, [combine(dim, first, second)])
    args = (dimension, fields["status"], fields["score"], fields["raw"])
    return score_under("strict", *args), score_under("official", *args)


@pytest.mark.parametrize(("dimension", "answer", "strict", "official"), CASES)
def test_crafted_answers_under_both_rules(dimension, answer, strict, official):
    assert readings(dimension, answer) == (strict, official)


def test_the_official_rule_reads_only_the_first_answer():
    # asked again after an out-of-range score: strict keeps the second reply, official the first
    assert readings("personalization", "Personalization Score: 9", "Personalization Score: 3") == (3.0, 9.0)
    assert readings("task_completion", "VERDICT: perhaps", "VERDICT: True") == (1.0, 0.0)
    assert readings("coherence_user", "Coherence Score: 4", "Coherence Score: 2") == (4.0, 4.0)


def test_turn_level_keeps_the_strict_reading_and_errors_read_as_nothing():
    assert score_under("official", "turn_personalization", "ok", 2.5, "Personalization Score: 9") == 2.5
    assert score_under("official", "task_completion", "error", None, "") is None
    assert score_under("strict", "personalization", "missing", None, "Personalization Score: 7") is None
    with pytest.raises(JudgingError, match="unknown scoring rule 'paper'"):
        score_under("paper", "personalization", "ok", 3.0, "")
    with pytest.raises(JudgingError, match="no official reading"):
        judging.official_reading("turn_personalization", "Personalization Score: 3")


ANSWERS = {  # dialogue -> dimension -> answer
    "d1": {"task_completion": "VERDICT: True", "personalization": "Personalization Score: 4",
           "coherence_assistant": "Coherence Score: 5"},
    "d2": {"task_completion": "VERDICT:True", "personalization": "**Personalization Score:** 2",
           "coherence_assistant": "Coherence Score: 5"},
    "d3": {"task_completion": "VERDICT: False", "personalization": "Personalization Score: 7",
           "coherence_assistant": "Coherence Score: 5"},
}


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    store = RunStore(tmp_path / "run")
    put(store, Dialogue, [dialogue_json(d, scenario_id=f"user{i}/SD-Alarm-task-1", user_id=i)
                          for i, d in enumerate(ANSWERS, start=1)])
    records = []
    for dialogue_id, answers in ANSWERS.items():
        for dimension, answer in answers.items():
            dim = DIMENSIONS[dimension]
            fields = score_fields(dim, [combine(dim, answer, None)])
            records.append(judgment_record(dialogue_id, dim, JUDGE, Variant("v2"), fields))
    store.extend(records)
    return store


def test_analysis_reads_either_rule_and_shows_the_other_where_it_differs(store: RunStore):
    strict = scores.load_scores(store, scoring="strict")
    official = scores.load_scores(store, scoring="official")
    assert strict.attrs["scoring"] == "strict" and official.attrs["scoring"] == "official"
    for frame in (strict, official):
        assert frame["strict_score"].equals(strict["score"])
        assert frame["official_score"].equals(official["score"])
    means = {}
    for name, frame in (("strict", strict), ("official", official)):
        means[name] = frame.groupby("dimension")["score"].mean().to_dict()
    assert means["strict"]["task_completion"] == 2 / 3 and means["official"]["task_completion"] == 1 / 3
    assert means["strict"]["personalization"] == 3.0 and means["official"]["personalization"] == 5.5

    table = analysis.table3(official)
    cells = table.frame.set_index("Assistant model").loc["assistant"]
    # three users: the means alone, no interval (docs/trust.md, "Thin data")
    assert cells["SD TCR"] == "33.33 (strict 66.67)" and cells["SD P"] == "5.50 (strict 3.00)"
    assert "rest on fewer than 10 users" in table.caption
    assert "(" not in cells["SD Coh."]  # both rules read 5 three times
    assert "Scores read under the official rule; the strict rule reads 3 answers differently" in table.caption
    data = table.data.set_index("dimension")
    assert data.loc["personalization", "n_read_differently"] == 2
    assert data.loc["coherence_assistant", "other_mean"] == 5.0
    plain = analysis.table3(strict)
    assert plain.frame.loc[0, "SD P"].endswith("(official 5.50)") and "official rule reads 3" in plain.caption


def test_the_judging_report_counts_answers_the_rules_read_differently(store: RunStore):
    report = judging.missing_rate(store).set_index("dimension")
    counts = ["missing", "official_missing", "read_differently"]
    assert report.loc["task_completion", counts].tolist() == [0, 0, 1]
    assert report.loc["personalization", counts].tolist() == [1, 1, 2]
    assert report.loc["coherence_assistant", "read_differently"] == 0
    j1 = analysis.judge_missing(store, "judge", "v2")
    assert "read differently (read_differently): answers the two rules score differently" in j1.caption
    assert not math.isnan(j1.frame["missing_rate"].iloc[0])


def test_table_j1_prints_dimensions_and_counts_by_name(store: RunStore, tmp_path):
    """The paper's J1 names each dimension and count in words, under a heading per judge run."""
    missing = analysis.judge_missing(store, "judge", "v2")
    latex = missing.save(tmp_path, OutputId("table", "J1", "missing"))["tex"].read_text()
    body = latex[latex.index("\\toprule"):latex.index("\\bottomrule")]
    assert "\\_" not in body, "no raw id (task_completion, missing_rate, ...) in the printed table"
    assert "Dimension & OK & Missing & Error" in body and "Coherence (A)" in body
    assert "\\textit{judge, offline backend, kit prompts}" in body


def test_a_frame_that_mixes_the_rules_is_refused(store: RunStore):
    mixed = pd.concat([scores.load_scores(store, scoring=rule) for rule in ("strict", "official")])
    with pytest.raises(scores.ScoresError, match=r"mixes scoring rules \['official', 'strict'\]"):
        scores.scoring_of(mixed)
    with pytest.raises(JudgingError, match="unknown scoring rule 'lenient'"):
        scores.load_scores(store, scoring="lenient")
