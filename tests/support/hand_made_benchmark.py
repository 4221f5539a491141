"""A benchmark written by hand in the official data layout (profile/, task/): two users, a few tasks,
for the data layer's reading and writing tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from personalens_utils.reference.schema import load_schema

DOMAINS = ("Alarm", "Music", "Rental Cars", "Restaurants")
DEFINITIONS: dict[str, list[dict[str, Any]]] = {
    "Alarm": [
        {"Task Number": 1, "Task Description": "Someone wants a wake-up call.", "User Intent": "Get woken.",
         "Task Goal": "An alarm exists.", "Relevant Affinity Types": ["Alarm Time Preference"]},
        {"Task Number": 2, "Task Description": "Someone checks alarms.", "User Intent": "See alarms.",
         "Task Goal": "Alarms were listed.", "Relevant Affinity Types": []},
    ],
    "Rental Cars": [
        {"Task Number": 1, "Task Description": "Someone hires a car.", "User Intent": "Hire a car.",
         "Task Goal": "A car is booked.", "Relevant Affinity Types": ["Car Type Preference"]},
    ],
    "Multi-Domain": [
        {"Task Number": 1, "Task Description": "An evening out.", "User Intent": "Plan dinner and music.",
         "Task Goal": "Table and playlist chosen.", "Relevant Domains": ["Restaurants", "Music"],
         "Relevant Affinity Types": ["Cuisine Preference", "Preferred Genres (Music)"]},
    ],
}


def _preferences(domain: str) -> dict[str, Any]:
    prefs = load_schema().domain(domain).preferences
    return {p.name: ([(p.options or p.examples)[0]] if p.multi_valued else (p.options or p.examples)[0])
            for p in prefs}


def _situation(place: str) -> dict[str, str]:
    return {"Location": place, "Device": "Phone", "Time of Day": "Morning", "Day of the Week": "Monday",
            "Environment": "Quiet"}


def _task(task_id: str, domains: list[str], place: str, definition: dict[str, Any]) -> dict[str, Any]:
    return {"Task Description": definition["Task Description"], "User Intent": definition["User Intent"],
            "Task Goal": definition["Task Goal"],
            "Relevant Affinity Types": definition["Relevant Affinity Types"], "task_id": task_id,
            "situations": _situation(place), "Relevant Domains": domains}


def _write(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1), encoding="utf-8")


def make_benchmark(root: Path) -> Path:
    """Two users (3 and 5); user 3 has no interest in rental cars."""
    for folder, lines in DEFINITIONS.items():
        (root / "task" / folder).mkdir(parents=True)
        (root / "task" / folder / "task.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    alarm1, alarm2 = DEFINITIONS["Alarm"]
    for user_id, cars in ((3, False), (5, True)):
        user = root / "profile" / f"user{user_id}"
        interests = {d: int(d != "Rental Cars" or cars) for d in DOMAINS}
        _write(user / "profile.json", {
            "affinities": {d: _preferences(d) for d in DOMAINS},
            "demographics": {"user_id": f"user{user_id}", "age": "25-34 years old", "gender": "Female"},
            "interests": interests,
            "interactions": {d: f"Talked about {d.lower()} with user {user_id}." for d in DOMAINS},
        })
        sd = {"Task 1": _task("SD-Alarm-task-2", ["Alarm"], "Oslo", alarm2),
              "Task 2": _task("SD-Alarm-task-1", ["Alarm"], "Bergen", alarm1)}
        if cars:
            cars_task = DEFINITIONS["Rental Cars"][0]
            sd["Task 3"] = _task("SD-Rental Cars-task-1", ["Rental Cars"], "Oslo", cars_task)
        _write(user / "tasks.json", sd)
        md = DEFINITIONS["Multi-Domain"][0]
        _write(user / "tasks_md.json", {"Task 1": _task("MD-task-1", ["Restaurants", "Music"], "Oslo", md)})
    return root
