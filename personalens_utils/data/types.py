"""Typed records of a PersonaLens benchmark: users, task definitions and user-task scenarios.

The records hold exactly what the official files hold, under Python names, so a benchmark read
from disk and written back is unchanged. List values inside records and scenario rows may be shared
between records to keep memory low: treat them as read-only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personalens_utils.base.errors import KitError
from personalens_utils.reference.schema import MULTI_DOMAIN, load_schema
from personalens_utils.reference.situation import SITUATION_FIELDS

PreferenceValue = str | list[str]

SD, MD = "SD", "MD"

SCENARIO_COLUMNS = (
    "scenario_id", "user_id", "task_id", "task_type", "domains", "user_intent", "task_description",
    "task_goal", "relevant_preferences", *SITUATION_FIELDS,
)
"""Columns of Benchmark.scenarios, in order (scenario rows are tuples in this order)."""
ScenarioRow = tuple[Any, ...]

PROFILE_DIR, TASK_DIR = "profile", "task"
PROFILE_FILE, DEFINITIONS_FILE = "profile.json", "task.jsonl"
TASK_FILES = {SD: "tasks.json", MD: "tasks_md.json"}
"""The official layout: profile/user<N>/{profile,tasks,tasks_md}.json and task/<Domain>/task.jsonl."""

SAMPLES: dict[str, tuple[int, ...]] = {
    "sample_30": (
        7, 66, 132, 139, 207, 230, 251, 313, 340, 376, 386, 389, 415, 428, 597, 746, 774, 788, 822, 854,
        900, 1111, 1142, 1150, 1197, 1231, 1322, 1458, 1492, 1495,
    ),
    "sample_50": (
        7, 53, 66, 107, 132, 139, 167, 195, 207, 230, 251, 313, 340, 376, 386, 389, 415, 418, 428, 439,
        517, 532, 597, 630, 641, 660, 674, 701, 746, 774, 788, 802, 822, 854, 900, 1111, 1142, 1145, 1150,
        1197, 1231, 1322, 1335, 1362, 1377, 1439, 1458, 1492, 1493, 1495,
    ),
    "sample_100": (
        7, 21, 53, 66, 86, 107, 132, 139, 157, 166, 167, 168, 195, 207, 230, 248, 251, 312, 313, 340, 352,
        363, 365, 376, 386, 389, 394, 415, 418, 428, 431, 439, 470, 482, 517, 532, 597, 619, 630, 641, 657,
        659, 660, 664, 674, 686, 689, 701, 744, 745, 746, 774, 788, 802, 813, 822, 838, 840, 842, 847, 854,
        857, 870, 878, 880, 900, 913, 928, 942, 954, 997, 1069, 1111, 1114, 1118, 1120, 1142, 1145, 1150,
        1151, 1167, 1184, 1197, 1231, 1246, 1322, 1330, 1335, 1345, 1362, 1377, 1384, 1434, 1439, 1458,
        1461, 1492, 1493, 1495, 1496,
    ),
}
"""The user samples the paper's experiments ran on (user indices)."""


class BenchmarkDataError(KitError, ValueError):
    """Benchmark data that cannot be used as it is; names the file and, where known, the field."""

    def __init__(self, path: str | Path, field: str | None, problem: str):
        self.path = Path(path)
        self.field = field
        self.problem = problem
        where = f"{self.path}" + (f" [{field}]" if field else "")
        super().__init__(f"{where}: {problem}")


_SD_ID = re.compile(r"^SD-(?P<domain>.+)-task-(?P<number>[1-9][0-9]*)$")
_MD_ID = re.compile(r"^MD-task-(?P<number>[1-9][0-9]*)$")


def sd_task_id(domain: str, number: int) -> str:
    return f"SD-{domain}-task-{number}"


def md_task_id(number: int) -> str:
    return f"MD-task-{number}"


def parse_task_id(task_id: str) -> tuple[str, str | None, int]:
    """(task type, domain for SD or None for MD, task number); ValueError if not a task id."""
    if m := _SD_ID.match(task_id):
        return SD, m["domain"], int(m["number"])
    if m := _MD_ID.match(task_id):
        return MD, None, int(m["number"])
    raise ValueError(f"{task_id!r} is not a task id (expected SD-<Domain>-task-<n> or MD-task-<n>)")


def task_order(task: TaskDefinition) -> tuple[int, int]:
    """Sort key of task definitions: schema domain order, multi-domain last, then task number."""
    folders = [*load_schema().domain_names, MULTI_DOMAIN]
    return (folders.index(task.folder) if task.folder in folders else len(folders), task.number)


def user_folder(user_id: int) -> str:
    return f"user{user_id}"


def scenario_id(user_id: int, task_id: str) -> str:
    return f"{user_folder(user_id)}/{task_id}"


@dataclass(frozen=True, slots=True)
class User:
    """One user profile. `preferences` and `interactions` cover every domain in the file, masked or not."""

    user_id: int
    demographics: dict[str, str]
    """Demographic fields without `user_id` (the files repeat it as "user<N>")."""
    preferences: dict[str, dict[str, PreferenceValue]]
    interests: dict[str, bool]
    """The interest mask: domain -> whether the user cares about it."""
    interactions: dict[str, str]
    """Summary of past exchanges with an assistant, by domain."""

    @property
    def active_domains(self) -> list[str]:
        return [d for d, on in self.interests.items() if on]

    def is_active(self, domain: str) -> bool:
        return self.interests.get(domain, False)

    def active_preferences(self) -> dict[str, dict[str, PreferenceValue]]:
        """Preferences of the domains the mask keeps: what a user or judge prompt may see."""
        return {d: p for d, p in self.preferences.items() if self.is_active(d)}

    def active_interactions(self) -> dict[str, str]:
        return {d: text for d, text in self.interactions.items() if self.is_active(d)}

    def preferences_for(self, domains: list[str]) -> dict[str, dict[str, PreferenceValue]]:
        """Preferences of the given domains (a task's), in that order, skipping masked ones."""
        return {d: self.preferences[d] for d in domains if self.is_active(d) and d in self.preferences}

    def interactions_for(self, domains: list[str]) -> dict[str, str]:
        return {d: self.interactions[d] for d in domains if self.is_active(d) and d in self.interactions}


@dataclass(frozen=True, slots=True)
class TaskDefinition:
    """A task as defined once in task/<Domain>/task.jsonl, before it is given to users."""

    task_id: str
    domains: list[str]
    user_intent: str
    task_description: str
    task_goal: str
    relevant_preferences: list[str]

    @property
    def task_type(self) -> str:
        return parse_task_id(self.task_id)[0]

    @property
    def number(self) -> int:
        return parse_task_id(self.task_id)[2]

    @property
    def folder(self) -> str:
        """The folder under task/ that defines it."""
        kind, domain, _ = parse_task_id(self.task_id)
        return MULTI_DOMAIN if kind == MD else str(domain)

    def for_user(self, user_id: int, situation: dict[str, str]) -> Scenario:
        """This task given to a user in a situation (keys: SITUATION_FIELDS)."""
        return Scenario(user_id=user_id, task_id=self.task_id, domains=self.domains,
                        user_intent=self.user_intent, task_description=self.task_description,
                        task_goal=self.task_goal, relevant_preferences=self.relevant_preferences,
                        situation=situation)


@dataclass(frozen=True, slots=True)
class Scenario:
    """One user x task pair: the task as given to this user (its text may differ from the
    definition's) and the situation the user is in."""

    user_id: int
    task_id: str
    domains: list[str]
    user_intent: str
    task_description: str
    task_goal: str
    relevant_preferences: list[str]
    situation: dict[str, str]
    """Keys: SITUATION_FIELDS (location, device, time_of_day, day_of_week, environment)."""

    @property
    def scenario_id(self) -> str:
        return scenario_id(self.user_id, self.task_id)

    @property
    def task_type(self) -> str:
        return parse_task_id(self.task_id)[0]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Scenario:
        """From a Benchmark.scenarios row (as a dict)."""
        return cls(user_id=int(row["user_id"]), task_id=row["task_id"], domains=row["domains"],
                   user_intent=row["user_intent"], task_description=row["task_description"],
                   task_goal=row["task_goal"], relevant_preferences=row["relevant_preferences"],
                   situation={k: row[k] for k in SITUATION_FIELDS})

    def row(self) -> ScenarioRow:
        return (self.scenario_id, self.user_id, self.task_id, self.task_type, self.domains, self.user_intent,
                self.task_description, self.task_goal, self.relevant_preferences,
                *(self.situation[k] for k in SITUATION_FIELDS))

    def task_context(self) -> dict[str, object]:
        """The `task` entry of an llm Request context (docs/architecture.md)."""
        return {"task_id": self.task_id, "task_type": self.task_type, "domains": self.domains,
                "user_intent": self.user_intent, "task_description": self.task_description,
                "task_goal": self.task_goal, "relevant_preferences": self.relevant_preferences}
