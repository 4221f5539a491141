"""User-agent styles: cooperative keeps every id, line and request it had; another style is an addition to
the user agent's instructions, its own dialogues (id, stored field) and a notebook 03 parameter."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
import papermill
import pytest
from support.records import dialogue, dialogue_json
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import save_benchmark
from personalens_utils.llm import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.measures import scores
from personalens_utils.prompt_sets import KIT, OfficialPromptSet, in_style
from personalens_utils.prompt_sets.context import ScenarioContext
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, USER_STYLES, UserStyleError
from personalens_utils.runstore.identity import Variant, dialogue_id, dialogue_ids, stable_id
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.records.base import RecordError
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "store_v2" / "store" / "dialogues.jsonl"
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "03_simulation.ipynb"
USER, ASSISTANT = Role("user-sim", "offline", "u-id"), Role("assistant", "offline", "a-id")


def test_a_cooperative_dialogue_keeps_the_id_computed_before_styles():
    old = stable_id("s1", "user-sim", "assistant", "base", "v1", "offline", "u-id", "offline", "a-id")
    assert dialogue_id("s1", "base", user=USER, assistant=ASSISTANT, variant=Variant("v1")) == old
    assert dialogue_ids("base", user=USER, assistant=ASSISTANT, variant=Variant("v1"))("s1") == old


@pytest.mark.parametrize("style", sorted(set(USER_STYLES) - {COOPERATIVE}))
def test_another_style_makes_another_dialogue_and_both_id_functions_agree(style):
    styled, variant = replace(USER, style=style), Variant("v1", sample=2)
    made = dialogue_id("s1", "base", user=styled, assistant=ASSISTANT, variant=variant)
    assert made != dialogue_id("s1", "base", user=USER, assistant=ASSISTANT, variant=variant)
    assert dialogue_ids("base", user=styled, assistant=ASSISTANT, variant=variant)("s1") == made


def test_stored_cooperative_lines_read_and_write_as_they_were():
    for line in FIXTURE.read_bytes().splitlines():
        stored = orjson.loads(line)
        record = Dialogue.from_json(stored)
        assert record.user_style == COOPERATIVE and record.identity() == record.id
        assert record.to_json() == stored


def test_a_reticent_dialogue_stores_its_style_and_reads_it_back():
    cooperative = dialogue("x")
    reticent = replace(cooperative, user_style="reticent")
    assert reticent.identity() != cooperative.identity()
    line = reticent.to_json()
    assert line["user_style"] == "reticent" and "user_style" not in cooperative.to_json()
    assert Dialogue.from_json(line) == reticent


def test_a_stored_unknown_style_is_refused_naming_the_field():
    with pytest.raises(RecordError, match=r"field 'user_style' must be one of .*'reticent'.*got 'shy'"):
        Dialogue.from_json(dialogue_json("x", user_style="shy"))


def test_an_unknown_style_is_refused_listing_the_known_ones():
    with pytest.raises(UserStyleError, match="unknown user_style 'shy'; choose one of cooperative, reticent"):
        SimulationConfig(user_style="shy")


def _context() -> ScenarioContext:
    bench = tiny_benchmark(n_users=1)
    scenario = bench.scenario(bench.scenarios["scenario_id"].iloc[0])
    return ScenarioContext.of(scenario, bench.user(scenario.user_id))


def test_a_style_appends_its_instructions_and_names_itself_in_the_context(official_code):
    ctx = _context()
    for prompts in (KIT, OfficialPromptSet.load(official_code)):
        plain = prompts.user_request(ctx, [], "m")
        assert in_style(plain, COOPERATIVE) is plain and "user_style" not in plain.context
        styled = in_style(plain, "reticent")
        assert styled.system == f"{plain.system}\n\n{USER_STYLES['reticent'].instructions}"
        assert styled.system.startswith(plain.system) and styled.messages == plain.messages
        assert styled.context == {**plain.context, "user_style": "reticent"}
        assert prompts.user_request(ctx, [], "m") == plain  # the set's own text is untouched


def test_a_run_under_a_style_is_new_work_and_its_rerun_is_done(tmp_path):
    bench, store = tiny_benchmark(n_users=1), RunStore(tmp_path / "run")
    config = SimulationConfig(task_types=["SD"], assistant_model="ref-dialogue-only")
    run_simulation(bench, store, LLMClient("offline"), config)
    report = run_simulation(bench, store, LLMClient("offline"), replace(config, user_style="reticent"))
    assert report.already_done == 0 and report.finished == 3
    again = run_simulation(bench, store, LLMClient("offline"), replace(config, user_style="reticent"))
    assert again.finished == 0 and again.already_done == 3
    frame = scores.load_dialogues(store)
    assert frame.groupby("user_style", observed=True).size().to_dict() == {COOPERATIVE: 3, "reticent": 3}


@pytest.mark.slow
def test_notebook_03_stores_a_reticent_run_beside_a_cooperative_one(tmp_path):
    save_benchmark(tiny_benchmark(n_users=2), tmp_path / "bench")
    common = {"benchmark_dir": str(tmp_path / "bench"), "run_dir": str(tmp_path / "run"),
              "output_dir": str(tmp_path / "out"), "task_types": ["SD"]}
    for style in (COOPERATIVE, "reticent"):
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / f"{style}.ipynb"), kernel_name="python3",
                                   progress_bar=False, parameters={**common, "user_style": style})
    styles = [d.user_style for d in RunStore(tmp_path / "run").read(Dialogue)]
    assert styles.count(COOPERATIVE) == styles.count("reticent") == 6
