"""Notebook 07's probe design, its judging and the card's probe figure (trust.probe_design, trust.figures).

The reference assistants are simulated offline on a tiny benchmark of five users; two offline judges
(the offline backend under two judge names) judge and probe the dialogues of the design: two SD tasks
and the MD task of each of the first three users.
"""

from __future__ import annotations

import pytest
from support.pdf import font_sizes, font_subtypes, page_size
from test_figure_export import POINTS_PER_INCH, overlaps_and_overflows
from test_simulation_support import tiny_benchmark

from personalens_utils import plots
from personalens_utils.assistants.reference import DESIGNED_ORDER
from personalens_utils.judging import JudgingConfig, benchmark_contexts
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.records import Dialogue, Judgment
from personalens_utils.roles import ModelRole
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.store import RunStore
from personalens_utils.trust.design import DesignError
from personalens_utils.trust.figures import probe_figure
from personalens_utils.trust.probe_design import DesignSize, ProbeDesign, judge_design, judge_ref
from personalens_utils.trust.probes import Padding, ProbeJudgment, ProfileSwap
from personalens_utils.trust.report_card import CardError, CardSettings, report_card, verdicts

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
    judges = [ModelRole(ModelSpec("offline", name), client) for name in ("judge-sim", "judge-two")]
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
    paths = figure.save(tmp_path, "T1", "probe_checks")
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
