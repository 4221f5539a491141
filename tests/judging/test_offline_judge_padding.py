"""The length-sensitivity probe's padding is neutral to the offline judge: no score it gives rises when
every assistant turn is padded (it once did: the padding shared words with users' questions, which the
coherence rule took for answers, and held the option value "free").

The reference assistants are simulated offline on a tiny benchmark, judged on the four assistant
dimensions, and judged again under `Padding`; every padded score is compared with its dialogue's own.
"""

from __future__ import annotations

import pandas as pd
import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants.reference_assistants import DESIGNED_ORDER
from personalens_utils.base.words import words_of
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.judging.offline import _answers, _atoms, content_words
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures.display import ASSISTANT_DIMENSIONS
from personalens_utils.runstore.records import Judgment, ProbeJudgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.trust.probes import PADDING, Padding, run_probe


def _value_atoms(benchmark) -> set[str]:
    return {atom for user in benchmark.users.values() for by_type in user.preferences.values()
            for value in by_type.values() for atom in _atoms(value)}


def test_offline_scores_do_not_rise_under_padding(tmp_path):
    bench = tiny_benchmark(n_users=6)
    store = RunStore(tmp_path / "store")
    client = LLMClient("offline", progress=False)
    for model in DESIGNED_ORDER:
        run_simulation(bench, store, client, SimulationConfig(assistant_model=model, user_model="user-sim"))
    contexts = benchmark_contexts(bench)
    config = JudgingConfig(judge_model="judge-sim", dimensions=ASSISTANT_DIMENSIONS)
    run_judging(store, client, contexts, config)
    run_probe(store, client, contexts, Padding(), config)

    def scores(kind: type[Judgment]) -> pd.Series:
        rows = [(j.dialogue_id, j.dimension, j.score) for j in store.read(kind) if j.status == "ok"]
        return pd.DataFrame(rows, columns=["dialogue", "dimension", "score"]).set_index(
            ["dialogue", "dimension"])["score"]

    original, padded = scores(Judgment), scores(ProbeJudgment)
    assert len(padded) == len(original) > 300  # every dialogue on every dimension, under the probe too
    change = (padded - original.reindex(padded.index)).dropna()
    assert len(change) == len(padded)
    rose = change[change > 0]
    assert rose.empty, f"{len(rose)} padded scores rose: {rose.head().to_dict()}"
    by_dimension = change.groupby(level="dimension").agg(["min", "max"])
    assert (by_dimension["max"] <= 0).all(), by_dimension


def test_padding_holds_no_content_word_and_no_option_value_of_the_tiny_benchmark():
    assert content_words(PADDING) == set(), "every padding word is a stop word or offline filler"
    padded = words_of(PADDING)
    assert not [atom for atom in _value_atoms(tiny_benchmark(n_users=6)) if atom in padded]


def test_filler_answers_no_question_a_real_reply_still_does():
    question = "Which message should I send to my sister about the closing time?"
    assert not _answers(question, PADDING, [])
    assert not _answers(question, "Here it is.\n\n" + PADDING, [])
    assert _answers(question, "Send her the message that the shop closing time is six.", [])


@pytest.mark.slow
def test_padding_holds_no_option_value_of_the_official_profiles(official_benchmark):
    atoms = _value_atoms(official_benchmark)
    assert len(atoms) > 1000
    padded = words_of(PADDING)
    assert not [atom for atom in atoms if atom in padded]
    assert " free " in {f" {a.strip()} " for a in atoms}, "the old padding's 'free' is an option value"
