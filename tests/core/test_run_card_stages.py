"""Every stage that writes records into a run store notes its run on the store's run card: the failure
review, the trust probes, the profile-consistency check, generation and PERSONA Bench, each a small
offline run; the card names the stage, its model as asked and resolved, and counts its table."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import reproduce
from personalens_utils.base.paths import LatestRun
from personalens_utils.benchmark_validation.consistency import benchmark_profiles, run_consistency
from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.persona_bench.items import iter_items
from personalens_utils.persona_bench.runner import run_items
from personalens_utils.persona_bench.synthetic import write_synthetic
from personalens_utils.reproduce import StepResult, pipeline
from personalens_utils.reproduce import settings as reproduce_settings
from personalens_utils.runstore import run_card
from personalens_utils.runstore.store import ReproductionStore, RunStore
from personalens_utils.session.parameters import Parameters, SessionConfig
from personalens_utils.session.places import Places
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.trust.probes import Padding, run_probe
from personalens_utils.validity import BlameConfig, run_blame


def _client() -> LLMClient:
    return LLMClient("offline", progress=False, use_cache=False)


def _only_stage(card: dict, stage: str) -> dict:
    found = [entry for entry in card["stages"] if entry["stage"] == stage]
    assert len(found) == 1, card["stages"]
    return found[0]


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """A tiny offline run, simulated and judged: what the review and the probes read."""
    bench = tiny_benchmark(n_users=2)
    store = RunStore(tmp_path_factory.mktemp("judged"))
    with _client() as client:
        run_simulation(bench, store, client, SimulationConfig(task_types=("SD",), user_model="user-sim",
                                                              assistant_model="Claude 3 Sonnet", limit=2))
        run_judging(store, client, benchmark_contexts(bench), JudgingConfig(judge_model="judge-sim"))
    return bench, store


def test_failure_review_notes_its_reviewer(judged) -> None:
    bench, store = judged
    with _client() as client:
        judge = Role.served(ModelSpec("offline", "judge-sim"), client)
        reviewer = Role.served(ModelSpec("offline", "reviewer-sim"), client)
        report = run_blame(store, reviewer, judge, benchmark_contexts(bench), BlameConfig(which="all"))
    card = run_card.read_card(store.root)
    entry = _only_stage(card, "blame")
    assert entry["role"]["model"] == "reviewer-sim" and entry["role"]["backend"] == "offline"
    assert entry["role"]["model_id"] and entry["reviewed_judges"][0].startswith("judge-sim")
    assert sum(card["counts"]["blames"].values()) == report.finished > 0
    assert card["usage"]["blame"]["calls"] == report.calls
    assert len(card["judges"]) == 1 and len(card["simulations"]) == 1


def test_probe_notes_its_judge_and_probe(judged) -> None:
    bench, store = judged
    probe = Padding()
    with _client() as client:
        report = run_probe(store, client, benchmark_contexts(bench), probe,
                           JudgingConfig(judge_model="judge-sim"))
    card = run_card.read_card(store.root)
    entry = _only_stage(card, f"probe_{probe.name}")
    assert entry["role"]["model"] == "judge-sim" and entry["role"]["backend"] == "offline"
    assert entry["prompt_version"] == f"{probe.name} {probe.version}" and entry["dimensions"]
    assert sum(card["counts"]["probe_judgments"].values()) == report.stored > 0
    assert card["usage"][f"probe_{probe.name}"]["calls"] == report.calls


def test_profile_check_notes_its_checker(tmp_path: Path) -> None:
    profiles = benchmark_profiles(tiny_benchmark(n_users=2))
    with _client() as client:
        checked = run_consistency(client, profiles, model="checker-sim", run_dir=tmp_path)
        run_consistency(client, profiles, model="checker-sim", run_dir=tmp_path)
    card = run_card.read_card(tmp_path)
    entry = _only_stage(card, "validation")
    assert entry["role"]["model"] == "checker-sim" and entry["role"]["backend"] == "offline"
    assert entry["prompt_version"] == checked[0].prompt_version
    assert sum(card["counts"]["consistency"].values()) == len(profiles)
    assert card["usage"]["validation"]["calls"] == len(profiles)  # the second run asked nothing


def test_generation_notes_its_model_and_steps(tmp_path: Path) -> None:
    config = GenerationConfig(n_users=1, seed=3, sd_tasks_per_domain=1, md_tasks=1,
                              domains=("Alarm", "Flights", "Hotels"))
    with _client() as client:
        generate_benchmark(config, client=client, output_dir=tmp_path / "bench", run_dir=tmp_path / "run")
    card = run_card.read_card(tmp_path / "run")
    entry = _only_stage(card, "generation")
    assert entry["role"]["model"] == config.model and entry["role"]["backend"] == "offline"
    assert {"sd_tasks", "md_tasks", "mask", "preferences"} <= set(entry["steps"])
    assert sum(card["counts"]["generation_sd_tasks"].values()) == 3
    assert card["usage"]["generation"]["calls"] > 0


def test_persona_bench_notes_its_model(tmp_path: Path) -> None:
    items = list(iter_items(write_synthetic(tmp_path / "data", 3, seed=5)))
    store = RunStore(tmp_path / "store")
    with _client() as client:
        report = run_items(client, items, store, "claude-3-5-sonnet", limit=4)
    card = run_card.read_card(store.root)
    entry = _only_stage(card, "persona_bench")
    assert entry["role"]["model"] == "claude-3-5-sonnet" and entry["role"]["backend"] == "offline"
    assert sum(card["counts"]["persona_bench"].values()) == report.stored == 4
    assert card["protocol"]["kind"] == "custom"
    summary = run_card.summary(card).set_index("field")
    assert "persona_bench: claude-3-5-sonnet" in summary.loc["stage", "value"]


def _official_run(store: Path) -> None:
    """What notebooks 03 and 04 leave on a store run on the official prompt set with its turn caps."""
    role = run_card.role_entry(Role("m", "offline", "m"))
    simulation = {"prompt_set": "official", "prompt_version": "v", "max_turns": None, "user": role,
                  "assistant": role, "settings": ["base"]}
    run_card.update_card(store, simulation=simulation,
                         judge={**role, "prompt_set": "official", "prompt_version": "v"})


@pytest.mark.parametrize(("scoring", "protocol", "differs"),
                         [("official", "official", []), ("strict", "custom", ["scoring rule 'strict'"])])
def test_reproduction_records_the_scoring_rule_once_its_analysis_ran(monkeypatch, tmp_path: Path,
                                                                     scoring: str, protocol: str,
                                                                     differs: list[str]) -> None:
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path)
    settings = reproduce.parse_args(["--run", "card", "--passes", "generated", "--scoring", scoring])
    analysis_ok = False

    def run(settings, name, folder, params, label="", counter=""):
        if name == "03_simulation":
            _official_run(Path(params["run_dir"]))
        return StepResult(name + label, None, 0.0, analysis_ok or name != "06_analysis", "failed")

    monkeypatch.setattr(pipeline, "run_notebook", run)
    result = reproduce.run_pass(settings, "generated", None)
    assert run_card.read_card(result.folder / "store")["scoring"] == []  # no analysis, no rule read
    analysis_ok = True
    result = reproduce.run_pass(settings, "generated", None)
    card = run_card.read_card(result.folder / "store")
    assert card["scoring"] == [scoring]
    assert card["protocol"] == {"kind": protocol, "differs": differs}


def test_notebook_06_records_its_scoring_only_on_a_store_of_its_own(tmp_path: Path) -> None:
    own = RunStore(tmp_path / "own")
    _official_run(own.root)
    parameters, bench, out = Parameters.read(SessionConfig()), tmp_path / "bench", tmp_path / "out"
    mine = Places(parameters, bench, None, own, out, out)
    assert mine.note_scoring("official")
    assert run_card.read_card(own.root)["protocol"] == {"kind": "official", "differs": []}
    finished = tmp_path / "runs" / "r" / "generated"
    _official_run(finished / "store")
    view = ReproductionStore(finished / "store", tmp_path / "overlay")
    theirs = Places(parameters, bench, None, view, out, out, reproduction=LatestRun(finished, bench))
    assert not theirs.note_scoring("strict")
    assert run_card.read_card(finished / "store")["scoring"] == []
    assert not (tmp_path / "overlay" / run_card.CARD_FILE).exists()


def test_a_stage_that_writes_nothing_through_a_reproduction_view_leaves_its_card_as_it_was(judged, tmp_path):
    """Notebook 04 or 06 on its defaults re-judges nothing: the reproduction's card stays byte for byte."""
    bench, store = judged
    before = (store.root / run_card.CARD_FILE).read_bytes()
    view = ReproductionStore(store.root, tmp_path / "own")
    with _client() as client:
        report = run_judging(view, client, benchmark_contexts(bench), JudgingConfig(judge_model="judge-sim"))
    assert report.finished == 0 and report.calls == 0 and view.root == store.root
    assert (store.root / run_card.CARD_FILE).read_bytes() == before
    assert not (tmp_path / "own").exists()
