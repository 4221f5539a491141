"""The judge report card on planted judges: each fails exactly the checks its fault should fail.

The reference assistants are simulated offline on a tiny benchmark; four judges score them: the offline
judge, a profile-blind judge, a length-biased judge and a random judge (tests/support/planted_judges.py,
in-process models behind `LLMClient`). Each is also run under both probes (`trust.probes.run_probe`).

Every judge judges each dialogue twice (`judge_samples=2`), so self-consistency is measured.
"""

from __future__ import annotations

import pandas as pd
import pytest
from support.planted_judges import LengthBiasedJudge, ProfileBlindJudge, RandomJudge
from support.records import dialogue
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants.reference_assistants import DESIGNED_ORDER
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures.display import ASSISTANT_DIMENSIONS
from personalens_utils.runstore.identity import Variant
from personalens_utils.runstore.records import Dialogue, Judgment, ProbeJudgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.trust import TABLE_T1
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.trust.probes import PADDING, Padding, ProfileSwap, run_probe
from personalens_utils.trust.report_card import (
    CARD_COLUMNS,
    FAIL,
    NOT_MEASURED,
    PASS,
    CardSettings,
    JudgeRef,
    export_card,
    report_card,
    verdicts,
)

SETTINGS = CardSettings(n_resamples=300)
OFFLINE = JudgeRef("judge-sim", "offline")


def _truth(bench, store):
    """A dialogue's own user's profile, found from the task and the conversation (padding taken off),
    never from the profile the judge is shown."""
    owners: dict[tuple, int] = {}
    for d in store.read(Dialogue):
        key = (d.task_id, tuple(t.content for t in d.turns))
        assert owners.setdefault(key, d.user_id) == d.user_id, "two users' dialogues are the same"

    def truth(context):
        said = tuple(t["content"].split("\n\n" + PADDING)[0] for t in context["dialogue"])
        user = bench.user(owners[context["task"]["task_id"], said])
        domains = list(context["task"]["domains"])
        return {"user_id": user.user_id, "demographics": dict(user.demographics),
                "preferences": user.preferences_for(domains), "interactions": user.interactions_for(domains)}

    return truth


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    bench = tiny_benchmark(n_users=6)
    root = tmp_path_factory.mktemp("card")
    store = RunStore(root / "store")
    offline = LLMClient("offline", progress=False)
    for model in DESIGNED_ORDER:
        run_simulation(bench, store, offline, SimulationConfig(assistant_model=model, user_model="user-sim"))
    contexts = benchmark_contexts(bench)
    judges = {
        OFFLINE: offline,
        JudgeRef("judge-blind", "planted-blind"): LLMClient(ProfileBlindJudge(_truth(bench, store)),
                                                            progress=False, use_cache=False),
        JudgeRef("judge-length", "planted-length"): LLMClient(LengthBiasedJudge(), progress=False,
                                                              use_cache=False),
        JudgeRef("judge-random", "planted-random"): LLMClient(RandomJudge(), progress=False, use_cache=False),
    }
    reports = {}
    for judge, client in judges.items():
        config = JudgingConfig(judge_model=judge.model, dimensions=ASSISTANT_DIMENSIONS, judge_samples=2)
        run_judging(store, client, contexts, config)
        reports[judge] = [run_probe(store, client, contexts, probe, JudgingConfig(judge_model=judge.model))
                          for probe in (ProfileSwap(bench), Padding())]
    return bench, store, judges, reports


def _card(store, judge, partner=OFFLINE):
    return report_card(store, [judge, partner], settings=SETTINGS)


def _failed(card, judge):
    return {check for check, verdict in verdicts(card)[judge.label].items() if verdict == FAIL}


def test_probes_store_their_own_records_and_resume(world):
    bench, store, judges, reports = world
    first = reports[OFFLINE]
    assert [r.stored for r in first] == [2 * 96, 4 * 96]  # TC and P; the four assistant dimensions
    again = run_probe(store, judges[OFFLINE], benchmark_contexts(bench), ProfileSwap(bench),
                      JudgingConfig(judge_model="judge-sim"))
    assert again.stored == 0 and again.planned == 0 and again.calls == 0
    probes = store.read(ProbeJudgment)
    assert {p.probe for p in probes} == {"profile_swap", "padding"}
    assert all(ProbeJudgment.from_json(p.to_json()) == p for p in probes[:20])
    # the ordinary table holds only ordinary judgments: two samples of four dimensions per judge and dialogue
    ordinary = store.read(Judgment)
    assert len(ordinary) == len(judges) * 2 * len(ASSISTANT_DIMENSIONS) * len(store.read(Dialogue))
    assert {j.id for j in ordinary}.isdisjoint({p.id for p in probes})

def test_another_donor_is_another_record(world):
    bench, store, _, _ = world
    dialogue = store.read(Dialogue)[0]
    assert ProfileSwap(bench, seed=0).variant(dialogue) != ProfileSwap(bench, seed=5).variant(dialogue) or \
        ProfileSwap(bench, seed=0).donor(dialogue) == ProfileSwap(bench, seed=5).donor(dialogue)
    assert ProfileSwap(bench).donor(dialogue) != dialogue.user_id


def test_the_offline_judge_passes_all_it_can_be_measured_on(world, tmp_path):
    _, store, _, _ = world
    card = _card(store, OFFLINE, JudgeRef("judge-blind", "planted-blind"))
    mine = verdicts(card)[OFFLINE.label]
    assert _failed(card, OFFLINE) == set()
    measured = {check for check, verdict in mine.items() if verdict == PASS}
    assert {"known order (TCR)", "known order (P)", "self-consistency (TCR)", "self-consistency (P)",
            "profile counterfactual (P drops)", "profile counterfactual (TCR holds)",
            "length sensitivity (P)", "agreement with judge-blind (planted-blind) (P)"} <= measured
    assert {check for check, verdict in mine.items() if verdict == NOT_MEASURED} == {
        "human agreement (TCR)", "human agreement (P)", "self-preference (TCR)", "self-preference (P)"}
    paths = export_card(card, tmp_path, TABLE_T1)
    assert paths["csv"].name == "tableT1_judge_report_card.csv"
    exported = pd.read_csv(paths["csv"])
    assert tuple(exported.columns) == CARD_COLUMNS
    assert set(exported["verdict"]) <= {PASS, FAIL, NOT_MEASURED}
    assert "offline" in card.caption


def test_a_profile_blind_judge_fails_the_profile_counterfactual_and_nothing_else(world):
    _, store, _, _ = world
    blind = JudgeRef("judge-blind", "planted-blind")
    card = _card(store, blind)
    assert _failed(card, blind) == {"profile counterfactual (P drops)"}
    row = card.frame[(card.frame["judge"] == blind.label)
                     & (card.frame["check"] == "profile counterfactual (P drops)")].iloc[0]
    assert row["estimate"] == 0 and row["n"] > 0


def test_a_length_biased_judge_fails_length_sensitivity(world):
    _, store, _, _ = world
    biased = JudgeRef("judge-length", "planted-length")
    card = _card(store, biased)
    assert _failed(card, biased) == {"length sensitivity (P)"}


def test_a_random_judge_fails_self_consistency(world):
    _, store, _, _ = world
    rand = JudgeRef("judge-random", "planted-random")
    card = _card(store, rand)
    failed = _failed(card, rand)
    assert {"self-consistency (TCR)", "self-consistency (P)"} <= failed
    assert "self-consistency (P)" not in _failed(card, OFFLINE)


def test_one_sample_leaves_self_consistency_not_measured(world, tmp_path):
    _, store, _, _ = world
    only_first = RunStore(tmp_path / "first")
    only_first.extend(store.read(Dialogue))
    only_first.extend([j for j in store.read(Judgment) if j.sample == 0])
    card = report_card(only_first, [OFFLINE], settings=SETTINGS)
    mine = verdicts(card)[OFFLINE.label]
    assert mine["self-consistency (P)"] == NOT_MEASURED
    assert mine["profile counterfactual (P drops)"] == NOT_MEASURED  # no probe records in this store
    assert mine["agreement with another judge (P)"] == NOT_MEASURED


def test_human_agreement_passes_a_judge_people_agree_with_and_fails_a_random_one(world):
    _, store, _, _ = world
    first = [(j.dialogue_id, j.dimension, j.score) for j in store.read(Judgment)
             if j.judge_model == "judge-sim" and j.sample == 0 and j.dimension in ("task_completion",
                                                                                 "personalization")]
    tidy = pd.DataFrame(sorted(first), columns=["dialogue_id", "dimension", "score"])
    sheet = tidy[["dialogue_id", "dimension", "score"]].head(120)
    pairs = enumerate(zip(sheet["dimension"], sheet["score"], strict=True))
    flipped = sheet.assign(score=[s if k % 10 else (1 - s if d == "task_completion" else max(1, s - 1))
                                  for k, (d, s) in pairs])
    people = pd.concat([sheet.assign(annotator="a"), flipped.assign(annotator="b")], ignore_index=True)
    rand = JudgeRef("judge-random", "planted-random")
    card = report_card(store, [OFFLINE, rand], annotations=people, settings=SETTINGS)
    found = verdicts(card)
    assert found[OFFLINE.label]["human agreement (P)"] == PASS
    assert found[OFFLINE.label]["human agreement (TCR)"] == PASS
    assert found[rand.label]["human agreement (P)"] == FAIL


def _family_store(path, lead: float) -> RunStore:
    """Claude and Llama assistants' dialogues judged by a Claude judge and a GPT judge; the Claude judge
    scores Claude assistants `lead` higher than the GPT judge does, and the others alike."""
    store = RunStore(path)
    judgments = []
    for k in range(40):
        assistant = "claude-helper" if k % 2 else "llama-helper"
        made = dialogue(f"d{k:02d}", backend="anthropic", assistant_model=assistant,
                        scenario_id=f"user{k}/SD-Alarm-task-1", user_id=k)
        store.append(made)
        base = 1 + (k * 7) % 3
        for judge, backend in (("claude-judge", "anthropic"), ("gpt-judge", "openai")):
            bonus = lead if judge == "claude-judge" and assistant == "claude-helper" else 0.0
            common = {"dialogue_id": made.id, "judge_model": judge, "variant": Variant("v1"),
                      "backend": backend,
                      "status": "ok"}
            judgments += [Judgment(dimension="personalization", score=base + bonus, **common),
                          Judgment(dimension="task_completion", score=float(k % 3 > 0), **common)]
    store.extend(judgments)
    return store


@pytest.mark.parametrize("lead, verdict", [(1.0, FAIL), (0.0, PASS)])
def test_self_preference_where_judge_and_assistant_share_a_family(tmp_path, lead, verdict):
    claude, gpt = JudgeRef("claude-judge", "anthropic"), JudgeRef("gpt-judge", "openai")
    card = report_card(_family_store(tmp_path / "s", lead), [claude, gpt], settings=SETTINGS)
    found = verdicts(card)
    assert found[claude.label]["self-preference (P)"] == verdict
    assert found[claude.label]["self-preference (TCR)"] == PASS
    assert found[gpt.label]["self-preference (P)"] == NOT_MEASURED  # no GPT assistant was judged
    rows = card.data[(card.data["judge"] == claude.label) & (card.data["check"] == "self-preference (P)")]
    row = rows.iloc[0]
    assert row["estimate"] == pytest.approx(lead) and row["n"] == 20
