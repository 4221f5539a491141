"""What a simulation run is asked to do, as one typed value shared by the runner, the planner and
the cost estimate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from personalens_utils.data import MD, SD
from personalens_utils.llm import LLMClient
from personalens_utils.llm.role import Identified, Role
from personalens_utils.prompt_sets import KIT, PromptSet
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, user_style
from personalens_utils.runstore.identity import samples
from personalens_utils.runstore.shards import Shard
from personalens_utils.simulation.settings import AssistantSetting

DEFAULT_MODEL = "Claude 3 Sonnet"
"""The paper's user agent and main assistant (Claude 3 Sonnet)."""


@dataclass(frozen=True)
class SimulationConfig:
    """A simulation run: the scenarios (task types) and assistant settings, the two roles' models,
    whose prompts, and the run's limits.

    `assistant` is the assistant under test (an `assistants.Assistant`; default: `assistant_model` on
    the user agent's client), or for a planner or an estimate only its identity (an `llm.role.Role`, e.g.
    `assistant_model` on another backend than the user agent's).
    `max_turns` overrides the 20/30 caps; `limit` runs at most that many of the planned dialogues;
    `shard="i/n"` one machine's share; `max_cost_usd` stops new calls once that much is spent;
    `retry_errors` redoes dialogues stored as errors; `repeats=k` simulates each scenario and setting k
    times, independently (samples 0..k-1, each its own record and its own calls); `batch` runs the
    dialogues in rounds through the roles' batch APIs (`simulation.batch`), polled every
    `poll_interval_s`, a failed entry resubmitted up to `max_rounds` times; `user_style` is how the user
    agent plays its part (`prompt_templates.user_styles`; another style than cooperative makes other
    dialogues)."""

    settings: Sequence[str | AssistantSetting] = ("base",)
    task_types: Sequence[str] = (SD, MD)
    user_model: str = DEFAULT_MODEL
    assistant_model: str = DEFAULT_MODEL
    prompts: PromptSet = KIT
    assistant: Any = None
    retry_errors: bool = False
    max_turns: int | None = None
    limit: int | None = None
    shard: str | Shard | None = None
    max_cost_usd: float | None = None
    repeats: int = 1
    batch: bool = False
    poll_interval_s: float = 60.0
    max_rounds: int = 3
    user_style: str = COOPERATIVE

    def __post_init__(self) -> None:
        samples(self.repeats, "repeats")
        user_style(self.user_style)

    def user_on(self, client: LLMClient) -> Role:
        """The user agent: `user_model` playing `user_style`, called through `client`."""
        return Role.on(client, self.user_model, self.user_style)

    def assistant_for(self, user: Role) -> Identified:
        """Who the assistant under test is, for ids and prices: the one given, else `assistant_model` on
        the user agent's backend."""
        return self.assistant if self.assistant is not None else Role.of(self.assistant_model, user.backend)
