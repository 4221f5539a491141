"""Dialogues in the official output layout: export, import, and both round trips."""

from __future__ import annotations

import dataclasses
import json
import re
from types import SimpleNamespace

import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.export.official import (
    KIT_KEY,
    OFFICIAL_KEYS,
    OfficialExportError,
    OfficialLayoutError,
    dialogue_path,
    export_official,
    import_official,
    import_official_run,
    model_folder,
    parse_model_folder,
    plan_export,
)
from personalens_utils.judging import score_under
from personalens_utils.llm.client import LLMClient
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.run_card import read_card
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import PAPER_SETTINGS, AssistantSetting, SimulationConfig, run_simulation


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark()


@pytest.fixture(scope="module")
def simulated(bench, tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    run_simulation(bench, run, LLMClient("offline", progress=False),
                   SimulationConfig(settings=list(PAPER_SETTINGS)))
    return RunStore(run)


@pytest.mark.parametrize(("setting", "folder"), [
    ("base", "claude-3-sonnet-v1"), ("base+D", "claude-3-sonnet-v1_d"), ("base+I", "claude-3-sonnet-v1_p"),
    ("base+S", "claude-3-sonnet-v1_s"), ("base+D+S", "claude-3-sonnet-v1_d_s"),
    ("base+all", "claude-3-sonnet-v1_d_p_s"), ("vanilla", "claude-3-sonnet-v1_vanilla"),
])
def test_model_folder_names(setting, folder):
    assert model_folder("claude-3-sonnet-v1", setting) == folder
    assert parse_model_folder(folder) == ("claude-3-sonnet-v1", AssistantSetting.parse(setting))


def test_export_then_import_gives_identical_records(simulated, bench, tmp_path):
    records = simulated.read(Dialogue)
    with pytest.raises(OfficialExportError, match="setting 'vanilla'"):
        export_official(simulated, tmp_path, benchmark=bench)
    assert not (tmp_path / "output").exists()
    paths = export_official(simulated, tmp_path, benchmark=bench, allow_unofficial=True)
    assert len(paths) == len(records) == 12 * len(PAPER_SETTINGS)
    assert {p.parent.name for p in paths} == {
        "claude-3-sonnet-v1", "claude-3-sonnet-v1_vanilla", "claude-3-sonnet-v1_d", "claude-3-sonnet-v1_p",
        "claude-3-sonnet-v1_s", "claude-3-sonnet-v1_d_p_s"}
    sample = json.loads(paths[0].read_text())
    assert list(sample)[: len(OFFICIAL_KEYS)] == list(OFFICIAL_KEYS)
    scenario = bench.scenario(f"user{sample['user_id']}/{sample['task_id']}")
    assert sample["task_description"] == scenario.user_intent
    assert paths[0].relative_to(tmp_path).parts[:3] == ("output", "dialogue", f"user{sample['user_id']}")
    back = import_official(tmp_path)
    assert sorted(back, key=lambda r: r.id) == sorted(records, key=lambda r: r.id)
    assert sorted(json.dumps(r.to_json()) for r in back) == sorted(
        json.dumps(r.to_json()) for r in records)  # same key order too


def test_import_into_a_store_skips_what_it_already_holds(simulated, tmp_path):
    export_official(simulated, tmp_path / "out", allow_unofficial=True)
    store = RunStore(tmp_path / "run")
    first = import_official(tmp_path / "out" / "output" / "dialogue", into=store)
    import_official(tmp_path / "out", into=store)
    assert len(store.records(Dialogue)) == len(first)
    path = dialogue_path(tmp_path / "out", first[0])
    data = json.loads(path.read_text())
    data[KIT_KEY]["retries"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="different dialogue"):
        import_official(tmp_path / "out", into=store)
    data[KIT_KEY]["n_turns"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(OfficialLayoutError, match="'n_turns' is 99 but the turns hold"):
        import_official(tmp_path / "out", into=store)


def official_file(root, user=3, folder="claude-3-haiku-v1_p", task="SD-Movies-task-2", **changes):
    data = {
        "user_id": user, "task_id": task, "task_description": "Find a movie for the weekend.",
        "user_model": "claude-3-haiku-v1", "assistant_model": "claude-3-haiku-v1",
        "dialogue": [{"role": "user", "content": "Any good films on?"},
                     {"role": "assistant", "content": "Sure! Do you like thrillers?"},
                     {"role": "user", "content": "Yes, thrillers please."},
                     {"role": "assistant", "content": "Then try the new Nolan film."}],
    }
    data.update(changes)
    path = root / "output" / "dialogue" / f"user{user}" / folder / f"{task}_dialogue.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4))
    return path, data


def test_files_from_other_tools_import_and_export_back_unchanged(tmp_path):
    path, original = official_file(tmp_path)
    official_file(tmp_path, task="MD-task-4", task_id="MD-task-4", folder="claude-3-haiku-v1",
                  dialogue=original["dialogue"][:3])
    records = import_official(tmp_path)
    by_task = {r.task_id: r.to_json() for r in records}
    movie = by_task["SD-Movies-task-2"]
    assert movie["status"] == "terminated" and movie["n_turns"] == 2
    assert movie["assistant_setting"] == "base+I" and movie["domains"] == ["Movies"]
    assert movie["backend"] == "imported" and movie["prompt_version"] == "official"
    assert by_task["MD-task-4"]["status"] == "turn_cap"
    assert by_task["MD-task-4"]["assistant_setting"] == "base"

    # stands in for a benchmark: export only reads scenario ids and intents
    intents = SimpleNamespace(scenarios={"scenario_id": ["user3/SD-Movies-task-2"],
                                         "user_intent": [original["task_description"]]})
    export_official(records, tmp_path / "again", benchmark=intents, allow_unofficial=True)
    written = json.loads((tmp_path / "again" / path.relative_to(tmp_path)).read_text())
    assert {k: written[k] for k in OFFICIAL_KEYS} == original
    assert import_official(tmp_path / "again") == records


@pytest.mark.parametrize(("changes", "message"), [
    ({"user_id": 4}, "does not match folder user3"),
    ({"task_id": "SD-Movies-task-9"}, "does not match the file name"),
    ({"dialogue": []}, "non-empty list"),
    ({"dialogue": [{"role": "assistant", "content": "hi"}]}, "expected 'user'"),
    ({"dialogue": [{"role": "user", "content": 3}]}, "must be a string"),
    ({"dialogue": [{"role": "user", "text": "hi"}]}, "'role' and 'content'"),
])
def test_malformed_files_are_named_in_the_error(tmp_path, changes, message):
    path, _ = official_file(tmp_path, **changes)
    with pytest.raises(OfficialLayoutError, match=message) as info:
        import_official(tmp_path)
    assert info.value.path == path


def test_unreadable_json_and_bad_folders(tmp_path):
    path, _ = official_file(tmp_path)
    path.write_text("{not json")
    with pytest.raises(OfficialLayoutError, match="not a readable JSON"):
        import_official(tmp_path)
    with pytest.raises(OfficialLayoutError, match="no such folder"):
        import_official(tmp_path / "missing")


def test_export_refuses_two_dialogues_for_one_file(simulated, tmp_path):
    record = simulated.read(Dialogue)[0]
    twin = dataclasses.replace(record, id="", user_model="another-user-model")
    with pytest.raises(ValueError, match="would both be written"):
        export_official([record, twin], tmp_path, allow_unofficial=True)
    assert not (tmp_path / "output").exists()


def test_export_leaves_out_errors_unless_asked(simulated, tmp_path):
    record = dataclasses.replace(simulated.read(Dialogue)[0], status="error", error="RetryableError: 529")
    assert export_official([record], tmp_path) == []
    assert len(export_official([record], tmp_path, include_errors=True, allow_unofficial=True)) == 1


def only(store, setting, users=(0, 1, 2)):
    return [r for r in store.read(Dialogue) if r.assistant_setting == setting and r.user_id in users]


def test_export_of_what_the_official_scripts_read_plans_their_commands(simulated, bench, tmp_path):
    records = only(simulated, "base") + only(simulated, "base+all", users=(0, 2))
    plan = plan_export(records, tmp_path, benchmark=bench)
    assert plan.ok and not (tmp_path / "output").exists()
    assert plan.runs == [("claude-3-sonnet-v1", "MD", 0, 2), ("claude-3-sonnet-v1", "SD", 0, 2),
                         ("claude-3-sonnet-v1_d_p_s", "MD", 0, 0), ("claude-3-sonnet-v1_d_p_s", "MD", 2, 2),
                         ("claude-3-sonnet-v1_d_p_s", "SD", 0, 0), ("claude-3-sonnet-v1_d_p_s", "SD", 2, 2)]
    assert plan.commands()[0] == ("python -m src.evaluate_dialogue -s 0 -e 2 -m claude-3-sonnet-v1 "
                                  "-d personalization -md")
    paths = export_official(records, tmp_path, benchmark=bench)
    assert sorted(paths) == sorted(plan.files)
    written = json.loads(paths[0].read_text())
    assert (written["user_model"], written["assistant_model"]) == ("claude-3-sonnet-v1", "claude-3-sonnet-v1")
    assert written[KIT_KEY]["assistant_model"] == "Claude 3 Sonnet"


@pytest.mark.parametrize(("change", "message"), [
    ({"assistant_setting": "vanilla"}, "setting 'vanilla': the official generator has flags only for"),
    ({"assistant_setting": "base+D+S"}, "setting 'base+D+S'"),
    ({"assistant_model": "ref-follows-setting"},
     "assistant 'ref-follows-setting' has no official short name"),
])
def test_export_refuses_what_the_official_code_cannot_express(simulated, bench, tmp_path, change, message):
    records = [dataclasses.replace(r, id="", **change) for r in only(simulated, "base")]
    with pytest.raises(OfficialExportError, match=re.escape(message)) as info:
        export_official(records, tmp_path, benchmark=bench)
    assert len(info.value.problems) == 1 and "nothing was written" in str(info.value)
    assert not (tmp_path / "output").exists()
    plan = plan_export(records, tmp_path, benchmark=bench)
    assert not plan.ok and message in plan.describe()


def test_export_refuses_a_partial_task_set_before_the_official_evaluator_crashes_on_it(
        simulated, bench, tmp_path):
    records = [r for r in only(simulated, "base") if r.scenario_id != "user1/SD-Movies-task-1"]
    with pytest.raises(OfficialExportError, match=re.escape(
            "claude-3-sonnet-v1: user 1 lacks 1 of its 3 SD tasks (SD-Movies-task-1); the official evaluator "
            "opens every task of the user")):
        export_official(records, tmp_path, benchmark=bench)
    with pytest.raises(OfficialExportError, match="no benchmark given"):
        export_official(only(simulated, "base"), tmp_path)
    errored = [dataclasses.replace(r, status="error", error="RetryableError: 529")
               if r.scenario_id == "user2/SD-Alarm-task-1" else r for r in only(simulated, "base")]
    with pytest.raises(OfficialExportError, match="user 2 lacks 1 of its 3 SD tasks"):
        export_official(errored, tmp_path, benchmark=bench)
    assert not (tmp_path / "output").exists()
    assert len(export_official(records, tmp_path, benchmark=bench, allow_unofficial=True)) == len(records)


def evaluation_file(root, folder="claude-3-haiku-v1_p", dimension="personalization",
                    judge="claude-3-5-sonnet-v2", name="SD-Movies-task-2.txt",
                    text="Personalization Score: 3\nJustification: fine"):
    path = root / "output" / "evaluation" / "user3" / folder / dimension / judge / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_official_evaluations_import_with_their_judge_and_both_readings(tmp_path):
    official_file(tmp_path)
    evaluation_file(tmp_path)
    evaluation_file(tmp_path, dimension="naturalness", name="SD-Movies-task-2_asst.txt",
                    text="**Naturalness score:** 4")
    evaluation_file(tmp_path, dimension="task_completion", judge="claude-3-sonnet-v1",
                    text="VERDICT:True\nEXPLANATION: done")
    store = RunStore(tmp_path / "run")
    run = import_official_run(tmp_path, into=store, user_model="claude-3-sonnet-v1")
    (dialogue,) = run.dialogues
    assert (dialogue.user_model, dialogue.user_model_id) == ("Claude 3 Sonnet", "claude-3-sonnet-v1")
    assert (dialogue.assistant_model, dialogue.assistant_model_id) == ("Claude 3 Haiku", "claude-3-haiku-v1")
    assert dialogue.prompt_set == "official"
    got = {j.dimension: j for j in run.judgments}
    assert {j.dialogue_id for j in got.values()} == {dialogue.id}
    assert (got["task_completion"].judge_model, got["task_completion"].judge_model_id) == (
        "Claude 3 Sonnet", "claude-3-sonnet-v1")
    assert got["personalization"].judge_model_id == "claude-3-5-sonnet-v2"
    assert got["personalization"].raw == "Personalization Score: 3\nJustification: fine"
    readings = {d: (score_under("strict", d, j.status, j.score, j.raw),
                    score_under("official", d, j.status, j.score, j.raw)) for d, j in got.items()}
    assert readings == {"personalization": (3.0, 3.0), "naturalness_assistant": (4.0, None),
                        "task_completion": (1.0, 0.0)}
    assert len(store.read(Judgment)) == 3
    import_official_run(tmp_path, into=store, user_model="claude-3-sonnet-v1")
    assert len(store.read(Judgment)) == 3
    (entry,) = read_card(store.root)["stages"]  # the import is on the store's card, once
    assert entry["stage"] == "official_import" and entry["role"] == {"source": str(tmp_path.resolve())}
    assert entry["assistants"] == ["Claude 3 Haiku"] and "Claude 3 Sonnet" in entry["judges"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"task": "SD-Books-task-1"}, "no dialogue file for this answer"),
    ({"dimension": "fluency"}, "not an official evaluation file"),
    ({"dimension": "naturalness"}, "not an official evaluation file"),
    ({"task": "notes", "dimension": "coherence"}, "not an official evaluation file"),
])
def test_evaluation_files_that_do_not_fit_are_named(tmp_path, kwargs, message):
    official_file(tmp_path)
    task = kwargs.pop("task", "SD-Movies-task-2")
    path = evaluation_file(tmp_path, name=f"{task}.txt", **kwargs)
    with pytest.raises(OfficialLayoutError, match=message) as info:
        import_official_run(tmp_path)
    assert info.value.path == path
