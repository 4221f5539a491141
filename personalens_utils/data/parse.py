"""Validation of raw benchmark JSON into records; shared by the reader and the writer.

Every check raises BenchmarkDataError with the file and a field path such as
`affinities/Books/Genre` or `Task 3/situations/Device`, so a bad generated file can be found and
fixed by hand. Unknown keys are errors too: what the records cannot hold would be lost on a rewrite.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import orjson

from personalens_utils.data.types import (
    DEFINITIONS_FILE,
    TASK_DIR,
    BenchmarkDataError,
    PreferenceValue,
    ScenarioRow,
    TaskDefinition,
    User,
    md_task_id,
    parse_task_id,
    scenario_id,
    sd_task_id,
    task_order,
    user_folder,
)
from personalens_utils.reference.schema import MULTI_DOMAIN, Schema
from personalens_utils.reference.situation import SITUATION_FIELDS

log = logging.getLogger(__name__)

PROFILE_KEYS = ("affinities", "demographics", "interests", "interactions")
TASK_KEYS = {
    "task_description": "Task Description",
    "user_intent": "User Intent",
    "task_goal": "Task Goal",
    "relevant_preferences": "Relevant Affinity Types",
    "domains": "Relevant Domains",
}
TASK_NUMBER = "Task Number"
USER_TASK_ID = "task_id"
SITUATIONS = "situations"


def fail(path: Path, field: str | None, problem: str) -> NoReturn:
    raise BenchmarkDataError(path, field, problem)


def _join(*parts: str | None) -> str:
    return "/".join(p for p in parts if p)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def read_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        fail(path, None, "file is missing")
    except OSError as exc:
        fail(path, None, f"cannot be read ({exc.strerror})")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        fail(path, None, f"invalid JSON: {exc}")


def as_object(value: Any, path: Path, field: str | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        fail(path, field, f"expected an object, got {_kind(value)}")
    return value


def as_str(value: Any, path: Path, field: str) -> str:
    if not isinstance(value, str):
        fail(path, field, f"expected a string, got {_kind(value)}")
    return value


def as_str_list(value: Any, path: Path, field: str) -> list[str]:
    if not isinstance(value, list):
        fail(path, field, f"expected an array of strings, got {_kind(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            fail(path, f"{field}/{i}", f"expected a string, got {_kind(item)}")
    return value


def _is_str_list(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def require(obj: dict[str, Any], key: str, path: Path, prefix: str | None = None) -> Any:
    if key not in obj:
        fail(path, _join(prefix, key), "required key is missing")
    return obj[key]


def reject_unknown(obj: dict[str, Any], allowed: tuple[str, ...] | list[str], path: Path,
                   prefix: str | None = None) -> None:
    for key in obj:
        if key not in allowed:
            fail(path, _join(prefix, key), f"unexpected key (allowed: {', '.join(allowed)})")


def by_domain(obj: Any, schema: Schema, path: Path, field: str) -> list[tuple[str, str, Any]]:
    """(domain, key as written, value) for an object keyed by domain name.

    Stray markdown asterisks or spaces around a known name (one official profile has "Buses**")
    are dropped, with a logged warning; any other unknown name, or two keys naming one domain, is an error.
    """
    items = []
    seen: dict[str, str] = {}
    for key, value in as_object(obj, path, field).items():
        domain = key if schema.has_domain(key) else key.strip().strip("*").strip()
        if not schema.has_domain(domain):
            fail(path, f"{field}/{key}", f"domain {key!r} is not in the schema")
        if domain != key:
            log.warning("%s: %s/%s: read the domain key %r as %r", path, field, key, key, domain)
        if domain in seen:
            fail(path, f"{field}/{key}", f"names the same domain as {seen[domain]!r}")
        seen[domain] = key
        items.append((domain, key, value))
    return items


def parse_profile(raw: Any, path: Path, user_id: int, schema: Schema) -> User:
    raw = as_object(raw, path, None)
    reject_unknown(raw, PROFILE_KEYS, path)
    demographics = dict(as_object(require(raw, "demographics", path), path, "demographics"))
    for key, value in demographics.items():
        as_str(value, path, f"demographics/{key}")
    stated = demographics.pop("user_id", user_folder(user_id))
    if stated != user_folder(user_id):
        fail(path, "demographics/user_id", f"says {stated!r} but the file is in {user_folder(user_id)}/")

    interests: dict[str, bool] = {}
    for domain, key, flag in by_domain(require(raw, "interests", path), schema, path, "interests"):
        if flag not in (0, 1) or not isinstance(flag, int):
            fail(path, f"interests/{key}", f"expected 0 or 1, got {flag!r}")
        interests[domain] = bool(flag)

    preferences: dict[str, dict[str, PreferenceValue]] = {}
    for domain, key, prefs in by_domain(require(raw, "affinities", path), schema, path, "affinities"):
        multi_valued = schema.multi_valued(domain)
        values: dict[str, PreferenceValue] = {}
        for name, value in as_object(prefs, path, f"affinities/{key}").items():
            multi = multi_valued.get(name)
            if multi is None:
                known = ", ".join(multi_valued)
                fail(path, f"affinities/{key}/{name}", f"{domain} has no preference type {name!r} ({known})")
            if multi and not _is_str_list(value):
                as_str_list(value, path, f"affinities/{key}/{name}")
            elif not multi and type(value) is not str:
                as_str(value, path, f"affinities/{key}/{name}")
            values[name] = value
        preferences[domain] = values

    interactions: dict[str, str] = {}
    for domain, key, text in by_domain(require(raw, "interactions", path), schema, path, "interactions"):
        interactions[domain] = as_str(text, path, f"interactions/{key}")
    return User(user_id, demographics, preferences, interests, interactions)


class Interner:
    """Shares equal strings and string lists between scenario rows (most rows repeat the task
    definition's text), which keeps 122k scenarios at a fraction of their parsed size."""

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._lists: dict[tuple[str, ...], list[str]] = {}

    def text(self, value: str) -> str:
        return self._strings.setdefault(value, value)

    def strings(self, value: list[str]) -> list[str]:
        return self._lists.setdefault(tuple(value), value)


_ENTRY_KEY_ORDER = (*TASK_KEYS.values(), USER_TASK_ID, SITUATIONS)
_ENTRY_KEYS = frozenset(_ENTRY_KEY_ORDER)
_SITUATION_KEYS = tuple(SITUATION_FIELDS.values())
_SITUATION_KEYSET = frozenset(_SITUATION_KEYS)
_TEXT_FIELDS = ("user_intent", "task_description", "task_goal")
_INTENT, _DESCRIPTION, _GOAL = (TASK_KEYS[name] for name in _TEXT_FIELDS)
_DOMAINS, _RELEVANT = TASK_KEYS["domains"], TASK_KEYS["relevant_preferences"]


def parse_user_tasks(raw: Any, path: Path, user: User, kind: str, definitions: dict[str, TaskDefinition],
                     schema: Schema, interner: Interner) -> list[ScenarioRow]:
    """The scenarios of one user's tasks.json (kind SD) or tasks_md.json (kind MD), as frame rows."""
    rows: list[ScenarioRow] = []
    seen: dict[str, str] = {}
    source = _TaskFile(path, kind, user, definitions, schema, interner)
    for entry_key, entry in as_object(raw, path, None).items():
        row = _plain_row(entry, kind, user, definitions, interner)
        if row is None or row[2] in seen:
            row = _checked_row(entry_key, entry, source, seen)
        seen[row[2]] = entry_key
        rows.append(row)
    return rows


def _plain_row(entry: Any, kind: str, user: User, definitions: dict[str, TaskDefinition],
               interner: Interner) -> ScenarioRow | None:
    """The row of an entry that repeats its definition's domains and preferences and is well formed
    in every other way (nearly all of them); None sends the entry through the full checks.
    Written for speed: it runs 122k times on the official data."""
    if type(entry) is not dict or entry.keys() != _ENTRY_KEYS:
        return None
    task_id = entry[USER_TASK_ID]
    definition = definitions.get(task_id) if type(task_id) is str else None
    if (definition is None or not task_id.startswith(kind)
            or entry[_DOMAINS] != definition.domains
            or entry[_RELEVANT] != definition.relevant_preferences):
        return None
    interests = user.interests
    for domain in definition.domains:
        if not interests.get(domain):
            return None
    situation = entry[SITUATIONS]
    if type(situation) is not dict or situation.keys() != _SITUATION_KEYSET:
        return None
    intent, description, goal = entry[_INTENT], entry[_DESCRIPTION], entry[_GOAL]
    place = [situation[key] for key in _SITUATION_KEYS]
    for value in (intent, description, goal, *place):
        if type(value) is not str:
            return None
    text = interner.text
    return (scenario_id(user.user_id, task_id), user.user_id, task_id, kind, definition.domains,
            definition.user_intent if intent == definition.user_intent else text(intent),
            definition.task_description if description == definition.task_description else text(description),
            definition.task_goal if goal == definition.task_goal else text(goal),
            definition.relevant_preferences, *map(text, place))


@dataclass(frozen=True)
class _TaskFile:
    """One user's task file and what its entries are checked against."""

    path: Path
    kind: str
    user: User
    definitions: dict[str, TaskDefinition]
    schema: Schema
    interner: Interner


def _checked_row(entry_key: str, entry: Any, source: _TaskFile, seen: dict[str, str]) -> ScenarioRow:
    """One task entry checked field by field: the row, or BenchmarkDataError naming the field."""
    path, kind, user, definitions, schema, interner = (
        source.path, source.kind, source.user, source.definitions, source.schema, source.interner
    )
    entry = as_object(entry, path, entry_key)
    reject_unknown(entry, _ENTRY_KEY_ORDER, path, entry_key)
    id_field = f"{entry_key}/{USER_TASK_ID}"
    task_id = as_str(require(entry, USER_TASK_ID, path, entry_key), path, id_field)
    try:
        id_kind = parse_task_id(task_id)[0]
    except ValueError as exc:
        fail(path, id_field, str(exc))
    if id_kind != kind:
        fail(path, id_field, f"{task_id!r} is a {id_kind} task, but this file holds {kind} tasks")
    if task_id in seen:
        fail(path, id_field, f"duplicate task id {task_id!r} (also under {seen[task_id]!r})")
    definition = definitions.get(task_id)
    if definition is None:
        fail(path, id_field, f"task {task_id!r} has no definition under task/")
    fields = {name: require(entry, key, path, entry_key) for name, key in TASK_KEYS.items()}
    domains_field = f"{entry_key}/{_DOMAINS}"
    domains = as_str_list(fields["domains"], path, domains_field)
    for domain in domains:
        if not schema.has_domain(domain):
            fail(path, domains_field, f"domain {domain!r} is not in the schema")
        if not user.is_active(domain):
            fail(path, domains_field,
                 f"task {task_id!r} is in {domain!r}, which this user's interest mask turns off")
    if domains != definition.domains:
        fail(path, domains_field, f"{domains} differ from {task_id!r}'s definition: {definition.domains}")
    situation_field = f"{entry_key}/{SITUATIONS}"
    situation = as_object(require(entry, SITUATIONS, path, entry_key), path, situation_field)
    reject_unknown(situation, _SITUATION_KEYS, path, situation_field)
    place = []
    for key in _SITUATION_KEYS:
        value = require(situation, key, path, situation_field)
        place.append(interner.text(as_str(value, path, f"{situation_field}/{key}")))
    texts = [
        interner.text(as_str(fields[name], path, f"{entry_key}/{TASK_KEYS[name]}")) for name in _TEXT_FIELDS
    ]
    relevant = as_str_list(fields["relevant_preferences"], path, f"{entry_key}/{_RELEVANT}")
    return (scenario_id(user.user_id, task_id), user.user_id, task_id, kind, definition.domains, *texts,
            interner.strings(relevant), *place)


def read_definitions(path: Path, folder: str, schema: Schema) -> list[TaskDefinition]:
    """The task definitions of task/<folder>/task.jsonl (one JSON object a line)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        fail(path, None, "file is missing")
    except OSError as exc:
        fail(path, None, f"cannot be read ({exc.strerror})")
    return parse_definitions(data.splitlines(), path, folder, schema)


def task_id_of(folder: str, number: int) -> str:
    return md_task_id(number) if folder == MULTI_DOMAIN else sd_task_id(folder, number)


def parse_definitions(lines: list[bytes], path: Path, folder: str, schema: Schema) -> list[TaskDefinition]:
    multi = folder == MULTI_DOMAIN
    allowed = (TASK_NUMBER, *TASK_KEYS.values())
    tasks: list[TaskDefinition] = []
    seen: dict[int, int] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        try:
            entry = as_object(orjson.loads(line), path, where)
        except orjson.JSONDecodeError as exc:
            fail(path, where, f"invalid JSON: {exc}")
        reject_unknown(entry, allowed, path, where)
        number = require(entry, TASK_NUMBER, path, where)
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            fail(path, f"{where}/{TASK_NUMBER}", f"expected a positive integer, got {number!r}")
        if number in seen:
            fail(path, f"{where}/{TASK_NUMBER}", f"duplicate task id {task_id_of(folder, number)!r} "
                                                 f"(task number {number} is also on line {seen[number]})")
        seen[number] = lineno
        field = f"{where}/{TASK_KEYS['domains']}"
        if multi:
            domains = as_str_list(require(entry, TASK_KEYS["domains"], path, where), path, field)
            for domain in domains:
                if not schema.has_domain(domain):
                    fail(path, field, f"domain {domain!r} is not in the schema")
        else:
            domains = [folder]
            if TASK_KEYS["domains"] in entry and entry[TASK_KEYS["domains"]] != domains:
                fail(path, field, f"a task under {folder}/ must have domains {domains}")
        task_id = task_id_of(folder, number)
        texts = {
            name: as_str(require(entry, TASK_KEYS[name], path, where), path, f"{where}/{TASK_KEYS[name]}")
            for name in ("user_intent", "task_description", "task_goal")
        }
        relevant = as_str_list(require(entry, TASK_KEYS["relevant_preferences"], path, where), path,
                               f"{where}/{TASK_KEYS['relevant_preferences']}")
        tasks.append(TaskDefinition(task_id=task_id, domains=domains, relevant_preferences=relevant, **texts))
    return tasks


def load_definitions(root: Path, schema: Schema) -> dict[str, TaskDefinition]:
    """Every task definition under root/task/, by id, in task_order."""
    task_dir = root / TASK_DIR
    folders = sorted(e.name for e in os.scandir(task_dir) if e.is_dir() and not e.name.startswith("."))
    tasks: dict[str, TaskDefinition] = {}
    for folder in folders:
        if folder != MULTI_DOMAIN and not schema.has_domain(folder):
            fail(task_dir / folder, None, f"domain {folder!r} is not in the schema")
        for task in read_definitions(task_dir / folder / DEFINITIONS_FILE, folder, schema):
            tasks[task.task_id] = task
    return dict(sorted(tasks.items(), key=lambda item: task_order(item[1])))
