"""The roles tests name by backend: the configured user agent or judge on a backend, as the session would
make them (`SimulationConfig.user_on`, `JudgingConfig.judge_on`) without a client."""

from __future__ import annotations

from personalens_utils.judging import JudgingConfig
from personalens_utils.llm.role import Role
from personalens_utils.simulation import SimulationConfig


def user_of(config: SimulationConfig, backend: str, endpoint: str = "") -> Role:
    """The user agent `config` names, on `backend` (served at `endpoint`)."""
    return Role.of(config.user_model, backend, endpoint, config.user_style)


def judge_of(config: JudgingConfig, backend: str, endpoint: str = "") -> Role:
    """The judge `config` names, on `backend` (served at `endpoint`)."""
    return Role.of(config.judge_model, backend, endpoint)
