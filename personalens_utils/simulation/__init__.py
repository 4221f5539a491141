"""The simulation stage: a user agent and the assistant under test talk through each scenario.

`run_simulation(benchmark, run_dir, client, SimulationConfig(settings=[...]))` fills the run store's
dialogues table; `simulate_dialogue` runs one dialogue; `AssistantSetting` composes the assistant's
setting. The requests are the prompt set's (`prompt_sets`); the kit's builders are re-exported here.
"""

from personalens_utils.prompt_sets import ScenarioContext, split_terminate
from personalens_utils.prompt_sets.kit import assistant_request, assistant_system, user_request
from personalens_utils.simulation.config import DEFAULT_MODEL, SimulationConfig
from personalens_utils.simulation.loop import TURN_CAPS, simulate_dialogue
from personalens_utils.simulation.report import (
    nothing_to_describe,
    outcome_table,
    run_dialogues,
)
from personalens_utils.simulation.runner import (
    arun_simulation,
    dialogue_frame,
    estimate_simulation,
    plan_dialogues,
    run_simulation,
)
from personalens_utils.simulation.settings import PAPER_SETTINGS, AssistantSetting, SettingError, hidden_note

__all__ = [
    "DEFAULT_MODEL",
    "PAPER_SETTINGS",
    "TURN_CAPS",
    "AssistantSetting",
    "ScenarioContext",
    "SettingError",
    "SimulationConfig",
    "arun_simulation",
    "assistant_request",
    "assistant_system",
    "dialogue_frame",
    "estimate_simulation",
    "hidden_note",
    "nothing_to_describe",
    "outcome_table",
    "plan_dialogues",
    "run_dialogues",
    "run_simulation",
    "simulate_dialogue",
    "split_terminate",
    "user_request",
]
