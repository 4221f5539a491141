"""The caption of notebook 03's outcome table says which roles the offline backend played."""

from __future__ import annotations

import pandas as pd
from support.records import dialogue_json

from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.simulation.report import outcome_table


def _frame(**fields: str) -> pd.DataFrame:
    rows = [dialogue_json(f"d{k}", task_type=task, **fields) for k, task in enumerate(["SD", "MD"])]
    return pd.DataFrame(rows).assign(n_turns=3, retries=0, cost_usd=0.0)


def test_an_offline_user_agent_beside_a_real_assistant_is_named_as_such():
    _, caption = outcome_table(_frame(backend="openai", user_backend="offline"))
    assert caption.endswith(f" Made in part with the {OFFLINE_LABEL} (the user agent), in part with openai.")


def test_all_offline_and_all_real_read_as_before():
    _, offline = outcome_table(_frame(backend="offline"))
    assert offline.endswith(f" Made with the {OFFLINE_LABEL}.")
    _, real = outcome_table(_frame(backend="anthropic"))
    assert real.endswith(" Backend: anthropic.")
