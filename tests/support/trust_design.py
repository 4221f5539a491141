"""Scores of a nested design with known variance components, and a pilot's usage ledger (`usage_table`),
for the trust tests and benchmarks.

Each score is mean + arm effect + user + task + simulation sample + judge sample, each effect drawn
from a normal with the variance given; two arms on the same scenarios share a user's and a task's
effect up to an interaction (`user_arm`, `task_arm`: the variance of the arm-specific part), which is
what a paired design between two assistants sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from personalens_utils.measures.design import ARM, JUDGE_SAMPLE, SAMPLE, SCORE, TASK, USER


@dataclass(frozen=True)
class Truth:
    """The variances the scores are drawn with."""

    user: float = 1.0
    task: float = 0.5
    sample: float = 0.3
    judge: float = 0.2
    user_arm: float = 0.0
    task_arm: float = 0.0


def simulate(truth: Truth, *, users: int, tasks: int, repeats: int, judge_samples: int,
             effects: dict[str, float] | None = None, seed: int = 0) -> pd.DataFrame:
    """A design frame (`user`, `task`, `sample`, `judge_sample`, `assistant`, `score`), one arm per
    key of `effects` (default one arm "A" with effect 0)."""
    rng = np.random.default_rng(seed)
    effects = effects or {"A": 0.0}
    user = rng.normal(0, np.sqrt(truth.user), users)
    task = rng.normal(0, np.sqrt(truth.task), (users, tasks))
    shape = (users, tasks, repeats, judge_samples)
    u, t, s, j = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
    parts = []
    for arm, effect in effects.items():
        user_arm = rng.normal(0, np.sqrt(truth.user_arm), users)
        task_arm = rng.normal(0, np.sqrt(truth.task_arm), (users, tasks))
        sample = rng.normal(0, np.sqrt(truth.sample), shape[:3])
        judge = rng.normal(0, np.sqrt(truth.judge), shape)
        score = (effect + (user + user_arm)[u] + (task + task_arm)[u, t] + sample[u, t, s] + judge)
        parts.append(pd.DataFrame({USER: u.ravel(), TASK: [f"task{k}" for k in t.ravel()],
                                   SAMPLE: s.ravel(), JUDGE_SAMPLE: j.ravel(), ARM: arm,
                                   SCORE: score.ravel()}))
    return pd.concat(parts, ignore_index=True)


def as_tidy(frame: pd.DataFrame, *, backend: str = "offline") -> pd.DataFrame:
    """The design as the tidy score frame `load_scores` gives, in two dimensions: personalization
    (the latent score moved to 2.5 and rounded onto 1-4) and task completion (latent above 0)."""
    base = pd.DataFrame({
        "user_id": frame[USER].to_numpy(),
        "scenario_id": [f"user{u}/{t}" for u, t in zip(frame[USER], frame[TASK], strict=True)],
        "sample": frame[SAMPLE].to_numpy(),
        "judge_sample": frame[JUDGE_SAMPLE].to_numpy(),
        "assistant_model": frame[ARM].to_numpy(),
        "assistant_setting": "base",
        "task_type": "SD",
        "dialogue_id": [f"{a}/{u}/{t}/{s}" for a, u, t, s in
                        zip(frame[ARM], frame[USER], frame[TASK], frame[SAMPLE], strict=True)],
        "user_backend": backend, "assistant_backend": backend, "judge_backend": backend,
        "user_model_id": "user-sim", "assistant_model_id": frame[ARM].to_numpy(), "judge_model_id": "judge-1",
    })
    latent = frame[SCORE].to_numpy()
    parts = [base.assign(dimension="personalization", score=np.clip(np.round(2.5 + latent), 1, 4)),
             base.assign(dimension="task_completion", score=(latent > 0).astype(float))]
    tidy = pd.concat(parts, ignore_index=True)
    tidy.attrs["origin"] = "a simulated design"
    return tidy


KNOWN = Truth(user=0.6, task=0.8, sample=0.5, judge=0.3, user_arm=0.15, task_arm=0.3)
"""A truth with arm-specific user and task parts, for the power planner and the pilot of the trust exports."""
PRICED = "claude-3-5-haiku-20241022"
"""A model with a price in the registry (a retired one: the kit prices its successor)."""


def usage_table() -> pd.DataFrame:
    """A pilot's ledger: 40 dialogues (user agent offline, assistant priced), 80 judge samples."""
    return pd.DataFrame([
        {"stage": "simulation", "kind": "user_turn", "task": "", "backend": "offline", "model": "user-sim",
         "calls": 240, "input_tokens": 96_000, "output_tokens": 9_600},
        {"stage": "simulation", "kind": "assistant_turn", "task": "", "backend": "anthropic", "model": PRICED,
         "calls": 240, "input_tokens": 120_000, "output_tokens": 24_000},
        {"stage": "judging", "kind": "judge", "task": "", "backend": "anthropic", "model": PRICED,
         "calls": 480, "input_tokens": 480_000, "output_tokens": 48_000},
        {"stage": "validation", "kind": "check", "task": "", "backend": "anthropic", "model": PRICED,
         "calls": 5, "input_tokens": 5_000, "output_tokens": 500},
    ])
