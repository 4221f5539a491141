"""PERSONA Bench metrics and the offline predictor's reasons: the settings differ on synthetic data as
the planted signals say they must, unread answers count the two ways, and SBERT/METEOR are either
measured or say "not measured"."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from personalens_utils.llm import LLMClient
from personalens_utils.persona_bench import metrics as M
from personalens_utils.persona_bench.items import iter_items
from personalens_utils.persona_bench.runner import run_items
from personalens_utils.persona_bench.synthetic import write_synthetic
from personalens_utils.runstore.records import PersonaPrediction
from personalens_utils.runstore.store import RunStore


@pytest.fixture(scope="module")
def frame(tmp_path_factory) -> pd.DataFrame:
    root = tmp_path_factory.mktemp("persona-metrics")
    data = write_synthetic(root / "data", 30, seed=5)
    store = RunStore(root / "store")
    run_items(LLMClient("offline", progress=False), iter_items(data), store)
    return store.frame(PersonaPrediction)


@pytest.fixture(scope="module")
def kept(frame) -> pd.DataFrame:
    """The authors' rows without SBERT, which these tests do not read (SBERT on a CPU takes 10 s here)."""
    return M.scored(frame, "authors", sbert=False)


def _value(summary: pd.DataFrame, task: str, setting: str, metric: str) -> float:
    row = summary[(summary["task"] == task) & (summary["setting"] == setting) & (summary["metric"] == metric)]
    return float(row["value"].iloc[0])


def test_offline_settings_differ_for_the_planted_reasons(frame, kept):
    summary = M.summary(frame, "authors", kept=kept, n_resamples=0)
    # the thread shows the sign: both *-Conv settings beat P-NonConv on 3.1
    assert (
        _value(summary, "3.1", "P-Conv", "Accuracy") > _value(summary, "3.1", "P-NonConv", "Accuracy") + 0.1
    )
    assert (
        _value(summary, "3.1", "NP-Conv", "Accuracy") > _value(summary, "3.1", "P-NonConv", "Accuracy") + 0.1
    )
    # the user's own history shows their scale and words: P-* beat NP-Conv on 3.2 and 3.3
    assert _value(summary, "3.2", "P-Conv", "MAE") < _value(summary, "3.2", "NP-Conv", "MAE") / 2
    assert _value(summary, "3.3", "P-Conv", "ROUGE-L") > _value(summary, "3.3", "NP-Conv", "ROUGE-L") + 0.1


def test_unread_answers_are_left_out_or_counted_wrong(frame):
    missing = frame[(frame["status"] == "missing") & (frame["task"] == "3.1")]
    assert len(missing) > 0, "the offline predictor's unreadable answers should reach the store"
    authors, strict = M.scored(frame, "authors", sbert=False), M.scored(frame, "strict", sbert=False)
    assert len(strict) == len(frame) and len(authors) == (frame["status"] == "ok").sum()
    counted = strict.set_index("id").loc[missing["id"], "counted"]
    assert all(c != t for c, t in zip(counted, missing["truth"], strict=True))
    a = M.summary(frame, "authors", kept=authors, n_resamples=0)
    s = M.summary(frame, "strict", kept=strict, n_resamples=0)
    assert _value(s, "3.1", "P-Conv", "Accuracy") < _value(a, "3.1", "P-Conv", "Accuracy")
    coverage = a[(a["task"] == "3.1") & (a["setting"] == "P-Conv")]["coverage"].iloc[0]
    part = frame[(frame["task"] == "3.1") & (frame["setting"] == "P-Conv")]
    assert coverage == pytest.approx((part["status"] == "ok").mean())


def test_user_intervals_cover_the_value_and_resample_users(frame, kept):
    summary = M.summary(frame, "authors", kept=kept, n_resamples=60, seed=1)
    row = summary[
        (summary["task"] == "3.1") & (summary["setting"] == "P-Conv") & (summary["metric"] == "Accuracy")
    ].iloc[0]
    assert row["low"] <= row["value"] <= row["high"] and row["low"] < row["high"]
    gains = M.gains(frame, "authors", kept=kept, n_resamples=60, seed=1)
    acc = gains[
        (gains["task"] == "3.1")
        & (gains["metric"] == "Accuracy")
        & (gains["comparison"] == "P-Conv - P-NonConv")
    ].iloc[0]
    assert acc["low"] > 0, "the thread's planted sign signal must show as a positive gain"


def test_meteor_and_sbert_are_measured_or_say_not_measured():
    scores = M.text_scores(
        ["the cat sat on the mat", "hello there"], ["the cat sat on a mat", ""], sbert=True
    )
    assert scores.loc[1, "ROUGE-L"] == 0.0 and scores.loc[0, "ROUGE-1"] > 0.7
    if M.meteor_available():
        assert scores.loc[0, "METEOR"] > 0.5
    else:
        assert math.isnan(scores.loc[0, "METEOR"])
    if M.sbert_available():
        assert scores.loc[0, "SBERT"] > 0.8 and scores.loc[1, "SBERT"] == 0.0
    else:
        assert math.isnan(scores.loc[0, "SBERT"])
    off = M.text_scores(["a b"], ["a b"], sbert=False)
    assert math.isnan(off.loc[0, "SBERT"])


DEBIAN_WORDNET = Path("/usr/share/wordnet")
"""Where Debian's wordnet-base installs WordNet 3.0 (CI installs it)."""


def _replies() -> pd.DataFrame:
    """Three read 3.3 answers of one model and setting (one per user), and one unread answer."""
    rows = [{"id": f"r{i}", "model": "m", "task": "3.3", "setting": "P-Conv", "user": f"u{i}",
             "status": "ok", "truth": "the match was great fun to watch", "prediction": reply}
            for i, reply in enumerate(["the match was fun", "cold rain all week", "watch it again"])]
    rows.append({**rows[0], "id": "r9", "user": "u9", "status": "missing", "prediction": None})
    return pd.DataFrame(rows)


def test_authors_mode_leaves_out_zero_rouge_bleu_meteor_and_keeps_every_sbert_cosine(monkeypatch):
    """The authors' GPT evaluators add a ROUGE, BLEU or METEOR score only when above 0 and every SBERT
    cosine, negative ones too: a reply with no word of the truth drops out of ROUGE and BLEU, while
    its cosine counts. (Counting the zeros, or leaving cosines at or below 0 out, moves the values.)"""
    cosines = [0.62, -0.25, 0.0]
    monkeypatch.setattr(M, "_sbert_scores", lambda truth, pred: cosines)
    frame = _replies()
    summary = M.summary(frame, "authors", n_resamples=0)
    value = summary.set_index("metric")["value"]
    assert value["SBERT"] == pytest.approx(sum(cosines) / len(cosines))
    scores = M.text_scores(list(frame["truth"][:3]), list(frame["prediction"][:3]), sbert=False)
    assert scores.loc[1, "ROUGE-L"] == 0.0 and scores.loc[1, "BLEU"] == 0.0  # no word in common
    for metric in ("ROUGE-1", "ROUGE-L", "BLEU"):
        assert value[metric] == pytest.approx(scores.loc[[0, 2], metric].mean()), metric
    strict = M.summary(frame.iloc[:3], "strict", n_resamples=0).set_index("metric")["value"]
    assert strict["ROUGE-L"] == pytest.approx(scores["ROUGE-L"].mean())  # strict counts every score
    assert summary["n"].iloc[0] == 3  # the unread answer is left out


@pytest.mark.skipif(
    not (DEBIAN_WORDNET / "data.noun").is_file() and not M._has_nltk_data("corpora/wordnet"),
    reason="no WordNet data: install the distribution's wordnet-base and wordnet-sense-index (.ci/run does)",
)
def test_meteor_is_a_number_on_the_distributions_wordnet_and_the_captions_say_which():
    scores = M.text_scores(["the baby slept well all night", "a b"], ["the infant slept", ""], sbert=False)
    meteor = scores["METEOR"]
    assert 0 < meteor[0] < 1 and meteor[1] == 0.0  # a number; an empty reply scores 0 (strict mode)
    note = M.metric_note()
    assert "METEOR on " in note and "NLTK word tokens" in note and "sentence splitting" in note
