"""The data layer on a small hand-made benchmark: reading, the records, samples and every error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.hand_made_benchmark import make_benchmark

from personalens_utils.data import (
    SAMPLES,
    SCENARIO_COLUMNS,
    Benchmark,
    BenchmarkDataError,
    Scenario,
    load_benchmark,
    resolve_users,
)


@pytest.fixture
def bench_dir(tmp_path: Path) -> Path:
    return make_benchmark(tmp_path / "bench")


def _edit(path: Path, change) -> None:
    obj = json.loads(path.read_text(encoding="utf-8"))
    change(obj)
    path.write_text(json.dumps(obj), encoding="utf-8")


def test_loads_records_and_scenarios(bench_dir: Path) -> None:
    bench = load_benchmark(bench_dir)
    assert sorted(bench.users) == [3, 5]
    assert list(bench.tasks) == ["SD-Alarm-task-1", "SD-Alarm-task-2", "SD-Rental Cars-task-1", "MD-task-1"]
    frame = bench.scenarios
    assert list(frame.columns) == list(SCENARIO_COLUMNS)
    assert frame["scenario_id"].tolist() == [
        "user3/SD-Alarm-task-2", "user3/SD-Alarm-task-1", "user3/MD-task-1",
        "user5/SD-Alarm-task-2", "user5/SD-Alarm-task-1", "user5/SD-Rental Cars-task-1", "user5/MD-task-1",
    ]
    assert frame["user_id"].dtype == "int64"
    assert frame["task_type"].tolist() == ["SD", "SD", "MD", "SD", "SD", "SD", "MD"]
    md = frame.iloc[2]
    assert md["domains"] == ["Restaurants", "Music"]
    assert md["relevant_preferences"] == ["Cuisine Preference", "Preferred Genres (Music)"]
    assert (md["location"], md["device"], md["time_of_day"], md["day_of_week"], md["environment"]) == (
        "Oslo", "Phone", "Morning", "Monday", "Quiet")
    assert md["task_goal"] == "Table and playlist chosen."
    assert bench.tasks["MD-task-1"].task_type == "MD" and bench.tasks["MD-task-1"].number == 1
    assert bench.tasks["SD-Rental Cars-task-1"].folder == "Rental Cars"


def test_user_record_and_mask_helpers(bench_dir: Path) -> None:
    user = load_benchmark(bench_dir).user(3)
    assert user.demographics == {"age": "25-34 years old", "gender": "Female"}
    assert user.interests["Rental Cars"] is False and user.active_domains == ["Alarm", "Music", "Restaurants"]
    assert "Rental Cars" in user.preferences and "Rental Cars" not in user.active_preferences()
    assert list(user.active_interactions()) == ["Alarm", "Music", "Restaurants"]
    assert list(user.preferences_for(["Music", "Rental Cars", "Alarm"])) == ["Music", "Alarm"]
    assert user.interactions_for(["Restaurants"]) == {"Restaurants": "Talked about restaurants with user 3."}
    assert user.preferences["Music"]["Preferred Genres"] == ["pop"]


def test_scenario_lookup_and_iteration(bench_dir: Path) -> None:
    bench = load_benchmark(bench_dir)
    scenario = bench.scenario("user5/MD-task-1")
    assert isinstance(scenario, Scenario)
    assert scenario.scenario_id == "user5/MD-task-1" and scenario.task_type == "MD"
    assert scenario.situation["location"] == "Oslo"
    assert set(scenario.task_context()) == {"task_id", "task_type", "domains", "user_intent",
                                            "task_description", "task_goal", "relevant_preferences"}
    assert [s.scenario_id for s in bench.iter_scenarios(["MD"])] == ["user3/MD-task-1", "user5/MD-task-1"]
    with pytest.raises(KeyError, match="user9/MD-task-1"):
        bench.scenario("user9/MD-task-1")
    bench.scenarios = bench.scenarios.iloc[::-1]
    assert bench.scenario("user5/MD-task-1") == scenario
    with pytest.raises(KeyError, match="user 4 is not"):
        bench.user(4)


def test_parent_folder_with_data_and_user_selection(bench_dir: Path) -> None:
    parent = bench_dir.parent
    bench_dir.rename(parent / "data")
    bench = load_benchmark(parent, users=[5])
    assert list(bench.users) == [5] and set(bench.scenarios["user_id"]) == {5}
    assert len(bench.scenarios) == 4


def test_user_selection_errors(bench_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown user sample 'sample_40'"):
        load_benchmark(bench_dir, users="sample_40")
    with pytest.raises(BenchmarkDataError, match=r"no folder for user\(s\) 4, 7") as err:
        load_benchmark(bench_dir, users=[3, 4, 7])
    assert err.value.path == bench_dir / "profile"
    with pytest.raises(BenchmarkDataError, match="no folder for user"):
        load_benchmark(bench_dir, users="sample_30")
    with pytest.raises(TypeError, match="users must be"):
        load_benchmark(bench_dir, users=["user3"])


def test_samples_are_the_papers() -> None:
    assert {name: len(ids) for name, ids in SAMPLES.items()} == {"sample_30": 30, "sample_50": 50,
                                                                "sample_100": 100}
    assert set(SAMPLES["sample_30"]) < set(SAMPLES["sample_50"]) < set(SAMPLES["sample_100"])
    assert resolve_users("sample_30")[:3] == [7, 66, 132]
    assert resolve_users(None) is None and resolve_users([5, 3, 5]) == [3, 5]


def test_not_a_benchmark_folder(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkDataError, match="not a benchmark folder"):
        load_benchmark(tmp_path)


def test_stray_asterisks_around_a_domain_key_are_dropped(bench_dir: Path) -> None:
    def starred(profile: dict) -> None:
        profile["interests"]["Alarm**"] = profile["interests"].pop("Alarm")

    path = bench_dir / "profile" / "user3" / "profile.json"
    _edit(path, starred)
    assert load_benchmark(bench_dir).user(3).interests["Alarm"] is True
    _edit(path, lambda p: p["interests"].update({"Alarm": 0}))
    err = _error(bench_dir)
    assert (err.field, err.problem) == ("interests/Alarm", "names the same domain as 'Alarm**'")


def _error(bench_dir: Path) -> BenchmarkDataError:
    with pytest.raises(BenchmarkDataError) as err:
        load_benchmark(bench_dir)
    return err.value


def test_missing_file(bench_dir: Path) -> None:
    path = bench_dir / "profile" / "user5" / "tasks_md.json"
    path.unlink()
    err = _error(bench_dir)
    assert err.path == path and "file is missing" in str(err) and str(path) in str(err)


def test_missing_definition_file(bench_dir: Path) -> None:
    path = bench_dir / "task" / "Alarm" / "task.jsonl"
    path.unlink()
    err = _error(bench_dir)
    assert err.path == path and "file is missing" in err.problem


def test_invalid_json(bench_dir: Path) -> None:
    path = bench_dir / "profile" / "user3" / "profile.json"
    path.write_text('{"affinities": {', encoding="utf-8")
    err = _error(bench_dir)
    assert err.path == path and err.problem.startswith("invalid JSON")


def test_invalid_json_line_in_definitions(bench_dir: Path) -> None:
    path = bench_dir / "task" / "Multi-Domain" / "task.jsonl"
    path.write_text(path.read_text() + "{oops\n")
    err = _error(bench_dir)
    assert err.path == path and err.field == "line 2" and "invalid JSON" in err.problem


@pytest.mark.parametrize(("file", "change", "field"), [
    ("profile.json", lambda p: p.pop("interests"), "interests"),
    ("profile.json", lambda p: p["demographics"].clear() or p.pop("demographics"), "demographics"),
    ("tasks.json", lambda t: t["Task 2"].pop("Task Goal"), "Task 2/Task Goal"),
    ("tasks.json", lambda t: t["Task 1"]["situations"].pop("Device"), "Task 1/situations/Device"),
    ("tasks_md.json", lambda t: t["Task 1"].pop("task_id"), "Task 1/task_id"),
])
def test_missing_required_key(bench_dir: Path, file: str, change, field: str) -> None:
    path = bench_dir / "profile" / "user5" / file
    _edit(path, change)
    err = _error(bench_dir)
    assert (err.path, err.field, err.problem) == (path, field, "required key is missing")


def test_missing_required_key_in_definition(bench_dir: Path) -> None:
    path = bench_dir / "task" / "Rental Cars" / "task.jsonl"
    path.write_text(json.dumps({"Task Number": 1, "Task Description": "x", "User Intent": "y",
                                "Relevant Affinity Types": []}) + "\n")
    err = _error(bench_dir)
    assert (err.path, err.field, err.problem) == (path, "line 1/Task Goal", "required key is missing")


@pytest.mark.parametrize(("file", "change", "field", "expected"), [
    ("profile.json", lambda p: p["affinities"]["Music"].update({"Preferred Genres": "pop"}),
     "affinities/Music/Preferred Genres", "expected an array of strings, got a string"),
    ("profile.json", lambda p: p["affinities"]["Alarm"].update({"Alarm Sound Preference": ["loud beeping"]}),
     "affinities/Alarm/Alarm Sound Preference", "expected a string, got an array"),
    ("profile.json", lambda p: p["affinities"]["Music"].update({"Favorite Bands": ["x", 3]}),
     "affinities/Music/Favorite Bands/1", "expected a string, got a number"),
    ("profile.json", lambda p: p["interests"].update({"Music": 2}), "interests/Music",
     "expected 0 or 1, got 2"),
    ("profile.json", lambda p: p["interactions"].update({"Music": None}), "interactions/Music",
     "expected a string, got null"),
    ("profile.json", lambda p: p.update({"demographics": ["x"]}), "demographics",
     "expected an object, got an array"),
    ("tasks.json", lambda t: t["Task 1"]["situations"].update({"Location": 12}), "Task 1/situations/Location",
     "expected a string, got a number"),
    ("tasks.json", lambda t: t["Task 1"].update({"Relevant Affinity Types": "Alarm Time Preference"}),
     "Task 1/Relevant Affinity Types", "expected an array of strings, got a string"),
    ("tasks_md.json", lambda t: t["Task 1"].update({"User Intent": {"text": "x"}}), "Task 1/User Intent",
     "expected a string, got an object"),
])
def test_wrong_value_type(bench_dir: Path, file: str, change, field: str, expected: str) -> None:
    path = bench_dir / "profile" / "user5" / file
    _edit(path, change)
    err = _error(bench_dir)
    assert (err.path, err.field, err.problem) == (path, field, expected)


def test_wrong_type_of_task_number(bench_dir: Path) -> None:
    path = bench_dir / "task" / "Alarm" / "task.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1].replace('"Task Number": 2', '"Task Number": "2"') + "\n")
    err = _error(bench_dir)
    assert (err.path, err.field) == (path, "line 2/Task Number") and "positive integer" in err.problem


@pytest.mark.parametrize(("file", "change", "field"), [
    ("profile.json", lambda p: p["affinities"].update({"Cooking": {}}), "affinities/Cooking"),
    ("profile.json", lambda p: p["interests"].update({"Cooking": 1}), "interests/Cooking"),
    ("profile.json", lambda p: p["interactions"].update({"Cooking": "x"}), "interactions/Cooking"),
    ("tasks_md.json", lambda t: t["Task 1"]["Relevant Domains"].append("Cooking"), "Task 1/Relevant Domains"),
])
def test_domain_not_in_schema(bench_dir: Path, file: str, change, field: str) -> None:
    path = bench_dir / "profile" / "user5" / file
    _edit(path, change)
    err = _error(bench_dir)
    assert (err.path, err.field) == (path, field) and "'Cooking' is not in the schema" in err.problem


def test_domain_not_in_schema_in_task_folders(bench_dir: Path) -> None:
    (bench_dir / "task" / "Cooking").mkdir()
    err = _error(bench_dir)
    assert err.path == bench_dir / "task" / "Cooking" and "not in the schema" in err.problem
    (bench_dir / "task" / "Cooking").rmdir()
    path = bench_dir / "task" / "Multi-Domain" / "task.jsonl"
    path.write_text(path.read_text().replace('"Music"]', '"Cooking"]'))
    err = _error(bench_dir)
    assert (err.path, err.field) == (path, "line 1/Relevant Domains") and "'Cooking'" in err.problem


def test_unknown_preference_type(bench_dir: Path) -> None:
    path = bench_dir / "profile" / "user3" / "profile.json"
    _edit(path, lambda p: p["affinities"]["Alarm"].update({"Snooze Length": "5 minutes"}))
    err = _error(bench_dir)
    assert err.field == "affinities/Alarm/Snooze Length" and "no preference type" in err.problem


def test_task_in_a_domain_the_mask_turns_off(bench_dir: Path) -> None:
    path = bench_dir / "profile" / "user5" / "profile.json"
    _edit(path, lambda p: p["interests"].update({"Music": 0}))
    err = _error(bench_dir)
    assert err.path == bench_dir / "profile" / "user5" / "tasks_md.json"
    assert err.field == "Task 1/Relevant Domains"
    assert "'MD-task-1' is in 'Music', which this user's interest mask turns off" in err.problem


def test_duplicate_task_ids_in_user_file(bench_dir: Path) -> None:
    path = bench_dir / "profile" / "user3" / "tasks.json"
    _edit(path, lambda t: t["Task 2"].update({"task_id": "SD-Alarm-task-2"}))
    err = _error(bench_dir)
    assert (err.path, err.field) == (path, "Task 2/task_id")
    assert "duplicate task id 'SD-Alarm-task-2' (also under 'Task 1')" in err.problem


def test_duplicate_task_ids_in_definitions(bench_dir: Path) -> None:
    path = bench_dir / "task" / "Alarm" / "task.jsonl"
    path.write_text(path.read_text().replace('"Task Number": 2', '"Task Number": 1'))
    err = _error(bench_dir)
    assert (err.path, err.field) == (path, "line 2/Task Number")
    assert "duplicate task id 'SD-Alarm-task-1'" in err.problem


@pytest.mark.parametrize(("file", "change", "field", "expected"), [
    ("tasks.json", lambda t: t["Task 1"].update({"task_id": "SD-Alarm-task-9"}), "Task 1/task_id",
     "has no definition"),
    ("tasks.json", lambda t: t["Task 1"].update({"task_id": "MD-task-1"}), "Task 1/task_id",
     "is a MD task, but this file holds SD tasks"),
    ("tasks.json", lambda t: t["Task 1"].update({"task_id": "Alarm-1"}), "Task 1/task_id",
     "is not a task id"),
    ("tasks.json", lambda t: t["Task 1"].update({"Relevant Domains": ["Music"]}), "Task 1/Relevant Domains",
     "differ from 'SD-Alarm-task-2'"),
    ("tasks.json", lambda t: t["Task 1"].update({"Notes": "x"}), "Task 1/Notes", "unexpected key"),
    ("profile.json", lambda p: p.update({"extra": {}}), "extra", "unexpected key"),
    ("profile.json", lambda p: p["demographics"].update({"user_id": "user4"}), "demographics/user_id",
     "says 'user4' but the file is in user5/"),
])
def test_other_inconsistencies(bench_dir: Path, file: str, change, field: str, expected: str) -> None:
    path = bench_dir / "profile" / "user5" / file
    _edit(path, change)
    err = _error(bench_dir)
    assert (err.path, err.field) == (path, field) and expected in err.problem


def test_user_text_may_differ_from_the_definition(bench_dir: Path) -> None:
    path = bench_dir / "profile" / "user5" / "tasks_md.json"
    _edit(path, lambda t: t["Task 1"].update({"Relevant Affinity Types": ["Preferred Genres"],
                                              "User Intent": "Plan a night out."}))
    bench = load_benchmark(bench_dir)
    row = bench.scenario("user5/MD-task-1")
    assert row.relevant_preferences == ["Preferred Genres"] and row.user_intent == "Plan a night out."
    assert bench.tasks["MD-task-1"].user_intent == "Plan dinner and music."
    assert bench.scenario("user3/MD-task-1").user_intent == "Plan dinner and music."


def test_equality_notices_changes(bench_dir: Path) -> None:
    a, b = load_benchmark(bench_dir), load_benchmark(bench_dir)
    assert a == b
    b.scenarios.loc[0, "device"] = "Laptop"
    assert a != b
    assert isinstance(a, Benchmark) and a != "benchmark"
