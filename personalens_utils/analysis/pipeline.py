"""Notebook 05's setup in one call: the session on the notebook's parameters, its three roles checked,
and the users the ablation runs on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personalens_utils.analysis.ablation import first_users
from personalens_utils.assistants import Assistant
from personalens_utils.data import Benchmark
from personalens_utils.roles import ModelRole
from personalens_utils.session import Session
from personalens_utils.store import RunStore


@dataclass(frozen=True)
class AblationRun:
    """What notebook 05 works on: the run store, the user agent, judge and assistant, and the first
    `ablation_users` of the session's users (`chosen`) with their benchmark."""

    store: RunStore
    out: Path
    user: ModelRole
    judge: ModelRole
    assistant: Assistant
    chosen: list[int]
    benchmark: Benchmark

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, AblationRun]:
        """The session (`compare_assistant`, when given, is read and loaded too) and the three roles
        checked once before the chosen users' benchmark is read."""
        session = Session.from_parameters(
            parameters, models=("user_model", "judge_model"),
            assistants=("assistant_model", "compare_assistant"), optional=("compare_assistant",))
        user, judge = session.role("user_model"), session.role("judge_model")
        assistant = session.assistant("assistant_model")
        print(session.preflight({"user agent": user, "assistant": assistant, "judge": judge}))
        chosen = first_users(session.user_ids(), parameters["ablation_users"])
        return session, cls(session.run_store, session.output_dir, user, judge, assistant, chosen,
                            session.load_benchmark(chosen))
