"""Blame for each failure, validated by planted faults: an assistant that ignores the user, a user agent
that ends at its first turn, a judge whose score contradicts its own reason, each blamed on the right
party by the offline reviewer in at least 90% of its dialogues; clean dialogues blamed on nobody.
Then the record table (resumable, keyed by reviewer and judge), the refusal of a reviewer that is the
judge, unreadable answers, the rates and Table 3 without the user agent's faults."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from support.latex_page import PDFLATEX, compile_problems
from support.planted_judges import ContradictingJudge
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import save_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.llm.types import Response, Usage
from personalens_utils.measures.scores import load_scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.engine import UnreadableAnswer
from personalens_utils.runstore.records import Blame, Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import SessionConfig
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.validity import (
    BlameConfig,
    BlameError,
    ReviewerIsJudge,
    blame_frame,
    blame_rates,
    run_blame,
    table3_without_user_faults,
)
from personalens_utils.validity.blame import parse_review, resimulate_user_faults

IGNORING, DIALOGUE_ONLY, CLEAN = "ref-ignores-context", "ref-dialogue-only", "ref-all-preferences"
AT_LEAST = 0.9


def _quit_at_first_turn(dialogue: Dialogue) -> Dialogue:
    """The dialogue as a user agent that closes the conversation right after the assistant's first reply
    would have left it: the opening, the reply, an empty closing message (its TERMINATE)."""
    opening, reply, closing = dialogue.turns[:3]
    return replace(dialogue, turns=(opening, reply, replace(closing, content="")), status="terminated")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """One run: the ignoring assistant, the clean one, and the dialogue-only one whose dialogues of even
    users were cut by a user agent ending at its first turn; judged and reviewed offline (every
    dialogue reviewed, failed or not)."""
    bench = tiny_benchmark(n_users=6)
    folder = tmp_path_factory.mktemp("blame")
    simulated, store = RunStore(folder / "simulated"), RunStore(folder / "store")
    client = LLMClient("offline", progress=False)
    for model in (IGNORING, DIALOGUE_ONLY, CLEAN):
        run_simulation(bench, simulated, client,
                       SimulationConfig(assistant_model=model, user_model="user-sim"))
    quitters = {d.id for d in simulated.read(Dialogue)
                if d.assistant_model == DIALOGUE_ONLY and d.user_id % 2 == 0}
    store.extend(_quit_at_first_turn(d) if d.id in quitters else d for d in simulated.read(Dialogue))
    contexts = benchmark_contexts(bench)
    run_judging(store, client, contexts, JudgingConfig(judge_model="judge-sim"))
    judge = Role.served(ModelSpec("offline", "judge-sim"), client)
    reviewer = Role.served(ModelSpec("offline", "reviewer-sim"), client)
    report = run_blame(store, reviewer, judge, contexts, BlameConfig(which="all"))
    return bench, store, contexts, judge, reviewer, quitters, report


def _share(frame: pd.DataFrame, party: str) -> float:
    assert len(frame) and (frame["status"] == "ok").all()
    return float((frame["party"] == party).mean())


def test_an_assistant_that_ignores_the_user_is_blamed(planted):
    frame = blame_frame(planted[1])
    mine = frame[frame["assistant_model"] == IGNORING]
    assert len(mine) == 24
    assert _share(mine, "assistant") >= AT_LEAST
    assert set(mine.loc[mine["party"] == "assistant", "fault"]) == {"ignored_user"}


def test_a_user_agent_that_ends_at_its_first_turn_is_blamed(planted):
    frame = blame_frame(planted[1])
    mine = frame[frame["dialogue_id"].isin(planted[5])]
    assert len(mine) == 12
    assert _share(mine, "user_agent") >= AT_LEAST
    assert (mine["fault"] == "ended_early").mean() >= AT_LEAST
    assert (mine["turn"] == 3).all()  # the empty closing message


def test_clean_dialogues_are_blamed_on_nobody(planted):
    frame = blame_frame(planted[1])
    assert _share(frame[frame["assistant_model"] == CLEAN], "nobody") >= AT_LEAST


def test_a_judge_whose_score_contradicts_its_reason_is_blamed(planted, tmp_path):
    _, store, contexts, _, reviewer, _, _ = planted
    other = RunStore(tmp_path / "contradicted")
    other.extend(d for d in store.read(Dialogue) if d.assistant_model == CLEAN)
    liar = LLMClient(ContradictingJudge(), progress=False)
    run_judging(other, liar, contexts, JudgingConfig(judge_model="judge-liar"))
    judge = Role.served(ModelSpec(ContradictingJudge.name, "judge-liar"), liar)
    report = run_blame(other, reviewer, judge, contexts)
    frame = blame_frame(other)
    assert report.details["selected"] == len(frame) == 24  # every clean dialogue now reads as failed
    assert _share(frame, "judge") >= AT_LEAST
    assert set(frame["fault"]) == {"score_contradicts_reason"}


def test_only_failures_are_reviewed_by_default_and_a_rerun_redoes_nothing(planted, tmp_path):
    _, store, contexts, judge, _, _, _ = planted
    reviewer = Role.served(ModelSpec("offline", "second-reviewer"), judge.client)
    first = run_blame(store, reviewer, judge, contexts)
    assert 0 < first.details["selected"] < first.details["judged_dialogues"] == 72
    frame = blame_frame(store, reviewer_model="second-reviewer")
    assert len(frame) == first.details["selected"] and CLEAN not in set(frame["assistant_model"])
    again = run_blame(store, reviewer, judge, contexts)
    assert again.planned == 0 and again.already_done == first.details["selected"]
    with pytest.raises(BlameError, match="several reviewers"):
        blame_frame(store)


def test_a_reviewer_that_is_the_judge_is_refused(planted):
    _, store, contexts, judge, _, _, _ = planted
    same = Role.served(ModelSpec("offline", "judge-sim"), judge.client)
    with pytest.raises(ReviewerIsJudge, match="judge under review"):
        run_blame(store, same, judge, contexts)
    assert not any(b.reviewer_model == "judge-sim" for b in store.read(Blame))


def test_no_judgments_to_review_is_said(planted, tmp_path):
    _, _, contexts, judge, reviewer, _, _ = planted
    with pytest.raises(BlameError, match="no judgments by judge-sim"):
        run_blame(RunStore(tmp_path / "empty"), reviewer, judge, contexts)


class Mumbler:
    """A reviewer whose answers never have the four lines."""

    name = "mumbler"

    async def acomplete(self, request, model):
        return Response(text="It is hard to say who.", usage=Usage(), backend=self.name, model=model,
                        latency_s=0.0)


def test_an_unreadable_answer_is_asked_again_then_stored_as_missing(planted, tmp_path):
    _, store, contexts, judge, _, _, _ = planted
    client = LLMClient(Mumbler(), progress=False, use_cache=False)
    mumbler = Role.served(ModelSpec("mumbler", "mumbler"), client)
    other = RunStore(tmp_path / "mumbled")
    other.extend(store.read(Dialogue)[:2])
    kept = {d.id for d in other.read(Dialogue)}
    other.extend(j for j in store.read(Judgment) if j.dialogue_id in kept)
    run_blame(other, mumbler, judge, contexts, BlameConfig(which="all"))
    blames = other.read(Blame)
    assert {b.status for b in blames} == {"missing"} and {b.attempts for b in blames} == {2}
    assert all("no PARTY" in b.explanation for b in blames)


def test_the_answer_parser_reads_the_form_and_names_what_is_wrong():
    found = parse_review("PARTY: user agent\nFAULT: ended early\nTURN: 3\nEXPLANATION: It quit.")
    assert (found.party, found.fault, found.turn) == ("user_agent", "ended_early", 3)
    assert parse_review("**PARTY:** nobody\nFAULT: none\nTURN: none\nEXPLANATION: Fine.").turn is None
    with pytest.raises(UnreadableAnswer, match="FAULT of the judge"):
        parse_review("PARTY: judge\nFAULT: ignored_user\nTURN: 2\nEXPLANATION: x")
    with pytest.raises(UnreadableAnswer, match="PARTY must be"):
        parse_review("PARTY: the weather\nFAULT: none\nTURN: none\nEXPLANATION: x")


def test_rates_per_assistant_and_user_agent_count_the_reviews(planted):
    frame = blame_frame(planted[1], reviewer_model="reviewer-sim")
    rates = blame_rates(frame)
    data = rates.frame
    assert list(data["Role"]) == ["Assistant"] * 3 + ["User agent"]
    ignoring = data[data["Model"] == IGNORING].iloc[0]
    assert ignoring["Reviewed"] == 24 and ignoring["Assistant (%)"] >= 100 * AT_LEAST
    shares = data[[c for c in data.columns if c.endswith("(%)")]].sum(axis=1)
    assert shares.to_numpy() == pytest.approx([100.0] * len(data))
    assert "offline" in rates.caption and "never the judge" in rates.caption


def test_table3_without_user_faults_leaves_out_exactly_the_dialogues_blamed_on_the_user(planted):
    store = planted[1]
    frame = blame_frame(store, reviewer_model="reviewer-sim")
    tidy = load_scores(store, judge_model="judge-sim")
    result = table3_without_user_faults(tidy, frame)
    data = result.data
    users = set(frame.loc[frame["party"] == "user_agent", "dialogue_id"])
    for row in data.itertuples(index=False):
        cell = tidy[(tidy["assistant_model"] == row.assistant_model) & (tidy["task_type"] == row.task_type)
                    & (tidy["dimension"] == row.dimension) & tidy["score"].notna()]
        assert row.n == len(cell)
        assert row.n_kept == len(cell[~cell["dialogue_id"].isin(users)])
    only = data[data["assistant_model"] == DIALOGUE_ONLY]
    assert (only["n_kept"] < only["n"]).all()
    assert "blamed on the user agent" in result.caption and "offline" in result.caption


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex not found")
def test_the_blame_tables_print_at_their_natural_size(planted, tmp_path):
    store = planted[1]
    frame = blame_frame(store, reviewer_model="reviewer-sim")
    blame_rates(frame).save(tmp_path, OutputId("table", "V2", "blame_rates"))
    table3_without_user_faults(load_scores(store, judge_model="judge-sim"), frame).save(
        tmp_path, OutputId("table", "V3", "table3_without_user_faults"))
    tables = sorted((tmp_path / "tables").glob("*.tex"))
    assert len(tables) == 2
    assert {t.name: compile_problems(t) for t in tables} == {t.name: [] for t in tables}


def test_the_session_resolves_the_reviewer_like_the_judge(planted, tmp_path):
    bench, store, _, _, _, _, _ = planted
    folder = save_benchmark(bench, tmp_path / "bench")
    same = SessionConfig(benchmark_dir=folder, run_dir=store.root, output_dir=tmp_path / "out",
                         models={"judge_model": "judge-sim", "reviewer_model": "offline:judge-sim"})
    with Session.open(same) as session, pytest.raises(ReviewerIsJudge, match="is the judge under review"):
        run_blame(session.run_store, session.role("reviewer_model"), session.role("judge_model"),
                  benchmark_contexts(session.benchmark))
    other = replace(same, models={"judge_model": "judge-sim", "reviewer_model": "reviewer-sim"})
    with Session.open(other) as session:
        report = run_blame(session.run_store, session.role("reviewer_model"), session.role("judge_model"),
                           benchmark_contexts(session.benchmark), BlameConfig(which="all"))
    assert report.planned == 0 and report.already_done == 72  # the fixture's reviews, found again


def test_scenarios_blamed_on_the_user_agent_are_simulated_again_as_a_new_sample(planted, tmp_path):
    bench, store, _, judge, _, quitters, _ = planted
    again = RunStore(tmp_path / "again")
    again.extend(store.read(Dialogue))
    frame = blame_frame(store, reviewer_model="reviewer-sim")
    config = SimulationConfig(assistant_model=DIALOGUE_ONLY, user_model="user-sim")
    report = resimulate_user_faults(bench, again, judge.client, frame, config)
    fresh = [d for d in again.read(Dialogue) if d.sample == 1]
    blamed = frame[frame["party"] == "user_agent"]
    assert quitters <= set(blamed["dialogue_id"])
    assert report.finished == len(fresh) == len(blamed)
    assert {d.scenario_id for d in fresh} == set(blamed["scenario_id"])
    assert all(len([t for t in d.turns if t.role == "user" and t.content.strip()]) > 1 for d in fresh)
    assert resimulate_user_faults(bench, again, judge.client, frame, config).planned == 0
    nobody = resimulate_user_faults(bench, again, judge.client, frame, replace(config, assistant_model=CLEAN))
    assert nobody.planned == 0 and "no failure blamed" in nobody.details["why"]


class Reader:
    """A reviewer model that keeps every prompt it is sent and answers nobody."""

    name = "reader"

    def __init__(self):
        self.prompts: list[str] = []

    async def acomplete(self, request, model):
        self.prompts.append("".join(m.content for m in request.messages))
        return Response(text="PARTY: nobody\nFAULT: none\nTURN: none\nEXPLANATION: Fine.", usage=Usage(),
                        backend=self.name, model=model, latency_s=0.0)


def test_a_model_reviewer_reads_the_numbered_conversation_and_the_judges_reasons(planted, tmp_path):
    _, store, contexts, judge, _, _, _ = planted
    reader = Reader()
    role = Role.served(ModelSpec("reader", "reader"), LLMClient(reader, progress=False, use_cache=False))
    other = RunStore(tmp_path / "read")
    first = store.read(Dialogue)[0]
    other.append(first)
    verdicts = [j for j in store.read(Judgment) if j.dialogue_id == first.id]
    other.extend(verdicts)
    run_blame(other, role, judge, contexts, BlameConfig(which="all"))
    (prompt,) = reader.prompts
    assert f"[1] USER: {first.turns[0].content}" in prompt
    explanation = next(j.explanation for j in verdicts if j.dimension == "task_completion")
    assert " ".join(explanation.split()) in prompt and "PARTY:" in prompt
    assert [b.party for b in other.read(Blame)] == ["nobody"]
