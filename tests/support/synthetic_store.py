"""A synthetic run store in the record formats of docs/architecture.md, for the analysis tests.

The scores follow known rules (a model effect,
a setting effect, a per-scenario effect shared by all settings, turn trends per domain), so tests
can check that the analysis recovers them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from personalens_utils.data import Benchmark
from personalens_utils.data.types import TaskDefinition, User
from personalens_utils.judging import DIMENSIONS as JUDGE_DIMENSIONS
from personalens_utils.llm.role import Role
from personalens_utils.runstore.identity import Variant, dialogue_id, judgment_id
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from support.records import put

SD_DOMAINS = ("Movies", "Music", "Messaging", "Alarm", "Books")
MD_TASKS = {"MD-task-1": ["Movies", "Music", "Events"], "MD-task-2": ["Alarm", "Messaging", "Calendar"]}
MODELS = {"model-a": 0.92, "model-b": 0.82, "model-c": 0.72}  # task completion probability on SD
SETTING_P_GAIN = {"vanilla": 0.0, "base": 0.0, "base+D": 0.1, "base+I": 0.9, "base+S": 0.1, "base+all": 1.0}
JUDGE = "judge-1"
SECOND_JUDGE = "judge-2"
USER_MODEL = "user-sim"
LOCAL_URL = "http://127.0.0.1:8077/v1"
"""Where `served_for_real` says its real model is served."""
DIMENSIONS = (
    "task_completion",
    "personalization",
    "naturalness_assistant",
    "naturalness_user",
    "coherence_assistant",
    "coherence_user",
    "turn_personalization",
)


def dialogue_record(
    user: int,
    task_id: str,
    domains: list[str],
    model: str,
    setting: str,
    n_turns: int,
    status: str = "terminated",
) -> dict:
    scenario = f"user{user}/{task_id}"
    turns = []
    for i in range(2 * n_turns):  # n_turns user messages, each answered
        role = "user" if i % 2 == 0 else "assistant"
        turns.append({"role": role, "content": f"{role} message {i} about {domains[0]} for user {user}"})
    user_agent, assistant = Role.of(USER_MODEL, "offline"), Role.of(model, "offline")
    return {
        "id": dialogue_id(scenario, setting, user=user_agent, assistant=assistant,
                          variant=Variant("v1")),
        "scenario_id": scenario,
        "user_id": user,
        "task_id": task_id,
        "task_type": "MD" if task_id.startswith("MD") else "SD",
        "domains": domains,
        "user_model": USER_MODEL,
        "assistant_model": model,
        "assistant_setting": setting,
        "prompt_version": "v1",
        "backend": "offline",
        "user_backend": user_agent.backend,
        "user_model_id": user_agent.model_id,
        "assistant_backend": assistant.backend,
        "assistant_model_id": assistant.model_id,
        "status": status,
        "error": "connection reset" if status == "error" else None,
        "turns": [] if status == "error" else turns,
        "n_turns": 0 if status == "error" else n_turns,
        "usage": {
            "input_tokens": 40 * n_turns,
            "output_tokens": 20 * n_turns,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
        },
        "cost_usd": 0.0,
        "retries": 0,
    }


def judgment_record(
    dialogue: str, dimension: str, score: float | None, judge: str = JUDGE, turn_scores: list | None = None
) -> dict:
    judge_role = Role.of(judge, "offline")
    return {
        "id": judgment_id(dialogue, dimension, judge=judge_role, variant=Variant("v1")),
        "dialogue_id": dialogue,
        "dimension": dimension,
        "judge_model": judge,
        "prompt_version": "v1",
        "backend": "offline",
        "judge_model_id": judge_role.model_id,
        "status": "ok" if score is not None or turn_scores is not None else "missing",
        "score": score,
        "turn_scores": turn_scores,
        "explanation": "synthetic",
        "raw": _answer(dimension, score),
        "attempts": 1,
    }


def _answer(dimension: str, score: float | None) -> str:
    """A judge answer that both scoring rules read as `score` (none when it is None)."""
    if score is None or dimension == "turn_personalization" or not float(score).is_integer():
        return "synthetic answer"
    if dimension == "task_completion":
        return f"VERDICT: {bool(score)}\nEXPLANATION: synthetic"
    return f"{JUDGE_DIMENSIONS[dimension].label} {int(score)}\nJustification: synthetic"


def build_store(root: Path, *, users: int = 24, seed: int = 0, second_judge: bool = True) -> RunStore:
    """Dialogues for three models under `base` and all six settings for model-a, judged in every dimension.

    Also: one errored dialogue (no judgments), a few missing judgments, and a second judge that
    rescored model-a's base dialogues with some noise.
    """
    rng = np.random.default_rng(seed)
    store = RunStore(root)
    tasks = _tasks()
    scenario_effect = {(u, t): rng.normal(0, 0.5) for u in range(1, users + 1) for t in tasks}
    dialogues, judgments = [], []
    runs = [(m, "base") for m in MODELS] + [("model-a", s) for s in SETTING_P_GAIN if s != "base"]
    for model, setting in runs:
        for (user, task_id), effect in scenario_effect.items():
            domains = tasks[task_id]
            md = task_id.startswith("MD")
            n_turns = int(rng.integers(2, 6)) * 2 + (2 if md else 0)
            if (model, setting, user, task_id) == ("model-c", "base", 1, "SD-Alarm-task-1"):
                dialogues.append(
                    dialogue_record(user, task_id, domains, model, setting, n_turns, status="error"))
                continue
            dlg = dialogue_record(user, task_id, domains, model, setting, n_turns)
            dialogues.append(dlg)
            p_tc = MODELS[model] - (0.15 if md else 0.0) - (0.05 if setting == "vanilla" else 0.0)
            scores = {
                "task_completion": float(rng.random() < p_tc),
                "personalization": float(np.clip(round(2 + SETTING_P_GAIN[setting] + effect), 1, 4)),
                "naturalness_assistant": float(rng.integers(3, 6)),
                "naturalness_user": float(rng.integers(4, 6)),
                "coherence_assistant": float(rng.integers(4, 6)),
                "coherence_user": float(rng.integers(4, 6)),
            }
            if user == 2 and task_id == "SD-Books-task-1":
                scores["personalization"] = None  # judge gave no valid score
            trend = {"Movies": 0.3, "Messaging": -0.3}.get(domains[0], 0.0)
            n_asst = n_turns // 2
            turn_scores = [
                float(np.clip(round(2 + trend * t + rng.normal(0, 0.3)), 1, 4)) for t in range(n_asst)
            ]
            if n_asst > 2:
                turn_scores[1] = None
            for dim, score in scores.items():
                judgments.append(judgment_record(dlg["id"], dim, score))
            judgments.append(
                judgment_record(dlg["id"], "turn_personalization", None, turn_scores=turn_scores))
            if second_judge and model == "model-a" and setting == "base":
                for dim, score in scores.items():
                    noisy = score
                    if score is not None and rng.random() < 0.2:
                        low, high = (
                            (0, 1) if dim == "task_completion" else (1, 4 if dim == "personalization" else 5)
                        )
                        noisy = float(rng.integers(low, high + 1))
                    judgments.append(judgment_record(dlg["id"], dim, noisy, judge=SECOND_JUDGE))
    put(store, Dialogue, dialogues)
    put(store, Judgment, judgments)
    return store


def served_for_real(tidy: pd.DataFrame, model: str = "model-b") -> pd.DataFrame:
    """The score frame with `model` a real model on a local openai server, the user agent, the judge and
    the other assistants still offline: a run like `make reproduce` with a small local model."""
    real = tidy["assistant_model"] == model
    return tidy.assign(
        assistant_backend=tidy["assistant_backend"].astype(str).where(~real, "openai"),
        assistant_model_id=tidy["assistant_model_id"].astype(str).where(~real, f"{model} at {LOCAL_URL}"))


def _tasks() -> dict[str, list[str]]:
    return {f"SD-{d}-task-{k}": [d] for d in SD_DOMAINS for k in (1, 2)} | MD_TASKS


def build_benchmark(users: int = 24) -> Benchmark:
    """An in-memory benchmark holding every scenario of `build_store` (made-up profiles and tasks)."""
    tasks = [
        TaskDefinition(
            task_id,
            domains,
            f"You want help with {task_id}.",
            f"The user needs {task_id} done.",
            f"Finish {task_id} to the user's liking.",
            ["Preferred Genres"],
        )
        for task_id, domains in _tasks().items()
    ]
    people = [
        User(
            u,
            {"age": f"{20 + u} years", "location": "Lisbon"},
            {d: {"Preferred Genres": ["jazz", "drama"]} for d in (*SD_DOMAINS, "Events", "Calendar")},
            dict.fromkeys((*SD_DOMAINS, "Events", "Calendar"), True),
            {d: f"User {u} often asks about {d.lower()} in the evening." for d in SD_DOMAINS},
        )
        for u in range(1, users + 1)
    ]
    situation = {
        "location": "home",
        "device": "Laptop",
        "time_of_day": "Evening",
        "day_of_week": "Friday",
        "environment": "Quiet",
    }
    scenarios = [t.for_user(u.user_id, situation) for u in people for t in tasks]
    return Benchmark.from_records(people, tasks, scenarios)
