"""The writer: what it writes loads back unchanged, and bad records are refused before any write."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from support.hand_made_benchmark import make_benchmark

from personalens_utils.data import (
    Benchmark,
    BenchmarkDataError,
    TaskDefinition,
    User,
    load_benchmark,
    save_benchmark,
    write_task_definitions,
    write_user,
)


@pytest.fixture
def bench(tmp_path: Path) -> Benchmark:
    return load_benchmark(make_benchmark(tmp_path / "source"))


def test_round_trip(bench: Benchmark, tmp_path: Path) -> None:
    out = save_benchmark(bench, tmp_path / "copy")
    again = load_benchmark(out)
    assert again == bench
    assert again.scenarios["scenario_id"].tolist() == bench.scenarios["scenario_id"].tolist()
    profile = json.loads((out / "profile" / "user3" / "profile.json").read_text())
    assert profile["demographics"]["user_id"] == "user3" and profile["interests"]["Rental Cars"] == 0
    assert (out / "task" / "Rental Cars" / "task.jsonl").is_file()
    sd_line = json.loads((out / "task" / "Alarm" / "task.jsonl").read_text().splitlines()[0])
    assert "Relevant Domains" not in sd_line and sd_line["Task Number"] == 1


def test_from_records_round_trip(bench: Benchmark, tmp_path: Path) -> None:
    by_user_descending = sorted(bench.iter_scenarios(), key=lambda s: -s.user_id)
    rebuilt = Benchmark.from_records(reversed(bench.users.values()), reversed(bench.tasks.values()),
                                     by_user_descending)
    assert rebuilt == bench
    assert load_benchmark(save_benchmark(rebuilt, tmp_path / "out")) == bench


def test_save_refuses_a_folder_with_data(bench: Benchmark, tmp_path: Path) -> None:
    target = tmp_path / "copy"
    save_benchmark(bench, target)
    before = (target / "profile" / "user3" / "profile.json").read_bytes()
    with pytest.raises(FileExistsError, match="already holds data"):
        save_benchmark(bench, target)
    assert (target / "profile" / "user3" / "profile.json").read_bytes() == before


def test_save_checks_every_user_before_writing(bench: Benchmark, tmp_path: Path) -> None:
    bad = dataclasses.replace(bench.users[5], preferences={**bench.users[5].preferences,
                                                           "Music": {"Preferred Genres": "pop"}})
    broken = Benchmark({3: bench.users[3], 5: bad}, bench.tasks, bench.scenarios)
    with pytest.raises(BenchmarkDataError) as err:
        save_benchmark(broken, tmp_path / "copy")
    assert err.value.field == "affinities/Music/Preferred Genres"
    assert not (tmp_path / "copy" / "profile" / "user3").exists()


def test_write_user_refuses_bad_records_and_keeps_old_files(bench: Benchmark, tmp_path: Path) -> None:
    root = save_benchmark(bench, tmp_path / "copy")
    user = bench.users[5]
    scenarios = [s for s in bench.iter_scenarios() if s.user_id == 5]
    before = {p.name: p.read_bytes() for p in (root / "profile" / "user5").iterdir()}

    masked = dataclasses.replace(user, interests={**user.interests, "Alarm": False})
    with pytest.raises(BenchmarkDataError, match="interest mask turns off"):
        write_user(root, masked, scenarios)
    with pytest.raises(BenchmarkDataError, match=r"interactions/Music\]: expected a string, got an array"):
        write_user(root, dataclasses.replace(user, interactions={"Music": ("a", "b")}), scenarios)
    tupled = {**user.preferences, "Music": {**user.preferences["Music"], "Favorite Bands": ("a", "b")}}
    with pytest.raises(BenchmarkDataError, match="field 'preferences' would read back as"):
        write_user(root, dataclasses.replace(user, preferences=tupled), scenarios)
    with pytest.raises(BenchmarkDataError, match="leave it out"):
        write_user(root, dataclasses.replace(user, demographics={"user_id": "user5"}), scenarios)
    with pytest.raises(BenchmarkDataError, match="belongs to another user"):
        write_user(root, bench.users[3], scenarios)
    assert {p.name: p.read_bytes() for p in (root / "profile" / "user5").iterdir()} == before

    changed = dataclasses.replace(user, interactions={**user.interactions, "Music": "New summary."})
    write_user(root, changed, scenarios)
    assert load_benchmark(root).users[5] == changed
    assert not [p for p in (root / "profile" / "user5").iterdir() if p.name.endswith(".tmp")]


def test_write_user_checks_task_ids_against_written_definitions(bench: Benchmark, tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    write_task_definitions(root, [bench.tasks["SD-Alarm-task-1"], bench.tasks["SD-Alarm-task-2"]])
    scenarios = [s for s in bench.iter_scenarios() if s.user_id == 3]
    with pytest.raises(BenchmarkDataError, match="'MD-task-1' has no definition"):
        write_user(root, bench.users[3], scenarios)
    write_user(root, bench.users[3], [s for s in scenarios if s.task_type == "SD"])
    assert len(load_benchmark(root).scenarios) == 2


def test_write_task_definitions_refuses_inconsistent_tasks(tmp_path: Path) -> None:
    bad_domain = TaskDefinition("SD-Cooking-task-1", ["Cooking"], "i", "d", "g", [])
    with pytest.raises(BenchmarkDataError, match="'Cooking' is not in the schema"):
        write_task_definitions(tmp_path, [bad_domain])
    wrong_domains = TaskDefinition("SD-Alarm-task-1", ["Music"], "i", "d", "g", [])
    with pytest.raises(BenchmarkDataError, match="field 'domains' would read back as"):
        write_task_definitions(tmp_path, [wrong_domains])
    assert not (tmp_path / "task").exists()


def test_records_keep_user_record_equality() -> None:
    user = User(1, {"age": "18-24 years old"}, {"Alarm": {"Alarm Sound Preference": "loud beeping"}},
                {"Alarm": True}, {"Alarm": "x"})
    assert user == dataclasses.replace(user) and user.active_domains == ["Alarm"]
