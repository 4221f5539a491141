"""Lexical diversity measures on hand-made texts with values worked out by hand."""

from __future__ import annotations

import math
import random

import pytest
import sacrebleu

from personalens_utils.benchmark_validation import lexical as L


def test_tokenize_splits_punctuation_like_bleu():
    assert L.tokenize("Book it, please!") == ["Book", "it", ",", "please", "!"]


def test_distinct_n_hand_computed():
    # unigrams a b a b: 2 distinct of 4; bigrams ab ba ab: 2 distinct of 3
    assert L.distinct_n(["a b a b"], 1) == pytest.approx(0.5)
    assert L.distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)
    # pooled texts; bigrams do not cross the border between texts: (a b), (a b) -> 1 of 2
    assert L.distinct_n(["a b", "a b"], 2) == pytest.approx(0.5)
    assert L.distinct_n(["x y z"], 1) == pytest.approx(1.0)
    assert math.isnan(L.distinct_n(["one"], 2))


def test_ngram_entropy_hand_computed():
    assert L.ngram_entropy(["x x x x x x"], 4) == pytest.approx(0.0)  # three copies of one 4-gram
    assert L.ngram_entropy(["a b c d e"], 4) == pytest.approx(math.log(2))  # abcd, bcde
    # abcd x2, bcda, cdab, dabc over 5: -(0.4 ln 0.4 + 3 * 0.2 ln 0.2)
    expected = -(0.4 * math.log(0.4) + 3 * 0.2 * math.log(0.2))
    assert L.ngram_entropy(["a b c d a b c d"], 4) == pytest.approx(expected)
    assert math.isnan(L.ngram_entropy(["too short"], 4))


def test_self_bleu_extremes():
    assert L.self_bleu(["the cat sat on the mat"] * 3) == pytest.approx(1.0)
    assert L.self_bleu(["a b c d", "e f g h"]) == pytest.approx(0.0)
    with pytest.raises(L.LexicalInputError, match="at least two"):
        L.self_bleu(["only one", "   "])


def test_self_bleu_equals_sacrebleu_sentence_bleu_against_all_others():
    rng = random.Random(7)
    words = [
        "I",
        "would",
        "like",
        "to",
        "book",
        "a",
        "table",
        "for",
        "two",
        "seven",
        ",",
        ".",
        "the",
        "cat",
        "!",
    ]
    for _ in range(15):
        texts = [
            " ".join(rng.choice(words) for _ in range(rng.randint(1, 25))) for _ in range(rng.randint(2, 9))
        ]
        reference = sum(
            sacrebleu.sentence_bleu(t, texts[:i] + texts[i + 1 :]).score for i, t in enumerate(texts)
        ) / (100 * len(texts))
        assert L.self_bleu(texts) == pytest.approx(reference, abs=1e-12)


def _dialogue(i: int, task_type: str, *utterances: str, status: str = "terminated") -> dict:
    turns = [{"role": "user" if k % 2 == 0 else "assistant", "content": u} for k, u in enumerate(utterances)]
    return {"id": f"d{i}", "task_type": task_type, "status": status, "turns": turns}


def test_lexical_diversity_groups_skips_errors_and_averages_per_dialogue():
    records = [
        _dialogue(1, "SD", "a b", "a b"),  # Dist-1 2/4, Dist-2 1/2
        _dialogue(2, "SD", "a b c d"),  # Dist-1 1, Dist-2 1, Ent-4 0 (one 4-gram)
        _dialogue(3, "MD", "a b c d e", "x y z w"),
        _dialogue(4, "SD", "broken", status="error"),
    ]
    table = L.lexical_diversity(records).set_index("task_type")
    assert table.loc["SD", "# Dial"] == 2 and table.loc["MD", "# Dial"] == 1
    assert table.loc["SD", "Dist-1"] == pytest.approx((0.5 + 1.0) / 2)
    assert table.loc["SD", "Dist-2"] == pytest.approx((0.5 + 1.0) / 2)
    assert table.loc["SD", "Ent-4"] == pytest.approx(0.0)  # dialogue 1 has no 4-gram: left out of the mean
    assert table.loc["SD", "Self-BLEU"] == pytest.approx(L.self_bleu(["a b", "a b", "a b c d"]))
    assert table.loc["MD", "Ent-4"] == pytest.approx(math.log(3))  # abcd, bcde, xyzw


def test_lexical_diversity_samples_self_bleu_and_names_bad_records():
    records = [_dialogue(i, "SD", f"utterance number {i}", f"reply {i} here") for i in range(30)]
    table = L.lexical_diversity(records, self_bleu_sample=10, seed=3)
    assert table.loc[0, "# Utt. (Self-BLEU)"] == 10
    assert table.equals(L.lexical_diversity(records, self_bleu_sample=10, seed=3))
    with pytest.raises(L.LexicalInputError, match="dialogue d0: turn 0"):
        L.lexical_diversity([{"id": "d0", "task_type": "SD", "turns": [{"role": "user"}]}])
    with pytest.raises(L.LexicalInputError, match="no dialogues"):
        L.lexical_diversity([_dialogue(0, "SD", "x", status="error")])


def test_run_store_lexical_diversity_reads_dialogues_and_reports_backends(tmp_path):
    from support.records import dialogue_json, put

    from personalens_utils.runstore.records import Dialogue
    from personalens_utils.runstore.store import RunStore

    def stored(i: int, task_type: str, *utterances: str, **fields: str) -> dict:
        row = _dialogue(i, task_type, *utterances)
        return dialogue_json(row["id"], task_type=task_type, turns=row["turns"],
                             n_turns=sum(t["role"] == "user" for t in row["turns"]), **fields)

    put(RunStore(tmp_path), Dialogue, [
        stored(1, "SD", "a b", "c d", backend="offline"),
        stored(2, "MD", "a b c d e", backend="offline"),
        stored(3, "SD", "x", backend="anthropic", status="error"),
    ])
    table, backends = L.run_store_lexical_diversity(tmp_path, ["SD"])
    assert table["task_type"].tolist() == ["SD"] and table.loc[0, "# Dial"] == 1
    assert table.loc[0, "Dist-1"] == pytest.approx(1.0)
    assert backends == {"offline"}
    assert L.run_store_lexical_diversity(tmp_path)[0]["task_type"].tolist() == ["SD", "MD"]
    with pytest.raises(FileNotFoundError, match="run notebook 03"):
        L.run_store_lexical_diversity(tmp_path / "empty")
