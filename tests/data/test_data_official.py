"""The loader on the official PersonaLens data (skipped when ../shared/data holds no archive)."""

from __future__ import annotations

from pathlib import Path

import pytest

from personalens_utils.data import SAMPLES, Benchmark, load_benchmark, save_benchmark
from personalens_utils.reference.schema import DOMAINS, MULTI_DOMAIN

pytestmark = pytest.mark.official


@pytest.fixture(scope="module")
def full(official_benchmark: Benchmark) -> Benchmark:
    return official_benchmark


def test_full_benchmark_counts(full: Benchmark) -> None:
    assert len(full.users) == 1500 and sorted(full.users) == list(range(1500))
    counts = full.scenarios["task_type"].value_counts().to_dict()
    assert counts == {"SD": 98115, "MD": 24018}
    assert full.scenarios["scenario_id"].is_unique


def test_task_definitions(full: Benchmark) -> None:
    kinds = [t.task_type for t in full.tasks.values()]
    assert (len(kinds), kinds.count("SD"), kinds.count("MD")) == (111, 86, 25)
    assert {t.folder for t in full.tasks.values()} == {*DOMAINS, MULTI_DOMAIN}
    assert "SD-Rental Cars-task-1" in full.tasks and "MD-task-25" in full.tasks
    assert set(full.scenarios["task_id"]) == set(full.tasks)


def test_every_scenario_lies_in_the_users_active_domains(full: Benchmark) -> None:
    active = {uid: set(u.active_domains) for uid, u in full.users.items()}
    frame = full.scenarios
    for uid, domains in zip(frame["user_id"].tolist(), frame["domains"].tolist(), strict=True):
        assert set(domains) <= active[uid]


def test_situation_columns_are_filled(full: Benchmark) -> None:
    for column in ("location", "device", "time_of_day", "day_of_week", "environment"):
        assert full.scenarios[column].str.len().min() > 0, column


def test_sample_50_counts(official_data: Path) -> None:
    sample = load_benchmark(official_data, users="sample_50")
    assert sorted(sample.users) == sorted(SAMPLES["sample_50"])
    assert sample.scenarios["task_type"].value_counts().to_dict() == {"SD": 3283, "MD": 813}


def test_samples_are_subsets_of_the_full_frame(full: Benchmark, official_root: Path) -> None:
    sample = load_benchmark(official_root, users="sample_30")  # the parent folder holding data/
    expected = full.scenarios[full.scenarios["user_id"].isin(SAMPLES["sample_30"])]
    assert sample.scenarios.reset_index(drop=True).equals(expected.reset_index(drop=True))


def test_round_trip_of_official_users(official_data: Path, tmp_path: Path) -> None:
    sample = load_benchmark(official_data, users=[0, 7, 874, 1499])
    assert load_benchmark(save_benchmark(sample, tmp_path / "copy")) == sample


def test_stray_domain_key_in_user_874_is_read_as_buses(full: Benchmark) -> None:
    assert set(full.users[874].interests) == set(DOMAINS)
