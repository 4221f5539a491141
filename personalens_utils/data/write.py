"""Writing benchmarks in the official layout, so generated data loads exactly like the official data.

Everything is validated with the reader's own checks before a byte is written, and each file is
replaced atomically, so a bad record never leaves a half-written user behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from personalens_utils.base.files import atomic_write_bytes
from personalens_utils.data.parse import (
    TASK_KEYS,
    TASK_NUMBER,
    Interner,
    fail,
    load_definitions,
    parse_definitions,
    parse_profile,
    parse_user_tasks,
)
from personalens_utils.data.types import (
    DEFINITIONS_FILE,
    MD,
    PROFILE_DIR,
    PROFILE_FILE,
    SCENARIO_COLUMNS,
    TASK_DIR,
    TASK_FILES,
    Scenario,
    TaskDefinition,
    User,
    task_order,
    user_folder,
)
from personalens_utils.reference.schema import MULTI_DOMAIN, Schema, load_schema
from personalens_utils.reference.situation import SITUATION_FIELDS

if TYPE_CHECKING:
    from personalens_utils.data import Benchmark

_JSON_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def _check_round_trip(original: Any, parsed: Any, path: Path, what: str) -> None:
    """Values the files cannot hold as given (tuples, numbers as text, ...) fail here, by field."""
    if parsed == original:
        return
    for name in original.__dataclass_fields__:
        if getattr(parsed, name) != getattr(original, name):
            fail(path, name, f"{what} field {name!r} would read back as {getattr(parsed, name)!r}"
                             f" instead of {getattr(original, name)!r}")


def profile_json(user: User) -> dict[str, Any]:
    """A user as the object stored in profile.json."""
    return {
        "affinities": user.preferences,
        "demographics": {"user_id": user_folder(user.user_id), **user.demographics},
        "interests": {domain: int(on) for domain, on in user.interests.items()},
        "interactions": user.interactions,
    }


def tasks_json(scenarios: Sequence[Scenario]) -> dict[str, Any]:
    """One user's scenarios of one task type as the object stored in tasks.json / tasks_md.json."""
    return {
        f"Task {i}": {
            TASK_KEYS["task_description"]: s.task_description,
            TASK_KEYS["user_intent"]: s.user_intent,
            TASK_KEYS["task_goal"]: s.task_goal,
            TASK_KEYS["relevant_preferences"]: s.relevant_preferences,
            "task_id": s.task_id,
            "situations": {key: s.situation[name] for name, key in SITUATION_FIELDS.items()},
            TASK_KEYS["domains"]: s.domains,
        }
        for i, s in enumerate(scenarios, 1)
    }


def definition_json(task: TaskDefinition) -> dict[str, Any]:
    """A task definition as one line of task/<Domain>/task.jsonl (SD lines carry no domains)."""
    entry: dict[str, Any] = {
        TASK_NUMBER: task.number,
        TASK_KEYS["task_description"]: task.task_description,
        TASK_KEYS["user_intent"]: task.user_intent,
        TASK_KEYS["task_goal"]: task.task_goal,
    }
    if task.task_type == MD:
        entry[TASK_KEYS["domains"]] = task.domains
    entry[TASK_KEYS["relevant_preferences"]] = task.relevant_preferences
    return entry


def write_task_definitions(root: str | os.PathLike[str], tasks: Iterable[TaskDefinition], *,
                           schema: Schema | None = None) -> list[Path]:
    """Write task/<folder>/task.jsonl for every folder the tasks fall in; returns the files written.

    A folder's file is replaced as a whole, so pass all of a folder's tasks at once. Other folders
    are left alone.
    """
    schema = schema or load_schema()
    by_folder: dict[str, list[TaskDefinition]] = {}
    for task in sorted(tasks, key=task_order):
        by_folder.setdefault(task.folder, []).append(task)
    staged: list[tuple[Path, bytes]] = []
    for folder, items in by_folder.items():
        path = Path(root) / TASK_DIR / folder / DEFINITIONS_FILE
        if folder != MULTI_DOMAIN and not schema.has_domain(folder):
            fail(path, None, f"domain {folder!r} is not in the schema")
        lines = [orjson.dumps(definition_json(t)) for t in items]
        for task, parsed in zip(items, parse_definitions(lines, path, folder, schema), strict=True):
            _check_round_trip(task, parsed, path, f"task {task.task_id!r}")
        staged.append((path, b"\n".join(lines) + b"\n"))
    for path, data in staged:
        atomic_write_bytes(path, data)
    return [path for path, _ in staged]


def write_user(root: str | os.PathLike[str], user: User, scenarios: Sequence[Scenario], *,
               tasks: Mapping[str, TaskDefinition] | None = None, schema: Schema | None = None) -> Path:
    """Write profile/user<N>/{profile,tasks,tasks_md}.json for one user; returns the user's folder.

    `tasks` are the definitions the scenarios must refer to; by default those already written
    under root/task/ (so write the definitions first). Replaces the user's files if present.
    """
    schema = schema or load_schema()
    root = Path(root)
    definitions = dict(tasks) if tasks is not None else load_definitions(root, schema)
    staged = _stage_user(root, user, scenarios, definitions, schema)
    for path, data in staged:
        atomic_write_bytes(path, data)
    return staged[0][0].parent


def _stage_user(root: Path, user: User, scenarios: Sequence[Scenario],
                definitions: Mapping[str, TaskDefinition], schema: Schema) -> list[tuple[Path, bytes]]:
    """The validated bytes of one user's three files."""
    folder = root / PROFILE_DIR / user_folder(user.user_id)
    if "user_id" in user.demographics:
        fail(folder / PROFILE_FILE, "demographics/user_id", "leave it out: it is written from User.user_id")
    profile = orjson.dumps(profile_json(user), option=_JSON_OPTS)
    parsed = parse_profile(orjson.loads(profile), folder / PROFILE_FILE, user.user_id, schema)
    _check_round_trip(user, parsed, folder / PROFILE_FILE, f"user {user.user_id}")
    staged = [(folder / PROFILE_FILE, profile)]
    for scenario in scenarios:
        if scenario.user_id != user.user_id:
            fail(folder, "user_id", f"scenario {scenario.scenario_id!r} belongs to another user")
    for kind, name in TASK_FILES.items():
        items = [s for s in scenarios if s.task_type == kind]
        data = orjson.dumps(tasks_json(items), option=_JSON_OPTS)
        file = folder / name
        rows = parse_user_tasks(orjson.loads(data), file, user, kind, definitions, schema, Interner())
        for item, row in zip(items, rows, strict=True):
            _check_round_trip(item, Scenario.from_row(dict(zip(SCENARIO_COLUMNS, row, strict=True))),
                              file, f"scenario {item.scenario_id!r}")
        staged.append((file, data))
    return staged


def save_benchmark(benchmark: Benchmark, path: str | os.PathLike[str], *,
                   schema: Schema | None = None) -> Path:
    """Write a whole benchmark in the official layout into `path`, which must hold no profile/ or
    task/ content yet (nothing already there is overwritten). Every record is checked before the
    first file is written. load_benchmark(path) gives the benchmark back."""
    schema = schema or load_schema()
    root = Path(path)
    for sub in (PROFILE_DIR, TASK_DIR):
        if (root / sub).is_dir() and any((root / sub).iterdir()):
            raise FileExistsError(f"{root / sub} already holds data; save into an empty folder")
    frame = benchmark.scenarios
    missing = sorted(set(frame["user_id"].tolist()) - set(benchmark.users))
    if missing:
        fail(root / PROFILE_DIR, None, f"scenarios refer to user(s) without a record: {missing[:10]}")
    by_user: dict[int, list[Scenario]] = {uid: [] for uid in benchmark.users}
    for row in frame.to_dict("records"):
        by_user[int(row["user_id"])].append(Scenario.from_row(row))
    for user_id, user in benchmark.users.items():  # validate every user before writing any
        _stage_user(root, user, by_user[user_id], benchmark.tasks, schema)
    write_task_definitions(root, benchmark.tasks.values(), schema=schema)
    for user_id, user in benchmark.users.items():
        for file, data in _stage_user(root, user, by_user[user_id], benchmark.tasks, schema):
            atomic_write_bytes(file, data)
    return root
