"""The sensitivity grid of notebook 10: assistants x user agents (model x style) x judges, run against one
run store through the same runners as notebooks 03 and 04.

The engine skips every stored id, so a condition a reproduction or an earlier grid already made costs
nothing; the grid counts, per condition, the dialogues and judgments it found stored and those it made,
so a reader sees the reuse rather than trusting it. Before any call the plan (`plan_cost`) prices the
dialogues still to make and every judgment still to make (live, batch, batch with caching: the kit's
estimates), those of dialogues not made yet on stand-ins of the paper's average length; the judgments are
priced again from the real dialogues before judging. `max_cost_usd` bounds the whole grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from personalens_utils.assistants import Assistant
from personalens_utils.data import Benchmark
from personalens_utils.judging import (
    JudgingConfig,
    benchmark_contexts,
    estimate_judging,
    judge_model_key,
    run_judging,
)
from personalens_utils.judging.plan import PlannedSimulation, estimate_judging_planned
from personalens_utils.llm.budget import CostEstimate
from personalens_utils.llm.role import Role
from personalens_utils.measures.scores import (
    PERSONALIZATION,
    TASK_COMPLETION,
    condition_scores,
    load_dialogues,
)
from personalens_utils.prompt_sets import PromptSet
from personalens_utils.prompt_templates.user_styles import UserAgent
from personalens_utils.runstore.engine import StageReport
from personalens_utils.runstore.identity import USER_STYLE
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, estimate_simulation, run_simulation

GRID_DIMENSIONS = (TASK_COMPLETION, PERSONALIZATION)
"""What the grid judges: the two scores the robustness tables report (other stored ones are left alone)."""
KEYS = ["assistant_model", "user_model", USER_STYLE, "judge_model"]
"""The columns that name one assistant under one condition of the grid."""

DIALOGUES, JUDGMENTS = Dialogue.table, Judgment.table
"""The counts of `counts` and `stored`: records of those tables."""


@dataclass(frozen=True)
class Grid:
    """The conditions to measure: assistant specs (as notebook 03 takes them) x user agents x judge specs,
    each scenario simulated `repeats` times in one assistant `setting`."""

    assistants: tuple[str, ...]
    user_agents: tuple[UserAgent, ...]
    judges: tuple[str, ...]
    repeats: int = 1
    setting: str = "base"

    def __post_init__(self) -> None:
        if not (self.assistants and self.user_agents and self.judges):
            raise ValueError("a grid needs at least one assistant, user model, user style and judge")

    @classmethod
    def of(cls, assistants: Sequence[str], user_models: Sequence[str], user_styles: Sequence[str],
           judges: Sequence[str], repeats: int = 1) -> Grid:
        """Every user model crossed with every style (notebook 10's parameters)."""
        agents = tuple(UserAgent(m, s) for m in user_models for s in user_styles)
        return cls(tuple(assistants), agents, tuple(judges), repeats)


@dataclass(frozen=True)
class Place:
    """What a grid runs on, from the session (`session.robustness`): the benchmark and run store, the
    prompt set and task types, the session's scope (as a frame filter and as the runners' `select`), and
    how a spec becomes a model role or an assistant on the session's clients."""

    benchmark: Benchmark
    store: RunStore
    prompts: PromptSet
    task_types: tuple[str, ...]
    scope: Callable[[pd.DataFrame], pd.DataFrame]
    in_scope: Callable[[Dialogue], bool]
    role: Callable[[str], Role]
    assistant: Callable[[str], Assistant]


@dataclass
class GridRun:
    """A grid on its place: priced (`plan_cost`: `simulation_cost` and `judging_cost`), run (`run`) and
    read (`scores`).

    `reports` holds each runner's report in order, `counts` (after `run`) one row per assistant and
    condition with the dialogues and judgments found stored (`*_reused`) and added (`*_made`)."""

    place: Place
    grid: Grid
    batch: bool = False
    max_cost_usd: float | None = None
    reports: list[tuple[str, StageReport]] = field(default_factory=list)
    counts: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        if self.batch and self.max_cost_usd is not None:
            raise ValueError("max_cost_usd cannot stop a batch part-way (a submitted batch is paid in full); "
                             "read the plan's batch_usd and run with max_cost_usd=None, or run live")

    def describe(self) -> str:
        """The setup cell's line: the run store and the grid's size."""
        grid = self.grid
        agents = ", ".join(f"{a.model} ({a.style})" for a in grid.user_agents)
        return (f"Run store `{self.place.store.root}`; {_count(grid.assistants, 'assistant')} x "
                f"{_count(grid.user_agents, 'user agent')} ({agents}) x {_count(grid.judges, 'judge')} "
                f"({', '.join(grid.judges)}), setting `{grid.setting}`, "
                f"{_count(range(grid.repeats), 'repeat')}, task types {list(self.place.task_types)}.")

    def simulations(self) -> Iterator[tuple[Role, SimulationConfig]]:
        """One simulation per (assistant, user agent), configured as notebook 03 configures its own."""
        for spec in self.grid.assistants:
            assistant = self.place.assistant(spec)
            for agent in self.grid.user_agents:
                user = self.place.role(agent.model).playing(agent.style)
                yield user, SimulationConfig(
                    settings=[self.grid.setting], task_types=list(self.place.task_types),
                    user_model=user.model, assistant_model=assistant.model, assistant=assistant,
                    prompts=self.place.prompts, repeats=self.grid.repeats,
                    batch=self.batch, user_style=user.style)

    def judges(self) -> list[Role]:
        return [self.place.role(spec) for spec in self.grid.judges]

    def judging(self, judge: Role, budget: float | None = None) -> JudgingConfig:
        """One judging run per judge over the grid's dialogues, configured as notebook 04 configures it."""
        return JudgingConfig(judge_model=judge.model, dimensions=list(GRID_DIMENSIONS), select=self.select,
                             prompts=self.place.prompts, batch=self.batch, max_cost_usd=budget)

    def select(self, dialogue: Dialogue) -> bool:
        """Whether a stored dialogue is one of the grid's (the judges judge no other)."""
        return (self.place.in_scope(dialogue) and dialogue.assistant_setting == self.grid.setting
                and dialogue.assistant_model in self._assistant_names()
                and (dialogue.user_model, dialogue.user_style) in self._agents())

    def simulation_cost(self) -> CostEstimate:
        """What the grid's dialogues not yet stored would cost, every (assistant, user agent) together."""
        return combined([estimate_simulation(self.place.benchmark, self.place.store, config, user=user)
                         for user, config in self.simulations()])

    def judging_cost(self, still_to_make: bool = True) -> CostEstimate:
        """What the grid's judgments still to make would cost, every judge together: of the stored
        dialogues not yet judged, and (`still_to_make`) of the dialogues the grid has not made yet, priced
        on stand-ins (`estimate_judging_planned`), so a new condition's judging shows before any call."""
        place, contexts = self.place, benchmark_contexts(self.place.benchmark)
        planned = [PlannedSimulation.of(place.benchmark, place.store, config, user=user)
                   for user, config in self.simulations()] if still_to_make else []
        estimates = []
        for judge in self.judges():
            config = self.judging(judge)
            estimates.append(estimate_judging(place.store, contexts, config, judge=judge))
            if any(p.plan.items for p in planned):
                estimates.append(estimate_judging_planned(planned, contexts, config, judge=judge))
        return combined(estimates)

    def plan_cost(self) -> CostEstimate:
        """The whole grid before any call: its dialogues still to make and every judgment still to make.
        With `max_cost_usd` the run stops starting calls at that spending, whatever the plan says."""
        plan = combined([self.simulation_cost(), self.judging_cost()])
        if self.max_cost_usd is None:
            return plan
        limit = (f"max_cost_usd={self.max_cost_usd}: the run stops starting new calls once the grid has "
                 "spent that much (a rerun continues)")
        return CostEstimate(plan.table, [*plan.assumptions, limit])

    def run(self, show: Callable[[object], None] = print) -> pd.DataFrame:
        """Simulate, then judge, every condition, skipping what is stored; `show` gets the judging cost
        before judging (from the dialogues now stored) and each runner's report. Returns (and keeps in
        `counts`) the reuse counts."""
        before = self.stored()
        for user, config in self.simulations():
            if self._out_of_budget():
                break
            config = replace(config, max_cost_usd=self._left())
            self._note("simulation", run_simulation(self.place.benchmark, self.place.store, user.client,
                                                    config), show)
        show(self.judging_cost(still_to_make=False))
        contexts = benchmark_contexts(self.place.benchmark)
        for judge in self.judges():
            if self._out_of_budget():
                break
            self._note("judging", run_judging(self.place.store, judge.client, contexts,
                                              self.judging(judge, self._left())), show)
        self.counts = reuse(before, self.stored())
        return self.counts

    def stored(self) -> pd.DataFrame:
        """Per assistant and condition, how many of the grid's dialogues and judgments the store holds."""
        dialogues = self._rows(load_dialogues(self.place.store))
        dialogues = dialogues[dialogues["dialogue_status"] != "error"]
        made = dialogues.groupby(KEYS[:3], observed=True).size().rename(DIALOGUES).reset_index()
        judged = self.scores().groupby(KEYS, observed=True).size().rename(JUDGMENTS).reset_index()
        cells = pd.DataFrame([(a, u, s, j) for a in self._assistant_names() for u, s in self._agents()
                              for j in self._judge_keys()], columns=KEYS)
        counts = cells.merge(_plain(made), on=KEYS[:3], how="left").merge(_plain(judged), on=KEYS, how="left")
        return counts.fillna({DIALOGUES: 0, JUDGMENTS: 0}).astype({DIALOGUES: int, JUDGMENTS: int})

    def scores(self) -> pd.DataFrame:
        """The tidy frame of the grid's conditions (`condition_scores`), for R1-R5."""
        frame = self._rows(condition_scores(self.place.store))
        keep = frame["judge_model"].isin(self._judge_keys()) & frame["dimension"].isin(GRID_DIMENSIONS)
        return frame[keep]

    def _rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows of the grid's dialogues in the session's scope."""
        frame = self.place.scope(frame)
        agents = pd.MultiIndex.from_frame(frame[["user_model", USER_STYLE]].astype(str))
        keep = (frame["assistant_model"].isin(self._assistant_names())
                & (frame["assistant_setting"] == self.grid.setting)
                & agents.isin(list(self._agents())))
        return frame[keep]

    def _assistant_names(self) -> set[str]:
        return {self.place.assistant(spec).model for spec in self.grid.assistants}

    def _agents(self) -> set[tuple[str, str]]:
        return {(self.place.role(agent.model).model, agent.style) for agent in self.grid.user_agents}

    def _judge_keys(self) -> list[str]:
        return [judge_model_key(judge.model) for judge in self.judges()]

    def _spent(self) -> float:
        return sum(report.cost_usd for _, report in self.reports)

    def _left(self) -> float | None:
        return None if self.max_cost_usd is None else max(0.0, self.max_cost_usd - self._spent())

    def _out_of_budget(self) -> bool:
        return self.max_cost_usd is not None and self._spent() >= self.max_cost_usd

    def _note(self, stage: str, report: StageReport, show: Callable[[object], None]) -> None:
        self.reports.append((stage, report))
        show(report)


def _count(items: Sequence[object], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Key columns as text, so categoricals of two frames merge."""
    return frame.astype({c: str for c in KEYS if c in frame.columns})


def reuse(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Per assistant and condition: what was stored before the run (reused) and what the run added."""
    merged = after.merge(before, on=KEYS, how="left", suffixes=("", "_before")).fillna(0)
    out = merged[KEYS].copy()
    for what in (DIALOGUES, JUDGMENTS):
        out[f"{what}_reused"] = merged[f"{what}_before"].astype(int)
        out[f"{what}_made"] = (merged[what] - merged[f"{what}_before"]).astype(int)
    return out.sort_values(KEYS, ignore_index=True)


def combined(estimates: Sequence[CostEstimate]) -> CostEstimate:
    """Several estimates as one: their rows, one total row, their assumptions once each."""
    parts = [e.table[e.table["stage"] != "total"] for e in estimates if len(e.table)]
    notes = list(dict.fromkeys(a for e in estimates for a in e.assumptions))
    if not parts:  # nothing to pay, but every part's notes say why (a judge leaving dialogues alone, ...)
        return CostEstimate(estimates[0].table if estimates else pd.DataFrame(), notes)
    table = pd.concat(parts, ignore_index=True)
    numbers = table.select_dtypes("number").columns
    total: dict[str, object] = dict.fromkeys(table.columns, "") | {"stage": "total"}
    total |= {c: (math.nan if table[c].isna().any() else table[c].sum()) for c in numbers}
    return CostEstimate(pd.concat([table, pd.DataFrame([total])], ignore_index=True), notes)
