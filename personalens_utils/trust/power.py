"""Plan a study from a pilot: the smallest difference a design detects, the users it needs, its cost.

The design is paired: two assistants (or settings) talk to the same N users on the same T tasks each,
each scenario simulated k times per assistant and each dialogue judged m times. The estimate is the
mean over scenarios of (treatment mean - control mean), tested by users (the test a cluster bootstrap
or a t-test on per-user differences makes). Its variance is

    user / N + task / (N T) + sample / (N T k) + judge / (N T k m)

where `user` and `task` are the variances of the assistants' *difference* between users and between
tasks of a user (what stays after pairing removes what the two share), and `sample` and `judge` add
the two assistants' simulation and judging noise (independent runs do not cancel). Repeats only shrink
the last two terms, so when users or tasks dominate, more users beat more repeats.

The smallest detectable difference solves power(delta) = target for a two-sided t-test on N - 1
degrees of freedom (noncentral t, scipy), exact for a balanced design with normal scores and close
for 0/1 task completion at the sizes a plan needs. Costs price each design with the kit's own cost
estimate (`llm.budget.Tally`), from the calls and tokens a pilot's dialogue and judge sample took.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from personalens_utils.llm.budget import CostEstimate, Tally, Volume
from personalens_utils.measures.bootstrap import scenario_differences
from personalens_utils.measures.design import (
    ARM,
    JUDGE_SAMPLE,
    SAMPLE,
    SCORE,
    TASK,
    USER,
    DesignError,
    design_frame,
)
from personalens_utils.measures.display import provenance_note, score_source
from personalens_utils.measures.scores import SCALES, backends
from personalens_utils.outputs.plots import FigureResult, Span, greyscale_styles, mark_offline, new_figure
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.trust.variance import decompose_design, nested_anova

SIMULATION, JUDGING = "simulation", "judging"
UNIT_COLUMNS = ["stage", "kind", "backend", "model", "calls", "input_tokens", "output_tokens"]
GRID_NAMES = {"users": "Users", "tasks": "Tasks", "repeats": "Samples", "judge_samples": "Judge samples",
              "se": "SE", "detectable": "Detectable Δ", "n_dialogues": "Dialogues", "cost_usd": "Cost (USD)"}
NEEDED_NAMES = {"tasks": "Tasks", "repeats": "Samples", "judge_samples": "Judge samples",
                "users_needed": "Users needed", "n_dialogues": "Dialogues", "cost_usd": "Cost (USD)"}


@dataclass(frozen=True)
class PairedComponents:
    """Variances of a paired comparison per level: the difference's between users and between tasks
    of a user, and both arms' simulation and judging noise added together."""

    user: float
    task: float
    sample: float
    judge: float
    notes: tuple[str, ...] = ()
    """How the pilot was read: levels it could not separate, estimates set to zero."""

    def __post_init__(self) -> None:
        bad = {k: v for k, v in self.as_dict().items() if not (math.isfinite(v) and v >= 0)}
        if bad:
            raise DesignError(f"variance components must be finite and >= 0, got {bad}")

    def as_dict(self) -> dict[str, float]:
        return {"user": self.user, "task": self.task, "sample": self.sample, "judge": self.judge}


@dataclass(frozen=True)
class Design:
    """N users x T tasks each x k simulation samples x m judge samples, for each of the two arms."""

    users: int
    tasks: int
    repeats: int = 1
    judge_samples: int = 1

    def __post_init__(self) -> None:
        low = {k: v for k, v in vars(self).items() if int(v) != v or v < (2 if k == "users" else 1)}
        if low:
            raise DesignError(f"design {low}: users must be at least 2, the others at least 1 "
                              "(whole numbers)")

    @property
    def dialogues(self) -> int:
        """Dialogues to simulate for the two arms together."""
        return 2 * self.users * self.tasks * self.repeats


def standard_error(components: PairedComponents, design: Design) -> float:
    """Standard error of the mean paired difference under `design`."""
    n, t, k, m = design.users, design.tasks, design.repeats, design.judge_samples
    c = components
    return math.sqrt(c.user / n + c.task / (n * t) + c.sample / (n * t * k) + c.judge / (n * t * k * m))


def power_at(difference: float, se: float, users: int, alpha: float) -> float:
    """Power of the two-sided t-test (N - 1 degrees of freedom) to find `difference`."""
    return _power(difference / se, users - 1, alpha)


def _power(nc: float, df: int, alpha: float) -> float:
    """Both tails of the noncentral t beyond the critical value. scipy's lower tail turns NaN at large
    noncentrality, where it is below Phi(-nc) (under 1e-15 where that happens): it is then 0."""
    from scipy import stats  # here: scipy.stats costs a kernel 0.5 s to import, and few cells need it

    crit = stats.t.ppf(1 - alpha / 2, df)
    lower = stats.nct.cdf(-crit, df, nc)
    return float(stats.nct.sf(crit, df, nc) + (0.0 if np.isnan(lower) else lower))


def _check_levels(alpha: float, power: float) -> None:
    if not (0 < alpha < 1 and alpha < power < 1):
        raise DesignError(f"need 0 < alpha < power < 1, got alpha={alpha}, power={power}")


def detectable_difference(components: PairedComponents, design: Design, *, alpha: float = 0.05,
                          power: float = 0.8) -> float:
    """The smallest true difference the design finds with probability `power` at level `alpha`."""
    _check_levels(alpha, power)
    se = standard_error(components, design)
    if se == 0:
        return 0.0
    from scipy import optimize

    df, high = design.users - 1, 4.0
    while _power(high, df, alpha) < power:  # the noncentrality needed, bracketed from above
        high *= 2
    return se * float(optimize.brentq(lambda nc: _power(nc, df, alpha) - power, 0.0, high, xtol=1e-10))


def users_needed(components: PairedComponents, target: float, design: Design, *, alpha: float = 0.05,
                 power: float = 0.8) -> int:
    """The fewest users that detect `target` with `design`'s tasks and repeats (its `users` ignored)."""
    if not target > 0:
        raise DesignError(f"target difference must be positive, got {target}")

    def enough(n: int) -> bool:
        shaped = Design(n, design.tasks, design.repeats, design.judge_samples)
        return detectable_difference(components, shaped, alpha=alpha, power=power) <= target

    high = 2
    while not enough(high):
        high *= 2
        if high > 10_000_000:
            raise DesignError(f"no design with under 10 million users detects {target}")
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high if high > 2 or not enough(2) else 2


def _noise(arm: pd.DataFrame, sample: float, judge: float) -> pd.Series:
    """Per scenario, the variance its mean gets from simulation and judging noise, from its counts."""
    per_dialogue = arm.groupby([USER, TASK, SAMPLE]).size().rename("m").reset_index()
    total = per_dialogue.groupby([USER, TASK])["m"].transform("sum")
    per_dialogue["w2"] = (per_dialogue["m"] / total) ** 2
    grouped = per_dialogue.assign(total=total).groupby([USER, TASK])
    return grouped["w2"].sum() * sample + judge / grouped["total"].first()


def paired_components(frame: pd.DataFrame, treatment: str, control: str) -> PairedComponents:
    """The components of `treatment - control` from a pilot's design frame holding both arms.

    Each arm's simulation and judging variances come from its own decomposition (a level the pilot did
    not repeat is counted in the one above, which then does not shrink with repeats: a cautious plan);
    the difference's user and task variances from a nested ANOVA of the per-scenario differences,
    less the part of the task-level spread that the arms' noise explains.
    """
    notes: list[str] = []
    noises, inner = [], {"sample": 0.0, "judge": 0.0}
    for name in (treatment, control):
        arm = frame[frame[ARM] == name]
        if arm.empty:
            raise DesignError(f"no scores for {name!r} in the pilot; it holds {sorted(frame[ARM].unique())}")
        parts = decompose_design(arm).set_index("component")
        sample = float(np.nan_to_num(parts.loc["simulation sample", "variance"]))
        judge = float(np.nan_to_num(parts.loc["judge sample", "variance"]))
        for level, row in parts.iterrows():
            if row["merged_into"]:
                notes.append(f"{name}: {level} not repeated in the pilot, counted in {row['merged_into']}")
        inner["sample"] += sample
        inner["judge"] += judge
        noises.append(_noise(arm, sample, judge))
    diffs = scenario_differences(frame, treatment, control)
    if diffs[USER].nunique() < 2 or len(diffs) <= diffs[USER].nunique():
        raise DesignError("the pilot needs at least 2 users with at least 2 shared tasks for one of them")
    user, residual = nested_anova(diffs.assign(**{SCORE: diffs["difference"], SAMPLE: 0, JUDGE_SAMPLE: 0}),
                                  [USER, TASK])
    scenarios = pd.MultiIndex.from_frame(diffs[[USER, TASK]])
    shared = noises[0].add(noises[1], fill_value=0.0).reindex(scenarios).to_numpy()
    task = residual - float(np.mean(shared))
    for level, value in (("user", user), ("task", task)):
        if value < 0:
            notes.append(f"the difference's {level} variance estimated below 0 ({value:.3g}), set to 0")
    return PairedComponents(max(0.0, float(user)), max(0.0, float(task)), inner["sample"], inner["judge"],
                            tuple(notes))


@dataclass(frozen=True)
class UnitCosts:
    """Calls and tokens of one dialogue (both roles) and of one judge sample of a dialogue (every
    dimension), per (stage, kind, backend, model), as a pilot spent them."""

    dialogue: pd.DataFrame
    judge_sample: pd.DataFrame
    origin: str = "a pilot's usage"

    @classmethod
    def from_usage(cls, usage: pd.DataFrame, *, dialogues: int, judge_samples: int,
                   origin: str = "the pilot's ledger") -> UnitCosts:
        """From a usage table (`Session.usage_frame()`, `LLMClient.usage_frame()` or a `CostEstimate`'s
        table): its simulation rows over `dialogues`, its judging rows over `judge_samples` (judged
        dialogues times judge samples each)."""
        absent = [c for c in UNIT_COLUMNS if c not in usage.columns]
        if absent:
            raise DesignError(f"the usage table has no column(s) {absent}; pass a ledger's usage_frame()")
        if dialogues < 1 or judge_samples < 1:
            raise DesignError(f"unit costs need at least one dialogue and judge sample, got {dialogues} and "
                              f"{judge_samples}")
        rows = usage[usage["stage"].isin([SIMULATION, JUDGING])]
        per = rows.groupby(["stage", "kind", "backend", "model"], sort=True)[
            ["calls", "input_tokens", "output_tokens"]].sum().reset_index()
        sim, judge = per[per["stage"] == SIMULATION].copy(), per[per["stage"] == JUDGING].copy()
        counts = ["calls", "input_tokens", "output_tokens"]
        for part, n in ((sim, dialogues), (judge, judge_samples)):
            part[counts] = part[counts] / n
        return cls(sim.reset_index(drop=True), judge.reset_index(drop=True), origin)


def design_cost(costs: UnitCosts, design: Design) -> CostEstimate:
    """What `design` costs (both arms): the pilot's per-unit calls and tokens scaled to its dialogues
    and judge samples, priced by the kit's cost estimate."""
    tally = Tally("")
    judged = design.dialogues * design.judge_samples
    for part, units in ((costs.dialogue, design.dialogues), (costs.judge_sample, judged)):
        for row in part.itertuples(index=False):
            tally.add(row.stage, row.kind, row.model, Volume(calls=row.calls * units,
                      input_tokens=row.input_tokens * units, output_tokens=row.output_tokens * units),
                      backend=row.backend)
    return tally.estimate([f"{design.dialogues} dialogues and {judged} judge samples of them, each with "
                           f"the calls and tokens of one in {costs.origin}"])


@dataclass(frozen=True)
class PlanConfig:
    """The designs to weigh and the test's levels. `target`: a difference to find (then `needed` says
    how many users each tasks x repeats x judge samples design takes)."""

    users: Sequence[int] = (25, 50, 100, 200, 400)
    tasks: Sequence[int] = (10,)
    repeats: Sequence[int] = (1, 3)
    judge_samples: Sequence[int] = (1, 3)
    alpha: float = 0.05
    power: float = 0.8
    target: float | None = None


@dataclass(frozen=True)
class StudyPlan:
    """A pilot's plan: its components, the grid of designs (table), the users each design needs for
    the target (table, when one was given), and the detectable difference against users (figure)."""

    components: PairedComponents
    table: TableResult
    figure: FigureResult
    needed: TableResult | None = None
    what: str = "the difference"
    """The compared quantity in words, e.g. "P of model-b minus model-a"."""
    unit: str = "points"

    def reading(self) -> str:
        """The plan in a few plain sentences: where the difference's noise sits, what a design of the
        middle number of users detects without and with repeats, and what the next number of users does."""
        grid = self.table.data if self.table.data is not None else pd.DataFrame()
        parts = self.components.as_dict()
        total = sum(parts.values())
        names = {"user": "between users", "task": "between tasks of a user",
                 "sample": "between simulation samples", "judge": "between judge samples"}
        largest = max(parts, key=lambda k: parts[k])
        lines = [f"Most of the noise in {self.what} lies {names[largest]} ({parts[largest] / total:.0%} of "
                 "the variance of one scenario's difference)." if total > 0 else
                 f"The pilot shows no variance in {self.what}: every design detects any difference."]
        tasks = int(grid["tasks"].min())
        grid = grid[grid["tasks"] == tasks]
        users = sorted(grid["users"].unique())
        middle = users[len(users) // 2]

        def row(n: int, k: int, m: int) -> pd.Series | None:
            hit = grid[(grid["users"] == n) & (grid["repeats"] == k) & (grid["judge_samples"] == m)]
            return None if hit.empty else hit.iloc[0]

        plain = row(middle, 1, 1)
        rich = row(middle, int(grid["repeats"].max()), int(grid["judge_samples"].max()))
        if plain is not None:
            lines.append(f"With {middle} users x {tasks} tasks, one simulation and one judgment each, the "
                         f"smallest difference detected is {plain['detectable']:.3g} {self.unit}"
                         + _priced(plain["cost_usd"]) + ".")
        if plain is not None and rich is not None and rich["repeats"] * rich["judge_samples"] > 1:
            lines.append(f"Repeating each scenario {int(rich['repeats'])} times and judging each dialogue "
                         f"{int(rich['judge_samples'])} times brings it to {rich['detectable']:.3g}"
                         + _priced(rich["cost_usd"]) + ".")
        more = [n for n in users if n > middle]
        bigger = row(more[0], 1, 1) if more else None
        if bigger is not None:
            lines.append(f"{more[0]} users instead, without repeats: {bigger['detectable']:.3g}"
                         + _priced(bigger["cost_usd"]) + ".")
        return " ".join(lines)

    def _repr_html_(self) -> str:
        parts = [self.table._repr_html_()]
        if self.needed is not None:
            parts.append(self.needed._repr_html_())
        return "".join(parts)


def _priced(cost: float) -> str:
    return "" if np.isnan(cost) else f" (USD {cost:,.2f})"


def _cost(costs: UnitCosts | None, design: Design) -> float:
    return float("nan") if costs is None else design_cost(costs, design).total_cost_usd


def design_grid(components: PairedComponents, config: PlanConfig,
                costs: UnitCosts | None = None) -> pd.DataFrame:
    """One row per design of `config`: its standard error, detectable difference and cost."""
    rows = []
    for t, k, m, n in product(sorted(config.tasks), sorted(config.repeats), sorted(config.judge_samples),
                              sorted(config.users)):
        design = Design(n, t, k, m)
        rows.append({"users": n, "tasks": t, "repeats": k, "judge_samples": m,
                     "se": standard_error(components, design),
                     "detectable": detectable_difference(components, design, alpha=config.alpha,
                                                         power=config.power),
                     "n_dialogues": design.dialogues, "judge_samples_total": design.dialogues * m,
                     "cost_usd": _cost(costs, design)})
    return pd.DataFrame(rows)


def _needed(components: PairedComponents, config: PlanConfig, costs: UnitCosts | None) -> pd.DataFrame:
    rows = []
    for t, k, m in product(sorted(config.tasks), sorted(config.repeats), sorted(config.judge_samples)):
        n = users_needed(components, float(config.target or 0), Design(2, t, k, m), alpha=config.alpha,
                         power=config.power)
        design = Design(n, t, k, m)
        rows.append({"tasks": t, "repeats": k, "judge_samples": m, "users_needed": n,
                     "n_dialogues": design.dialogues, "cost_usd": _cost(costs, design)})
    return pd.DataFrame(rows)


def _shown(frame: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    shown = frame[list(names)].rename(columns=names)
    if "Cost (USD)" in shown:
        shown["Cost (USD)"] = [("n/a" if np.isnan(v) else f"{v:,.2f}") for v in frame["cost_usd"]]
    return shown


def plan_study(tidy: pd.DataFrame, *, treatment: str, control: str, dimension: str = "personalization",
               arm: str = "assistant_model", config: PlanConfig | None = None,
               costs: UnitCosts | None = None) -> StudyPlan:
    """Plan a paired comparison of `treatment` and `control` (values of `arm`) from a pilot's scores:
    the components, every design's detectable difference and cost, and the users a target needs."""
    config = config or PlanConfig()
    _check_levels(config.alpha, config.power)
    frame = design_frame(tidy, dimension, arm=arm)
    components = paired_components(frame, treatment, control)
    grid = design_grid(components, config, costs)
    short = SCALES[dimension].short
    unit = "percentage points" if dimension == "task_completion" else "points"
    pilot_part = tidy[tidy[arm].isin([treatment, control]) & (tidy["dimension"] == dimension)]
    used, source = backends(pilot_part), score_source(pilot_part)
    pilot = (f"Pilot: {frame[USER].nunique()} users, {len(scenario_differences(frame, treatment, control))} "
             f"shared scenarios of {treatment} and {control}; components (variance of the difference) user "
             f"{components.user:.3g}, task {components.task:.3g}, simulation {components.sample:.3g}, judge "
             f"{components.judge:.3g}" + "".join(f"; {note}" for note in components.notes) + ".")
    how = (f"two-sided paired t-test on users, alpha={config.alpha}, power={config.power:.0%}")
    priced = (f" Costs: the kit's estimate from {costs.origin} (both assistants, simulation and judging)."
              if costs is not None else " No unit costs given: costs n/a.")
    caption = (f"Smallest detectable difference in {short} ({unit}) of {treatment} minus {control} per "
               f"design: N users x T tasks x k simulation samples x m judge samples per assistant; {how}. "
               + pilot + priced + provenance_note(used))
    table = TableResult(_shown(grid, GRID_NAMES), caption, source, grid, precision=3)
    needed = None
    if config.target is not None:
        need = _needed(components, config, costs)
        needed = TableResult(
            _shown(need, NEEDED_NAMES),
            f"Users needed to detect a difference of {config.target:g} {unit} in {short} of {treatment} "
            f"minus {control}; {how}. " + pilot + priced + provenance_note(used),
            source, need, precision=3)
    figure = _figure(grid, config, f"smallest detectable\n{short} difference ({unit})", used,
                     caption=f"Smallest detectable difference in {short} against users, per design; {how}. "
                             + pilot + provenance_note(used), source=source)
    return StudyPlan(components, table, figure, needed, f"{short} of {treatment} minus {control}", unit)


def _figure(grid: pd.DataFrame, config: PlanConfig, ylabel: str, used: set[str], *, caption: str,
            source: Source) -> FigureResult:
    designs = list(grid.groupby(["tasks", "repeats", "judge_samples"], sort=True))

    def draw(width: Span) -> Figure:
        fig, ax = new_figure(width, 2.8 if width == "column" else 2.4)
        for style, ((t, k, m), rows) in zip(greyscale_styles(len(designs)), designs, strict=True):
            ax.plot(rows["users"], rows["detectable"], **style, label=f"T={t}, k={k}, m={m}")
        if config.target is not None:
            ax.axhline(config.target, color="black", lw=0.8, ls=(0, (4, 2)),
                       label=f"target {config.target:g}")
        ax.set_xscale("log")
        ax.set_xticks(sorted(config.users), [str(n) for n in sorted(config.users)])
        ax.minorticks_off()
        ax.set_xlabel("users N")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        fig.legend(loc="outside lower center", ncols=2 if width == "column" else 3, frameon=False)
        mark_offline(fig, used)
        return fig

    return FigureResult(draw("column"), caption, source, grid, at=draw)
