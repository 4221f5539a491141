"""The small design notebook 07 runs the report card, the variance decomposition and the power plan on,
and the simulating and judging it needs.

The card's probes re-judge dialogues, so their cost grows with the dialogues probed: notebook 07 probes
the dialogues of `probe_tasks` tasks of each type for its first `probe_users` users only (`ProbeDesign`,
`DesignSize`). On the same scenarios it simulates each assistant `repeats` times (`simulate_design`; the
run's own dialogues are sample 0, so only the later samples are new), judges every dialogue with every
judge on the card `judge_samples` times, then runs each probe for each judge on the first sample of each
dialogue (`judge_design`). Every step is the simulation's or the judging stage's: what is stored is
skipped, so a rerun costs nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from personalens_utils.assistants import Assistant, spec_of
from personalens_utils.data import Benchmark
from personalens_utils.judging import JudgingConfig, run_judging
from personalens_utils.judging.requests import ContextFor
from personalens_utils.llm.role import Role
from personalens_utils.measures.design import DesignError
from personalens_utils.runstore.engine import StageReport
from personalens_utils.runstore.identity import DIALOGUE_PROMPTS
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation
from personalens_utils.trust.power import JUDGING, SIMULATION, UnitCosts
from personalens_utils.trust.probes import Probe, run_probe
from personalens_utils.trust.report_card import JudgeRef


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

    def part_of(self, benchmark: Benchmark, scenarios: Collection[str] | None = None) -> Benchmark:
        """`benchmark` cut down to the design's users and scenarios (those of them in `scenarios` when
        given): what `simulate_design` simulates."""
        keep = self.scenarios if scenarios is None else self.scenarios & set(scenarios)
        scenarios = benchmark.scenarios[benchmark.scenarios["scenario_id"].isin(keep)]
        return Benchmark({u: benchmark.user(u) for u in self.users}, benchmark.tasks,
                         scenarios.reset_index(drop=True), benchmark.root)

    def assistant_models(self, store: RunStore) -> list[str]:
        """The design's assistants: those named, else every assistant with a dialogue of the design."""
        if self.assistants is not None:
            return sorted(self.assistants)
        return sorted({d.assistant_model for d in store.read(Dialogue) if self.select(d)})

    def assistant_specs(self, store: RunStore) -> dict[str, str]:
        """The spec of each assistant with a dialogue of the design, by the name its records carry, so
        each is simulated again as itself, on the backend and server that made it (`assistants.spec_of`)."""
        made = {d.assistant_role for d in store.read(Dialogue) if self.select(d)}
        ordered = sorted(made, key=lambda role: (role.model, role.backend, role.model_id))
        return {role.model: spec_of(role) for role in ordered}

    def scores(self, tidy: pd.DataFrame) -> pd.DataFrame:
        """The rows of a tidy score frame (`measures.scores.load_scores`) that belong to the design."""
        keep = (tidy["scenario_id"].isin(self.scenarios) & (tidy["assistant_setting"] == self.setting)
                & (tidy["user_model"] == self.user_model) & (tidy[DIALOGUE_PROMPTS] == self.prompt_set))
        if self.assistants is not None:
            keep &= tidy["assistant_model"].isin(self.assistants)
        return tidy[keep]

    def describe(self) -> str:
        whose = ", ".join(sorted(self.assistants)) if self.assistants else "every assistant stored"
        users = ", ".join(map(str, self.users))
        return (f"{len(self.scenarios)} scenarios of {len(self.users)} users ({users}); {whose}; setting "
                f"{self.setting!r}; user agent {self.user_model}; prompt set "
                f"{self.prompt_set!r}")


def judge_ref(role: Role, prompt_set: str) -> JudgeRef:
    """The card's name for a judge role: its model, the backend that answers it, its prompt set."""
    return JudgeRef(role.model, role.client.backend_name, prompt_set)


def simulate_design(benchmark: Benchmark, store: RunStore, user: Role, assistants: Sequence[Assistant],
                    design: ProbeDesign, config: SimulationConfig) -> list[StageReport]:
    """Each of `assistants` on the design's scenarios in its setting with the user agent `user`,
    `config.repeats` samples of each (its prompts and limits too), on the scenarios where the store holds
    that assistant's sample 0 made with `user`'s backend (notebook 03's dialogue): that one is skipped, so
    only the further samples are simulated, and a run never starts the design over on another backend.
    An assistant whose stored samples 0 another one made under its name is refused: its repeats and
    theirs would be one arm of the design, with two dialogues of one sample."""
    held: dict[str, set[str]] = {}
    made_by: dict[str, set[str]] = {}
    for d in store.read(Dialogue):
        if design.select(d) and d.sample == 0 and d.user_backend == user.backend:
            held.setdefault(d.assistant_model, set()).add(d.scenario_id)
            made_by.setdefault(d.assistant_model, set()).add(f"{d.assistant_backend}:{d.assistant_model_id}")
    for assistant in assistants:
        mine = f"{assistant.backend}:{assistant.model_id}"
        if others := made_by.get(assistant.model, set()) - {mine}:
            raise DesignError(f"assistant {assistant.model!r} is {mine} here, but the design's first samples "
                              f"of that name were made by {sorted(others)}: give the spec that made them, or "
                              "keep one assistant of that name in the store")
    return [run_simulation(design.part_of(benchmark, held[assistant.model]), store, user.client,
                           replace(config, settings=(design.setting,), user_model=user.model,
                                   assistant_model=assistant.model, assistant=assistant))
            for assistant in assistants if assistant.model in held]


def judge_design(store: RunStore, judges: Sequence[Role], context_for: ContextFor,
                 probes: Sequence[Probe], config: JudgingConfig) -> list[StageReport]:
    """For each judge: the ordinary judgments of the design's dialogues on every dimension a probe
    re-judges (those `config.select` keeps, `config.judge_samples` of each), then each probe, once, on
    the first sample of each dialogue. `config` gives the selection, judge samples, prompt set,
    offline-dialogue rule and spending limit; its judge and dimensions are set here."""
    dimensions = tuple(dict.fromkeys(d for probe in probes for d in probe.dimensions))
    select = config.select
    first = replace(config, judge_samples=1,
                    select=lambda d: d.sample == 0 and (select is None or select(d)))
    reports = []
    for role in judges:
        mine = replace(config, judge_model=role.model, dimensions=dimensions, batch=False)
        reports.append(run_judging(store, role.client, context_for, mine))
        reports += [run_probe(store, role.client, context_for, probe,
                              replace(first, judge_model=role.model, batch=False))
                    for probe in probes]
    return reports


def unit_costs(usage: pd.DataFrame, simulated: Sequence[StageReport], judged: StageReport,
               judge: Role) -> UnitCosts | None:
    """What one dialogue and one judge sample cost, from the calls this session made (`usage`, the
    session's `usage_frame()`): the simulation reports' new dialogues, and `judge`'s new judgments
    (`judged`, its judging report) over the dimensions it judged. None when the session made neither
    (a rerun that found everything stored)."""
    dialogues = sum(report.finished + report.errors for report in simulated)
    dimensions = [d for d in str(judged.details.get("dimensions", "")).split(", ") if d]
    samples = (judged.finished + judged.errors) // max(1, len(dimensions))
    if not dialogues or not samples:
        return None
    named = {judge.model, judge.client.resolve_model(judge.model)}  # the ledger books the resolved id
    judging = (usage["stage"] == JUDGING) & usage["model"].isin(named)
    mine = usage[(usage["stage"] == SIMULATION) | judging]
    return UnitCosts.from_usage(mine, dialogues=dialogues, judge_samples=samples,
                                origin="the calls of this notebook's new dialogues and judge samples")

