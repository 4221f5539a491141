"""Scores of a nested design with known variance components, for the trust tests and benchmarks.

Each score is mean + arm effect + user + task + simulation sample + judge sample, each effect drawn
from a normal with the variance given; two arms on the same scenarios share a user's and a task's
effect up to an interaction (`user_arm`, `task_arm`: the variance of the arm-specific part), which is
what a paired design between two assistants sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from personalens_utils.trust.design import ARM, JUDGE_SAMPLE, SAMPLE, SCORE, TASK, USER


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
