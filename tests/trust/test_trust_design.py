"""Notebook 07's probe design, its judging and the card's probe figure (trust.probe_design, trust.figures).

The reference assistants are simulated offline on a tiny benchmark of five users; two offline judges
(the offline backend under two judge names) judge and probe the dialogues of the design: two SD tasks
and the MD task of each of the first three users.
"""

from __future__ import annotations

import pytest
from support.fake_server import FakeLLMServer
from support.figures import overlaps_and_overflows
from support.pdf import POINTS_PER_INCH, font_sizes, font_subtypes, page_size
from support.scripted_models import scripted_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants import resolve_assistant
from personalens_utils.assistants.reference_assistants import DESIGNED_ORDER
from personalens_utils.judging import JudgingConfig, benchmark_contexts
from personalens_utils.llm.client import Clients, LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.llm.specs import ModelSpec, SpecError
from personalens_utils.measures.design import DesignError
from personalens_utils.measures.scores import load_scores
from personalens_utils.outputs import plots
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.records import Dialogue, Judgment, ProbeJudgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.trust.figures import probe_figure
from personalens_utils.trust.power import plan_study
from personalens_utils.trust.probe_design import (
    DesignSize,
    ProbeDesign,
    judge_design,
    judge_ref,
    simulate_design,
    unit_costs,
)
from personalens_utils.trust.probes import Padding, ProfileSwap
from personalens_utils.trust.report_card import NOT_MEASURED, CardError, CardSettings, report_card, verdicts
from personalens_utils.trust.variance import variance_table

USER = "user-sim"


SMALL = DesignSize(3, 2)


def _design(bench, size=SMALL, assistants=None) -> ProbeDesign:
    return ProbeDesign.sample(bench, ("SD", "MD"), size, setting="base", user_model=USER, prompt_set="kit",
                              assistants=assistants)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    bench = tiny_benchmark(n_users=5)
    store = RunStore(tmp_path_factory.mktemp("design") / "store")
    client = LLMClient("offline", progress=False)
    for model in DESIGNED_ORDER:
        run_simulation(bench, store, client, SimulationConfig(assistant_model=model, user_model=USER))
    judges = [Role.served(ModelSpec("offline", name), client) for name in ("judge-sim", "judge-two")]
    design = _design(bench)
    probes = [ProfileSwap(bench), Padding()]
    config = JudgingConfig(select=design.select)
    reports = judge_design(store, judges, benchmark_contexts(bench), probes, config)
    again = judge_design(store, judges, benchmark_contexts(bench), probes, config)
    return bench, store, judges, design, reports, again


def test_the_design_is_the_first_users_and_a_seeded_choice_of_their_tasks(world):
    bench, store, *_ = world
    design = _design(bench)
    assert design.users == (0, 1, 2)
    chosen = sorted(design.scenarios)
    assert len(chosen) == 3 * 3  # two of each user's three SD tasks, its one MD task
    assert chosen == sorted(_design(bench).scenarios)
    others = {frozenset(_design(bench, DesignSize(3, 2, seed=s)).scenarios) for s in range(8)}
    assert len(others) > 1, "the seed chooses the tasks"
    assert len(_design(bench, DesignSize(None, None)).scenarios) == len(bench.scenarios)
    one = _design(bench, assistants=[DESIGNED_ORDER[0]])
    kept = [d for d in store.read(Dialogue) if one.select(d)]
    assert {d.assistant_model for d in kept} == {DESIGNED_ORDER[0]} and len(kept) == 9
    for bad in ({"users": 1}, {"users": 2.5}, {"tasks": 0}, {"tasks": True}):
        with pytest.raises(DesignError, match="parameter probe_"):
            DesignSize(**bad)
    with pytest.raises(DesignError, match="two or more users"):
        _design(tiny_benchmark(n_users=1))


def test_each_judge_judges_and_probes_the_design_only_and_a_rerun_calls_nothing(world):
    _, store, judges, design, reports, again = world
    inside = [d for d in store.read(Dialogue) if design.select(d)]
    assert 0 < len(inside) < len(store.read(Dialogue))
    # per judge: ordinary judging of the four assistant dimensions, then TC and P swapped, then four padded
    assert [r.stored for r in reports] == [n * len(inside) for n in (4, 2, 4)] * len(judges)
    assert all(r.stored == 0 and r.calls == 0 for r in again)
    probed = store.read(ProbeJudgment)
    assert {p.dialogue_id for p in probed} == {d.id for d in inside}
    assert {p.judge_model for p in probed} == {"judge-sim", "judge-two"}


def test_the_card_rests_on_the_design_alone(world):
    _, store, judges, design, _, _ = world
    refs = [judge_ref(j, "kit") for j in judges]
    card = report_card(store, refs, select=design.select, settings=CardSettings(n_resamples=200))
    inside = sum(design.select(d) for d in store.read(Dialogue))
    rows = card.frame.set_index(["judge", "check"])
    assert rows.loc[(refs[0].label, "profile counterfactual (P drops)"), "n"] == inside
    assert rows.loc[(refs[0].label, "known order (P)"), "n"] == inside
    assert rows.loc[(refs[0].label, "agreement with judge-two (offline) (P)"), "n"] == inside
    assert card.source.n == inside
    assert verdicts(card)[refs[0].label]["profile counterfactual (P drops)"] == "pass"


def test_the_probe_figure_is_print_ready_at_both_widths(world, tmp_path):
    _, store, judges, design, _, _ = world
    refs = [judge_ref(j, "kit") for j in judges]
    card = report_card(store, refs, select=design.select, settings=CardSettings(n_resamples=200))
    figure = probe_figure(card)
    assert set(figure.data["check"]) == {c for c in card.frame["check"]
                                         if c.startswith(("profile counterfactual", "length sensitivity"))}
    assert "offline" in figure.caption.lower()
    paths = figure.save(tmp_path, OutputId("figure", "T1", "probe_checks"))
    assert paths["pdf"].name == "figureT1_probe_checks.pdf" and paths["pdf_text"].is_file()
    widths = {round(w * POINTS_PER_INCH, 1) for w in plots.current_style().widths}
    for pdf in (paths["pdf"], paths["pdf_text"]):
        data = pdf.read_bytes()
        assert round(page_size(data)[0], 1) in widths
        assert "Type3" not in font_subtypes(data)
        assert min(font_sizes(data)) >= plots.MIN_FONT_PT
    assert overlaps_and_overflows(figure.figure) == []
    assert overlaps_and_overflows(figure.at("text")) == []


def test_a_card_without_probes_has_no_probe_figure(world, tmp_path):
    _, store, judges, design, _, _ = world
    plain = RunStore(tmp_path / "plain")
    plain.extend(store.read(Dialogue))
    plain.extend(store.read(Judgment))
    card = report_card(plain, [judge_ref(judges[0], "kit")], select=design.select,
                       settings=CardSettings(n_resamples=50))
    with pytest.raises(CardError, match="no measured probe check"):
        probe_figure(card)
    with pytest.raises(CardError, match="no judgments of the dialogues `select` keeps by"):
        report_card(store, [judge_ref(judges[0], "kit")], select=lambda d: d.user_id == 4)


@pytest.fixture(scope="module")
def repeated(tmp_path_factory):
    """Notebook 07's repeats on the design: two assistants, their dialogues (sample 0) made first, then
    the design simulated with repeats=2 and judged with judge_samples=2 by one offline judge."""
    bench = tiny_benchmark(n_users=4)
    store = RunStore(tmp_path_factory.mktemp("repeats") / "store")
    session = Clients("offline", progress=False)
    client = session.client(ModelSpec("offline", USER))
    pair = list(DESIGNED_ORDER[:2])
    for model in pair:
        run_simulation(bench, store, client, SimulationConfig(assistant_model=model, user_model=USER))
    design = _design(bench, assistants=pair)
    user = Role.served(ModelSpec("offline", USER), client)
    assistants = [resolve_assistant(name, session) for name in pair]
    simulated = simulate_design(bench, store, user, assistants, design, SimulationConfig(repeats=2))
    judge = Role.served(ModelSpec("offline", "judge-sim"), client)
    config = JudgingConfig(select=design.select, judge_samples=2)
    reports = judge_design(store, [judge], benchmark_contexts(bench), [ProfileSwap(bench), Padding()], config)
    again = simulate_design(bench, store, user, assistants, design, SimulationConfig(repeats=2))
    return bench, store, session, design, judge, simulated, reports, again


def test_repeats_simulate_only_the_new_samples_and_probes_judge_the_first_once(repeated):
    _, store, _, design, _, simulated, reports, again = repeated
    scenarios = len(design.scenarios)
    assert [(r.finished, r.already_done) for r in simulated] == [(scenarios, scenarios)] * 2
    assert all(r.finished == 0 and r.calls == 0 for r in again)
    # a user agent on another backend holds no sample 0 of the design: nothing is started over there
    bench, _, session = repeated[:3]
    elsewhere = Role.served(ModelSpec("anthropic", USER), LLMClient("offline", progress=False))
    assistants = [resolve_assistant(name, session) for name in sorted(design.assistants)]
    assert simulate_design(bench, store, elsewhere, assistants, design, SimulationConfig(repeats=2)) == []
    inside = [d for d in store.read(Dialogue) if design.select(d)]
    assert sorted({d.sample for d in inside}) == [0, 1] and len(inside) == 2 * 2 * scenarios
    assert reports[0].finished == 2 * 4 * len(inside)  # two judge samples of four dimensions, all new
    probed = store.read(ProbeJudgment)
    first = {d.id for d in inside if d.sample == 0}
    assert {p.dialogue_id for p in probed} == first and {p.sample for p in probed} == {0}


def test_judge_samples_measure_self_consistency_and_the_decomposition_and_the_plan(repeated):
    _, store, session, design, judge, simulated, reports, _ = repeated
    card = report_card(store, [judge_ref(judge, "kit")], select=design.select,
                       settings=CardSettings(n_resamples=100))
    consistency = card.frame[card.frame["check"].str.startswith("self-consistency")]
    assert len(consistency) == 2 and NOT_MEASURED not in set(consistency["verdict"])
    scores = design.scores(load_scores(store, judge_model="judge-sim", user_model=USER))
    assert set(scores["sample"]) == {0, 1} and set(scores["judge_sample"]) == {0, 1}
    long = variance_table(scores).data
    assert (long["merged_into"] == "").all() and long["df"].gt(0).all()
    costs = unit_costs(session.usage_frame(), simulated, reports[0], judge)
    assert costs is not None and costs.dialogue["calls"].sum() > 0 and costs.judge_sample["calls"].sum() > 0
    assert set(costs.judge_sample["model"]) == {judge.client.resolve_model("judge-sim")}
    assert unit_costs(session.usage_frame(), [], reports[0], judge) is None
    pair = sorted(design.assistants)
    study = plan_study(scores, treatment=pair[1], control=pair[0], costs=costs)
    reading = study.reading()
    assert f"P of {pair[1]} minus {pair[0]}" in reading and "users x 10 tasks" in reading
    assert "USD 0.00" in reading  # offline calls cost nothing, and the plan says what it priced


def test_a_python_assistants_repeats_are_its_own_and_its_first_samples_are_not_made_again(tmp_path):
    bench = tiny_benchmark(n_users=3)
    store = RunStore(tmp_path / "store")
    session = Clients("offline", progress=False)
    client = session.client(ModelSpec("offline", USER))
    mine = resolve_assistant("python:support.assistants:Recorder", session)
    run_simulation(bench, store, client, SimulationConfig(assistant_model=mine.model, user_model=USER,
                                                          assistant=mine))
    design = _design(bench, SMALL, assistants=[mine.model])
    specs = design.assistant_specs(store)
    assert specs == {mine.model: "python:support.assistants:Recorder"}
    again = [resolve_assistant(specs[name], session) for name in design.assistant_models(store)]
    user = Role.served(ModelSpec("offline", USER), client)
    simulate_design(bench, store, user, again, design, SimulationConfig(repeats=2))
    inside = [d for d in store.read(Dialogue) if design.select(d)]
    assert {d.assistant_backend for d in inside} == {"python"}
    assert sorted((d.scenario_id, d.sample) for d in inside) == sorted(
        (scenario, sample) for scenario in design.scenarios for sample in (0, 1))


def test_a_served_models_repeats_go_to_its_server_under_its_stored_name(tmp_path, monkeypatch):
    """Notebook 07 gets the name records carry ('served-model'), not the spec 03 got: read as a bare name
    it was simulated again on the offline backend, two dialogues of one sample per scenario in one arm."""
    bench = tiny_benchmark(n_users=3)
    store = RunStore(tmp_path / "store")
    session = Clients("offline", progress=False)
    client = session.client(ModelSpec("offline", USER))
    user = Role.served(ModelSpec("offline", USER), client)
    with FakeLLMServer(reply=scripted_reply) as server:
        monkeypatch.setenv("PL_TRUST_URL", f"{server.url}/v1")
        served = resolve_assistant("openai@PL_TRUST_URL:served-model", session)
        run_simulation(bench, store, client, SimulationConfig(assistant_model=served.model, user_model=USER,
                                                              assistant=served))
        design = _design(bench, SMALL, assistants=["served-model"])
        specs = design.assistant_specs(store)
        assert specs == {"served-model": "openai@PL_TRUST_URL:served-model"}
        again = [resolve_assistant(specs[name], session) for name in design.assistant_models(store)]
        simulate_design(bench, store, user, again, design, SimulationConfig(repeats=2))
    inside = [d for d in store.read(Dialogue) if design.select(d)]
    assert {(d.assistant_backend, d.assistant_model_id) for d in inside} == {("openai", served.model_id)}
    assert sorted((d.scenario_id, d.sample) for d in inside) == sorted(
        (scenario, sample) for scenario in design.scenarios for sample in (0, 1))
    offline = resolve_assistant("offline:served-model", session)  # another assistant under that name
    with pytest.raises(DesignError, match="first samples of that name were made by"):
        simulate_design(bench, store, user, [offline], design, SimulationConfig(repeats=2))
    monkeypatch.delenv("PL_TRUST_URL")
    with pytest.raises(SpecError, match="no environment variable holds that address"):
        design.assistant_specs(store)
