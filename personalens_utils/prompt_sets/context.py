"""The material every prompt set draws on for one user x task: the scenario and the user's profile,
limited to the task's domains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from personalens_utils.data.types import Scenario, User


@dataclass(frozen=True)
class ScenarioContext:
    """Everything about one user x task that prompts draw on, limited to the task's domains."""

    scenario: Scenario
    demographics: dict[str, str]
    preferences: dict[str, dict[str, Any]]
    interactions: dict[str, str]

    @classmethod
    def of(cls, scenario: Scenario, user: User) -> ScenarioContext:
        if user.user_id != scenario.user_id:
            raise ValueError(f"scenario {scenario.scenario_id} belongs to user {scenario.user_id}, "
                             f"not user {user.user_id}")
        return cls(scenario, dict(user.demographics), user.preferences_for(scenario.domains),
                   user.interactions_for(scenario.domains))

    @property
    def situation(self) -> dict[str, str]:
        return dict(self.scenario.situation)
