"""A synthetic sensitivity grid with a planted structure, for the robustness tables' tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

TRUE_P = {"ref-all": 3.0, "ref-mid": 2.7, "ref-dialogue": 2.0}
"""Each assistant's true personalization under the cooperative user."""
TRUE_TC = {"ref-all": 0.8, "ref-mid": 0.7, "ref-dialogue": 0.4}
RETICENT_LOSS = {"ref-all": 0.5}
"""What the reticent user costs an assistant in P: only `ref-all`, which then ranks below `ref-mid`."""
JUDGE_OFFSET = {"judge-a": 0.0, "judge-b": 0.3}


def make_grid(users: int = 12, scenarios: int = 3, repeats: int = 1,
              styles: tuple[str, ...] = ("cooperative", "reticent"), seed: int = 0) -> pd.DataFrame:
    """Tidy scores: users x SD scenarios x assistants x styles x judges x repeats, P and TC."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(users):
        user_effect = rng.normal(0, 0.2)
        for s in range(scenarios):
            scenario = f"u{u:02d}-s{s}"
            for assistant, p in TRUE_P.items():
                for style in styles:
                    loss = RETICENT_LOSS.get(assistant, 0.0) if style == "reticent" else 0.0
                    for sample in range(repeats):
                        noise = rng.normal(0, 0.1)
                        success = float(rng.random() < TRUE_TC[assistant])
                        for judge, offset in JUDGE_OFFSET.items():
                            base = {"assistant_model": assistant, "assistant_setting": "base",
                                    "user_model": "sim", "user_style": style, "judge_model": judge,
                                    "user_id": f"user{u:02d}",
                                    "scenario_id": scenario, "task_type": "SD", "sample": sample,
                                    "dialogue_id": f"{scenario}-{assistant}-{style}-{sample}"}
                            rows.append({**base, "dimension": "personalization",
                                         "score": p - loss + user_effect + noise + offset})
                            rows.append({**base, "dimension": "task_completion", "score": success})
    frame = pd.DataFrame(rows)
    frame.attrs["origin"] = "a synthetic grid"
    return frame


@pytest.fixture
def grid() -> Callable[..., pd.DataFrame]:
    return make_grid
