"""Loading a PersonaLens benchmark folder (official layout) into typed records and a scenarios table.

Layout read (and written by `save_benchmark`):

    profile/user<N>/profile.json   demographics, preferences ("affinities"), interest mask, interactions
    profile/user<N>/tasks.json     the user's single-domain tasks, each with its situation
    profile/user<N>/tasks_md.json  the user's multi-domain tasks
    task/<Domain>/task.jsonl       task definitions; task/Multi-Domain/ holds the multi-domain ones
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pandas as pd

from personalens_utils.data.parse import (
    Interner,
    fail,
    load_definitions,
    parse_profile,
    parse_user_tasks,
    read_json,
)
from personalens_utils.data.types import (
    MD,
    PROFILE_DIR,
    PROFILE_FILE,
    SAMPLES,
    SCENARIO_COLUMNS,
    SD,
    TASK_DIR,
    TASK_FILES,
    BenchmarkDataError,
    Scenario,
    ScenarioRow,
    TaskDefinition,
    User,
    md_task_id,
    scenario_id,
    sd_task_id,
    task_order,
)
from personalens_utils.data.write import save_benchmark, write_task_definitions, write_user
from personalens_utils.reference.schema import Schema, load_schema

__all__ = [
    "DEFAULT_SAMPLE",
    "MD",
    "SAMPLES",
    "SCENARIO_COLUMNS",
    "SD",
    "Benchmark",
    "BenchmarkDataError",
    "Scenario",
    "TaskDefinition",
    "User",
    "UsersArg",
    "benchmark_root",
    "default_users",
    "load_benchmark",
    "md_task_id",
    "present_users",
    "resolve_users",
    "save_benchmark",
    "scenario_id",
    "sd_task_id",
    "write_task_definitions",
    "write_user",
]

_USER_DIR = re.compile(r"^user(0|[1-9][0-9]*)$")
UsersArg = str | Iterable[int] | None


class Benchmark:
    """Users, task definitions and the user x task scenarios of one benchmark folder.

    `users` and `tasks` are dicts keyed by user id and task id; `scenarios` has one row per user x
    task (columns SCENARIO_COLUMNS), users ascending, each user's SD tasks before the MD ones.
    """

    def __init__(self, users: dict[int, User], tasks: dict[str, TaskDefinition], scenarios: pd.DataFrame,
                 root: Path | None = None):
        self.users = users
        self.tasks = tasks
        self.scenarios = scenarios
        self.root = root
        self._by_id: tuple[pd.DataFrame, dict[str, Scenario]] | None = None

    @classmethod
    def from_records(cls, users: Iterable[User], tasks: Iterable[TaskDefinition],
                     scenarios: Iterable[Scenario]) -> Benchmark:
        """A benchmark built in memory (e.g. by generation), in the same order the loader gives."""
        by_user = {u.user_id: u for u in sorted(users, key=lambda u: u.user_id)}
        by_id = {t.task_id: t for t in sorted(tasks, key=task_order)}
        items = sorted(scenarios, key=lambda s: (s.user_id, s.task_type != SD))
        rows = [s.row() for s in items]
        return cls(by_user, by_id, _frame(rows))

    def __repr__(self) -> str:
        counts = self.scenarios["task_type"].value_counts()
        return (f"Benchmark({len(self.users)} users, {len(self.tasks)} tasks, "
                f"{len(self.scenarios)} scenarios: {counts.get(SD, 0)} SD, {counts.get(MD, 0)} MD; "
                f"root={self.root})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Benchmark):
            return NotImplemented
        return (self.users == other.users and self.tasks == other.tasks
                and self.scenarios.reset_index(drop=True).equals(other.scenarios.reset_index(drop=True)))

    def subset(self, users: Iterable[int]) -> Benchmark:
        """The benchmark of some of its users, sharing their records (nothing is read or copied again);
        equal to loading the folder for those users."""
        wanted = sorted(set(users))
        missing = [u for u in wanted if u not in self.users]
        if missing:
            raise KeyError(f"users {missing[:5]} are not in this benchmark")
        rows = self.scenarios[self.scenarios["user_id"].isin(wanted)].reset_index(drop=True)
        return Benchmark({u: self.users[u] for u in wanted}, self.tasks, rows, self.root)

    def user(self, user_id: int) -> User:
        try:
            return self.users[user_id]
        except KeyError:
            raise KeyError(f"user {user_id} is not in this benchmark") from None

    def scenario(self, scenario_id: str) -> Scenario:
        """One scenario by id ("user<N>/<task_id>") as a record.

        The records are made once per `scenarios` frame: judging and the audit ask for one per dialogue,
        tens of thousands of times, and a pandas row costs half a millisecond each time."""
        if self._by_id is None or self._by_id[0] is not self.scenarios:
            rows = self.scenarios.to_dict("records")
            self._by_id = (self.scenarios, {row["scenario_id"]: Scenario.from_row(row) for row in rows})
        try:
            return self._by_id[1][scenario_id]
        except KeyError:
            raise KeyError(f"scenario {scenario_id!r} is not in this benchmark") from None

    def iter_scenarios(self, task_types: Sequence[str] = (SD, MD)) -> Iterator[Scenario]:
        frame = self.scenarios[self.scenarios["task_type"].isin(list(task_types))]
        for row in frame.to_dict("records"):
            yield Scenario.from_row(row)


def _frame(rows: list[ScenarioRow]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows, columns=list(SCENARIO_COLUMNS))
    return frame.astype({"user_id": "int64"})


def benchmark_root(path: str | os.PathLike[str]) -> Path:
    """The folder holding profile/ and task/: `path` itself or its data/ subfolder."""
    base = Path(path).expanduser()
    for folder in (base, base / "data"):
        if (folder / PROFILE_DIR).is_dir() and (folder / TASK_DIR).is_dir():
            return folder
    fail(base, None, f"not a benchmark folder: no {PROFILE_DIR}/ and {TASK_DIR}/ here or in data/")


DEFAULT_SAMPLE = "sample_50"


def default_users(benchmark_dir: str | os.PathLike[str]) -> str | None:
    """The paper's sample_50 when the benchmark holds all of its users (the official data), else None
    (every user: a generated benchmark numbers its own users)."""
    profiles = Path(benchmark_dir) / "profile"
    if not profiles.is_dir():
        profiles = Path(benchmark_dir) / "data" / "profile"
    return DEFAULT_SAMPLE if all((profiles / f"user{u}").is_dir() for u in SAMPLES[DEFAULT_SAMPLE]) else None


def resolve_users(users: UsersArg) -> list[int] | None:
    """None (all users), a sample name from SAMPLES, or user indices -> sorted indices."""
    if users is None:
        return None
    if isinstance(users, str):
        if users not in SAMPLES:
            known = ", ".join(SAMPLES)
            raise ValueError(f"unknown user sample {users!r}; known: {known} (or a list of user indices)")
        return sorted(SAMPLES[users])
    try:
        ids = [operator.index(u) for u in users]
    except TypeError:
        raise TypeError(f"users must be None, a sample name or user indices, got {users!r}") from None
    return sorted(set(ids))


def present_users(path: str | os.PathLike[str]) -> list[int]:
    """The user ids a benchmark folder (or a parent holding data/) holds, sorted."""
    return sorted(_available_users(benchmark_root(path) / PROFILE_DIR))


def _available_users(profile_dir: Path) -> dict[int, Path]:
    found = {}
    for entry in os.scandir(profile_dir):
        match = _USER_DIR.match(entry.name)
        if match and entry.is_dir():
            found[int(match[1])] = Path(entry.path)
    return found


def load_benchmark(path: str | os.PathLike[str], users: UsersArg = None, *,
                   schema: Schema | None = None) -> Benchmark:
    """Read and validate a benchmark folder (or a parent holding data/).

    `users`: None for all, "sample_30" / "sample_50" / "sample_100", or a list of user indices.
    Raises BenchmarkDataError naming the file and field of the first problem found.
    """
    schema = schema or load_schema()
    root = benchmark_root(path)
    wanted = resolve_users(users)
    tasks = load_definitions(root, schema)
    available = _available_users(root / PROFILE_DIR)
    if wanted is None:
        wanted = sorted(available)
    missing = [u for u in wanted if u not in available]
    if missing:
        fail(root / PROFILE_DIR, None, f"no folder for user(s) {', '.join(map(str, missing))} "
                                       f"({len(available)} users present)")
    interner = Interner()
    for task in tasks.values():
        for text in (task.user_intent, task.task_description, task.task_goal):
            interner.text(text)
        interner.strings(task.domains)
        interner.strings(task.relevant_preferences)
    loaded: dict[int, User] = {}
    rows: list[ScenarioRow] = []
    for user_id in wanted:
        folder = available[user_id]
        file = folder / PROFILE_FILE
        user = parse_profile(read_json(file), file, user_id, schema)
        loaded[user_id] = user
        for kind, name in TASK_FILES.items():
            file = folder / name
            rows.extend(parse_user_tasks(read_json(file), file, user, kind, tasks, schema, interner))
    return Benchmark(loaded, tasks, _frame(rows), root=root)

