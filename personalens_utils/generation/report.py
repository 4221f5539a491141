"""Small views of a generated benchmark for notebook 01: a profile, the tasks, the situations.

Every caption carries the result's label, so text from the offline backend is never shown as if a
language model had written it.
"""

from __future__ import annotations

import pandas as pd
from pandas.io.formats.style import Styler

from personalens_utils.data import Benchmark
from personalens_utils.generation.runner import GenerationResult
from personalens_utils.reference.situation import SITUATION_FIELDS


def captioned(frame: pd.DataFrame, title: str, result: GenerationResult) -> Styler:
    return frame.style.set_caption(f"{title} — {result.label}").hide(axis="index")


def overview(result: GenerationResult) -> pd.DataFrame:
    """Users, tasks and scenarios written, by task type."""
    bench = result.benchmark
    rows = []
    for kind in ("SD", "MD"):
        tasks = [t for t in bench.tasks.values() if t.task_type == kind]
        scenarios = bench.scenarios[bench.scenarios["task_type"] == kind]
        rows.append({"task type": kind, "tasks": len(tasks), "scenarios": len(scenarios),
                     "users with a task": scenarios["user_id"].nunique()})
    frame = pd.DataFrame(rows)
    frame.loc[len(frame)] = {"task type": "all", "tasks": frame["tasks"].sum(),
                             "scenarios": frame["scenarios"].sum(), "users with a task": len(bench.users)}
    return frame


def profile_frame(bench: Benchmark, user_id: int, domains: int = 3) -> pd.DataFrame:
    """The demographics and the first `domains` kept domains of one user, one row per field."""
    user = bench.user(user_id)
    rows = [{"part": "demographics", "domain": "", "field": field, "value": value}
            for field, value in user.demographics.items()]
    rows.append({"part": "interest mask", "domain": "", "field": "kept domains",
                 "value": f"{len(user.active_domains)} of {len(user.interests)}"})
    for domain in user.active_domains[:domains]:
        for name, value in user.preferences[domain].items():
            shown = value if isinstance(value, str) else ", ".join(value)
            rows.append({"part": "preferences", "domain": domain, "field": name, "value": shown})
        rows.append({"part": "past interactions", "domain": domain, "field": "summary",
                     "value": user.interactions[domain]})
    return pd.DataFrame(rows)


def tasks_frame(bench: Benchmark, per_type: int = 3) -> pd.DataFrame:
    """The first task definitions of each type."""
    rows = []
    for kind in ("SD", "MD"):
        tasks = [t for t in bench.tasks.values() if t.task_type == kind][:per_type]
        rows += [{"task_id": t.task_id, "domains": ", ".join(t.domains), "user intent": t.user_intent,
                  "goal": t.task_goal, "relevant preferences": ", ".join(t.relevant_preferences)}
                 for t in tasks]
    return pd.DataFrame(rows)


def situation_frame(bench: Benchmark) -> pd.DataFrame:
    """How often each value of the enumerated situation variables occurs across scenarios."""
    frames = []
    for column, label in SITUATION_FIELDS.items():
        if column == "location":
            continue
        counts = bench.scenarios[column].value_counts()
        frames.append(pd.DataFrame({"variable": label, "value": counts.index, "scenarios": counts.to_numpy(),
                                    "share": (counts / counts.sum()).round(3).to_numpy()}))
    return pd.concat(frames, ignore_index=True)
