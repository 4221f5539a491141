"""A small synthetic benchmark for the simulation, offline-dialogue and official-layout tests.

Users get preference values from the schema's options, and each domain's interaction summary
mentions some of them verbatim, the way the official summaries do, so an assistant that reads the
summaries has something to find. `rich_scenario` gives one scenario summaries as long as the official
ones, for the prompt-caching and cost tests.
"""

from __future__ import annotations

import random
from dataclasses import replace

from personalens_utils.data import Benchmark
from personalens_utils.data.types import TaskDefinition, User
from personalens_utils.reference.schema import load_schema
from personalens_utils.simulation import ScenarioContext

DOMAINS = ("Alarm", "Movies", "Restaurants", "Hotels", "Events")
TASKS = (
    TaskDefinition("SD-Alarm-task-1", ["Alarm"], "Set a new alarm for tomorrow morning at your preferred "
                   "wake-up time, with your favorite alarm sound.", "The user needs a new alarm.",
                   "An alarm is set with the user's time, sound and recurrence.",
                   ["Alarm Time Preference", "Alarm Sound Preference", "Alarm Recurring Preference"]),
    TaskDefinition("SD-Movies-task-1", ["Movies"], "Find a movie to watch this weekend that matches your "
                   "preferred genres and theater type.", "The user wants a movie for the weekend.",
                   "The user gets a movie that fits their genres and theater type.",
                   ["Preferred Genres", "Theater Type Preference"]),
    TaskDefinition("SD-Restaurants-task-1", ["Restaurants"], "Book a table for dinner based on your "
                   "cuisine and ambiance preferences.", "The user wants to book dinner.",
                   "A table is booked at a restaurant with the user's cuisine and ambiance.",
                   ["Cuisine Preference", "Ambiance Preference", "Price Range"]),
    TaskDefinition("MD-task-1", ["Restaurants", "Hotels", "Events"], "Plan a weekend away by finding a "
                   "hotel, a restaurant and an event that match your preferences.",
                   "The user plans a weekend away.", "Hotel, dinner and an event are booked.",
                   ["Cuisine Preference", "Room Type Preference", "Event Type Preference", "Price Range"]),
)
HISTORY = " ".join(
    f"In session {k} the user asked for a {mood} playlist and kept the jazz and blues picks on Spotify."
    for k, mood in enumerate(["calm", "upbeat", "late-night", "road-trip", "rainy-day", "focus"] * 4, start=1)
)
"""A past-interaction summary as long as the official ones, so prefixes reach the models' cache minimum."""
SITUATION = {"location": "Lyon, France", "device": "Smartphone", "time_of_day": "Evening",
             "day_of_week": "Friday", "environment": "Quiet"}


def _preferences(rng: random.Random) -> dict[str, dict[str, str | list[str]]]:
    schema = load_schema()
    prefs: dict[str, dict[str, str | list[str]]] = {}
    for domain in DOMAINS:
        prefs[domain] = {}
        for pref in schema.domain(domain).preferences:
            pool = list(pref.options or pref.examples) or [f"{pref.name} pick"]
            if pref.multi_valued:
                prefs[domain][pref.name] = rng.sample(pool, min(2, len(pool)))
            else:
                prefs[domain][pref.name] = rng.choice(pool)
    return prefs


def _summary(domain: str, prefs: dict[str, str | list[str]]) -> str:
    """A past-interaction summary that mentions every other preference's values verbatim."""
    sentences = [f"The user often asks the assistant for help with {domain.lower()}."]
    for index, (name, value) in enumerate(prefs.items()):
        if index % 2:
            continue
        values = value if isinstance(value, list) else [value]
        sentences.append(f"For the {name.lower()}, they have repeatedly chosen {' and '.join(values)}.")
    return " ".join(sentences)


def tiny_users(n_users: int = 3, seed: int = 1) -> list[User]:
    rng = random.Random(seed)
    users = []
    for user_id in range(n_users):
        prefs = _preferences(rng)
        users.append(User(
            user_id=user_id,
            demographics={"age": "25-34 years old", "gender": "Female",
                          "employment_status": "Working full-time", "english_proficiency": "Native speaker",
                          "reside_country": "France"},
            preferences=prefs,
            interests={d: True for d in DOMAINS},
            interactions={d: _summary(d, p) for d, p in prefs.items()},
        ))
    return users


def tiny_benchmark(n_users: int = 3, seed: int = 1) -> Benchmark:
    """`n_users` users x the four tasks above (3 SD + 1 MD scenarios each)."""
    users = tiny_users(n_users, seed)
    scenarios = [task.for_user(u.user_id, dict(SITUATION)) for u in users for task in TASKS]
    return Benchmark.from_records(users, TASKS, scenarios)


def rich_scenario(task_type: str) -> ScenarioContext:
    """The first scenario of `task_type` of one user, every interaction summary replaced by `HISTORY`."""
    bench = tiny_benchmark(n_users=1)
    scenario = next(iter(bench.iter_scenarios([task_type])))
    ctx = ScenarioContext.of(scenario, bench.user(scenario.user_id))
    return replace(ctx, interactions={domain: HISTORY for domain in ctx.interactions})
