"""The small design notebook 07 runs the report card on, and the judging it needs.

The card's probes re-judge dialogues, so their cost grows with the dialogues probed: notebook 07 probes
the dialogues of its first `probe_users` users only (`ProbeDesign`), judges them with every judge on the
card where the store lacks an ordinary judgment to pair a probe with, then runs each probe for each judge
(`judge_design`). Every step is the judging stage's: what is stored is skipped, so a rerun costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from personalens_utils.engine import StageReport
from personalens_utils.errors import KitError
from personalens_utils.judging import JudgingConfig, run_judging
from personalens_utils.judging.requests import ContextFor
from personalens_utils.records import Dialogue
from personalens_utils.roles import ModelRole
from personalens_utils.store import RunStore

from .probes import Probe, run_probe
from .report_card import JudgeRef


class DesignError(KitError, ValueError):
    """The probe design cannot be made as asked (no users, a bad size)."""


@dataclass(frozen=True)
class ProbeDesign:
    """The dialogues the card rests on: those of `users`, of `task_types`, in `setting`, with the user
    agent `user_model`, made with the prompt set `prompt_set`."""

    users: tuple[int, ...]
    task_types: tuple[str, ...]
    setting: str
    user_model: str
    prompt_set: str

    @classmethod
    def first(cls, users: Sequence[int], n_users: int | None, **rest: str | tuple[str, ...]) -> ProbeDesign:
        """The design on the first `n_users` of `users` in index order (None: all of them)."""
        if n_users is not None and (isinstance(n_users, bool) or not isinstance(n_users, int) or n_users < 2):
            raise DesignError(f"parameter probe_users={n_users!r}: give a whole number of at least 2 (a "
                              "profile swap needs another user), or None for every user")
        chosen = sorted(users)[:n_users]
        if len(chosen) < 2:
            raise DesignError(f"the probe design needs two or more users; the session has {len(chosen)}")
        return cls(tuple(chosen), **rest)  # type: ignore[arg-type]

    def select(self, dialogue: Dialogue) -> bool:
        """`select` for the runners and the card: a dialogue of the design."""
        return (dialogue.user_id in self.users and dialogue.task_type in self.task_types
                and dialogue.assistant_setting == self.setting and dialogue.user_model == self.user_model
                and dialogue.prompt_set == self.prompt_set)

    def describe(self) -> str:
        return (f"{len(self.users)} users ({', '.join(map(str, self.users))}), task types "
                f"{'/'.join(self.task_types)}, setting {self.setting!r}, user agent {self.user_model}, "
                f"prompt set {self.prompt_set!r}")


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

