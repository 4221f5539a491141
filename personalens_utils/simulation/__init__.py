"""The simulation stage: a user agent and the assistant under test talk through each scenario.

`run_simulation(benchmark, run_dir, client, settings=[...])` fills the run store's dialogues table;
`simulate_dialogue` runs one dialogue; `AssistantSetting` composes the assistant's setting.
"""

from .loop import TURN_CAPS, dialogue_id, simulate_dialogue, split_terminate
from .prompting import ScenarioContext, assistant_request, assistant_system, user_request
from .report import default_users, nothing_to_describe, outcome_table, run_dialogues
from .runner import (
    DEFAULT_MODEL,
    arun_simulation,
    dialogue_frame,
    estimate_simulation,
    plan_dialogues,
    run_simulation,
)
from .settings import PAPER_SETTINGS, AssistantSetting, SettingError, default_assistant

__all__ = [
    "DEFAULT_MODEL",
    "PAPER_SETTINGS",
    "TURN_CAPS",
    "AssistantSetting",
    "ScenarioContext",
    "SettingError",
    "arun_simulation",
    "assistant_request",
    "assistant_system",
    "default_assistant",
    "default_users",
    "dialogue_frame",
    "dialogue_id",
    "estimate_simulation",
    "nothing_to_describe",
    "outcome_table",
    "plan_dialogues",
    "run_dialogues",
    "run_simulation",
    "simulate_dialogue",
    "split_terminate",
    "user_request",
]
