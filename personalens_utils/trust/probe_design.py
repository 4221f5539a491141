"""The small design notebook 07 runs the report card on, and the judging it needs.

The card's probes re-judge dialogues, so their cost grows with the dialogues probed: notebook 07 probes
the dialogues of `probe_tasks` tasks of each type for its first `probe_users` users only (`ProbeDesign`,
`DesignSize`), judges them with every judge on the card where the store lacks an ordinary judgment to
pair a probe with, then runs each probe for each judge (`judge_design`). Every step is the judging
stage's: what is stored is skipped, so a rerun costs nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from personalens_utils.data import Benchmark
from personalens_utils.engine import StageReport
from personalens_utils.judging import JudgingConfig, run_judging
from personalens_utils.judging.requests import ContextFor
from personalens_utils.records import Dialogue
from personalens_utils.roles import ModelRole
from personalens_utils.store import RunStore

from .design import DesignError
from .probes import Probe, run_probe
from .report_card import JudgeRef


@dataclass(frozen=True)
class DesignSize:
    """How many users (the first, in index order) and how many tasks of each type per user (a seeded
    choice) the probes re-judge; None: all of them."""

    users: int | None = 6
    tasks: int | None = 10
    seed: int = 0

    def __post_init__(self) -> None:
        for name, value, least in (("probe_users", self.users, 2), ("probe_tasks", self.tasks, 1)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                why = " (a profile swap needs another user)" if least == 2 else ""
                raise DesignError(f"parameter {name}={value!r}: give a whole number of at least {least}, or "
                                  f"None for all{why}")


@dataclass(frozen=True)
class ProbeDesign:
    """The dialogues the card rests on: those of the chosen scenarios (users x tasks), in `setting`, with
    the user agent `user_model`, of the `assistants` (None: any), made with the prompt set `prompt_set`."""

    scenarios: frozenset[str]
    users: tuple[int, ...]
    setting: str
    user_model: str
    prompt_set: str
    assistants: frozenset[str] | None = None

    @classmethod
    def sample(cls, benchmark: Benchmark, task_types: Sequence[str], size: DesignSize,
               **rest: Any) -> ProbeDesign:
        """The first `size.users` users of `benchmark`, and for each `size.tasks` of its tasks of each of
        `task_types`, chosen by a hash of the scenario id seeded with `size.seed` (so the choice does not
        follow the domains' alphabetical order). `rest`: the other fields."""
        users = sorted(benchmark.users)[:size.users]
        if len(users) < 2:
            raise DesignError(f"the probe design needs two or more users; the benchmark at {benchmark.root} "
                              f"gives {len(users)}")
        frame = benchmark.scenarios
        frame = frame[frame["user_id"].isin(users) & frame["task_type"].isin(list(task_types))]
        key = [hashlib.sha256(f"{size.seed}:{sid}".encode()).hexdigest() for sid in frame["scenario_id"]]
        ranked = frame.assign(key=key).sort_values(["user_id", "task_type", "key"])
        chosen = ranked.groupby(["user_id", "task_type"], sort=True).head(size.tasks or len(ranked))
        assistants = rest.pop("assistants", None)
        return cls(frozenset(chosen["scenario_id"]), tuple(users),
                   assistants=frozenset(assistants) if assistants else None, **rest)

    def select(self, dialogue: Dialogue) -> bool:
        """`select` for the runners and the card: a dialogue of the design."""
        return (dialogue.scenario_id in self.scenarios and dialogue.assistant_setting == self.setting
                and dialogue.user_model == self.user_model and dialogue.prompt_set == self.prompt_set
                and (self.assistants is None or dialogue.assistant_model in self.assistants))

    def describe(self) -> str:
        whose = ", ".join(sorted(self.assistants)) if self.assistants else "every assistant stored"
        users = ", ".join(map(str, self.users))
        return (f"{len(self.scenarios)} scenarios of {len(self.users)} users ({users}); {whose}; setting "
                f"{self.setting!r}; user agent {self.user_model}; prompt set "
                f"{self.prompt_set!r}")


def judge_ref(role: ModelRole, prompt_set: str) -> JudgeRef:
    """The card's name for a judge role: its model, the backend that answers it, its prompt set."""
    return JudgeRef(role.model, role.client.backend_name, prompt_set)


def judge_design(store: RunStore, judges: Sequence[ModelRole], context_for: ContextFor,
                 probes: Sequence[Probe], config: JudgingConfig) -> list[StageReport]:
    """For each judge: the ordinary judgments of the design's dialogues on every dimension a probe
    re-judges (those `config.select` keeps), then each probe. `config` gives the selection, prompt set,
    offline-dialogue rule and spending limit; its judge and dimensions are set here."""
    dimensions = tuple(dict.fromkeys(d for probe in probes for d in probe.dimensions))
    reports = []
    for role in judges:
        mine = replace(config, judge_model=role.model, dimensions=dimensions, batch=False)
        reports.append(run_judging(store, role.client, context_for, mine))
        reports += [run_probe(store, role.client, context_for, probe, replace(mine, dimensions=None))
                    for probe in probes]
    return reports

