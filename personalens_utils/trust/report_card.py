"""The judge report card: for each judge, a row per check saying pass, fail, inconclusive or not
measured, with the figure behind it, its confidence interval and how many items it rests on.

The checks (docs/trust.md, "Judge report card", says how to read each):

- known order: the reference assistants ranked in their designed order (`analysis.judge_check`, J3);
- human agreement: Cohen's kappa with annotators, as Table 5 computes it (`labels.agreement`);
- self-consistency: Krippendorff's alpha across the judge's samples of the same dialogues;
- profile counterfactual: the judge shown another user's profile (`probes.ProfileSwap`) must score
  personalization lower, and task completion about the same (within `tc_margin`);
- length sensitivity: assistant turns padded with neutral text (`probes.Padding`) must not score higher;
- self-preference: where judge and assistant share a model family, the judge's lead over a judge of
  another family must not be larger on those dialogues than on the others;
- agreement with another judge: Kendall's tau between the two judges' scores of the same dialogues.

A check without the material it needs (no annotations, one judge sample, no probe run, no shared
family, one judge) is "not measured", never a pass. Intervals resample dialogues (percentile
bootstrap, seeded); every rule and threshold is a named constant here and is stated in the caption.

The probe checks are read against the smallest change that matters (`SMALLEST_EFFECT`, `TC_MARGIN`),
so that a small design cannot fail a judge only for not showing an effect: pass when the interval
shows what a sound judge does, fail when it rules that out, inconclusive when it holds both, with the
dialogues the power planner (`trust.power`) says would settle it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from personalens_utils.analysis.judge_check import judge_sanity, kendall_tau_b
from personalens_utils.assistants.reference_assistants import DESIGNED_ORDER
from personalens_utils.base.errors import KitError
from personalens_utils.base.stored import BackendName
from personalens_utils.judging import judge_model_key
from personalens_utils.judging.config import Select
from personalens_utils.labels import agreement
from personalens_utils.labels.agreement import shared_matrices
from personalens_utils.llm import registry
from personalens_utils.measures.display import ASSISTANT_DIMENSIONS, provenance_note
from personalens_utils.measures.scores import (
    JUDGE_PROMPTS,
    PERSONALIZATION,
    SCALES,
    SHORT_NAMES,
    TASK_COMPLETION,
    backends,
    load_dialogues,
    load_judgments,
    model_ids,
)
from personalens_utils.measures.stats import Interval, paired_comparison
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.runstore.records import KIT_PROMPTS, OFFLINE, Dialogue, ProbeJudgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.trust.power import Design, PairedComponents, users_needed
from personalens_utils.trust.probes import Padding, ProfileSwap

PASS, FAIL, INCONCLUSIVE, NOT_MEASURED = "pass", "fail", "inconclusive", "not measured"
CARD_COLUMNS = ("judge", "check", "verdict", "estimate", "ci_low", "ci_high", "n", "n_needed")
TC_MARGIN = 0.05
"""The smallest change of task completion that matters (0-1 scale, i.e. 5 points of TCR): under the
profile swap TC holds when the interval of the mean change lies within plus or minus this, and padding
must not raise it by this much."""
SMALLEST_EFFECT = 0.25
"""The smallest change in scale points (P 1-4, naturalness and coherence 1-5) that matters: a quarter
of a point moves an assistant's mean past most gaps between neighbours in Table 3. A judge that reads
the profile must lower P by at least this when shown another user's; padding must not raise a score by
this much."""
PLAN_ALPHA, PLAN_POWER = 0.05, 0.8
"""The levels at which the power planner sizes the design an inconclusive check would need."""
AGREEMENT_FLOOR = 0.4
"""Human kappa and cross-judge tau pass at this estimate or above ("moderate", Landis and Koch) with
the interval's lower end above zero."""
ALPHA_RELIABLE, ALPHA_TENTATIVE = 0.8, 0.667
"""Self-consistency passes when alpha is at least 0.8 and its interval's lower end at least 0.667
(Krippendorff's thresholds for reliable and for tentative conclusions)."""
FAMILIES = (("claude", "Claude"), ("llama", "Llama"), ("mistral", "Mistral"), ("mixtral", "Mistral"),
            ("gpt", "GPT"), ("gemini", "Gemini"), ("qwen", "Qwen"), ("deepseek", "DeepSeek"),
            ("nova", "Nova"), ("command", "Command"))
"""Model families by a word in the model's name or ids (first match wins)."""


class CardError(KitError, ValueError):
    """The report card cannot be made as asked (a judge the store does not hold, bad settings)."""


@dataclass(frozen=True)
class JudgeRef:
    """One judge of the card: its model (any registry spelling), backend and judge prompt set."""

    model: str
    backend: BackendName
    prompt_set: str = KIT_PROMPTS

    @property
    def key(self) -> str:
        return judge_model_key(self.model)

    @property
    def label(self) -> str:
        return f"{self.key} ({self.backend})"


@dataclass(frozen=True)
class CardSettings:
    """What the card checks and how: the dimensions, the designed order and setting of the known-order
    check, the smallest changes that matter (task completion's margin, the other scales' effect), and
    the intervals' confidence, resamples and seed."""

    dimensions: tuple[str, ...] = (TASK_COMPLETION, PERSONALIZATION)
    length_dimensions: tuple[str, ...] = ASSISTANT_DIMENSIONS
    designed_order: tuple[str, ...] = DESIGNED_ORDER
    setting: str = "base"
    tc_margin: float = TC_MARGIN
    smallest_effect: float = SMALLEST_EFFECT
    confidence: float = 0.95
    n_resamples: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        bad = {name: value for name, value in (("tc_margin", self.tc_margin),
                                               ("smallest_effect", self.smallest_effect))
               if not (isinstance(value, int | float) and 0 < value < float("inf"))}
        if bad:
            raise CardError(f"CardSettings: {bad} must be positive numbers (the smallest change that "
                            "matters, in the scale's points)")


@dataclass(frozen=True)
class Check:
    """One row of the card; `note` says why a check was not measured, or what it compared."""

    judge: str
    check: str
    verdict: str
    estimate: float = float("nan")
    ci_low: float = float("nan")
    ci_high: float = float("nan")
    n: int = 0
    note: str = ""
    n_needed: int | None = None
    """For an inconclusive probe check: the dialogues the power planner says would detect the smallest
    change that matters (paired t-test at `PLAN_ALPHA`, power `PLAN_POWER`)."""


def _short(dimension: str) -> str:
    return SHORT_NAMES.get(dimension, dimension)


def _not_measured(judge: JudgeRef, check: str, why: str) -> Check:
    return Check(judge.label, check, NOT_MEASURED, note=why)


# -- reading the store -------------------------------------------------------------------------------------


class _Material:
    """What the checks read from one store: each judge's judgments (every sample), its probe records,
    and the dialogues' attributes."""

    def __init__(self, store: RunStore, judges: Sequence[JudgeRef], select: Select | None = None):
        self.dialogues = load_dialogues(store)
        self.dialogues = self.dialogues[self.dialogues["dialogue_status"] != "error"]
        judgments = load_judgments(store)  # the columnar copy: no judge's text is read
        probes = store.read(ProbeJudgment)
        if select is not None:
            kept = {d.id for d in store.read(Dialogue) if select(d)}
            self.dialogues = self.dialogues[self.dialogues["dialogue_id"].isin(kept)]
            judgments = judgments[judgments["dialogue_id"].isin(kept)]
            probes = [r for r in probes if r.dialogue_id in kept]
        self.scores = {j: _frame(_judgment_rows(judgments, j)) for j in judges}
        self.probes = {j: _frame([_row(r) for r in probes if _by(r, j)]) for j in judges}
        unknown = [j.label for j in judges if self.scores[j].empty]
        if unknown:
            held = sorted({f"{model} ({backend})" for model, backend in
                           zip(judgments["judge_model"], judgments["judge_backend"], strict=True)})
            which = " of the dialogues `select` keeps" if select is not None else ""
            raise CardError(f"the run store {store.root} holds no judgments{which} by {unknown}; it holds "
                            f"{held}")

    def first(self, judge: JudgeRef) -> pd.DataFrame:
        """The judge's first sample (what tables report), joined to the dialogues' attributes."""
        frame = self.scores[judge]
        return frame[frame["sample"] == 0].merge(self.dialogues, on="dialogue_id", how="inner")


def _by(record: ProbeJudgment, judge: JudgeRef) -> bool:
    return (record.judge_model == judge.key and record.backend == judge.backend
            and record.prompt_set == judge.prompt_set and record.status != "error")


def _row(record: ProbeJudgment) -> dict[str, object]:
    return {"dialogue_id": record.dialogue_id, "dimension": record.dimension, "sample": record.sample,
            "score": record.score if record.status == "ok" else np.nan, "judge_model": record.judge_model,
            "judge_backend": record.backend, "judge_model_id": record.judge_model_id, "probe": record.probe}


def _judgment_rows(judgments: pd.DataFrame, judge: JudgeRef) -> list[dict[str, object]]:
    """`_row` of each judgment by `judge` (errors left out) in `load_judgments`' frame, whose strict score
    is already none unless the judgment is "ok"."""
    mine = judgments[(judgments["judge_model"] == judge.key) & (judgments["judge_backend"] == judge.backend)
                     & (judgments[JUDGE_PROMPTS] == judge.prompt_set)
                     & (judgments["judgment_status"] != "error")]
    columns = zip(mine["dialogue_id"], mine["dimension"], mine["judge_sample"], mine["strict_score"],
                  mine["judge_model"], mine["judge_backend"], mine["judge_model_id"], strict=True)
    return [{"dialogue_id": dialogue, "dimension": dimension, "sample": int(sample), "score": score,
             "judge_model": model, "judge_backend": backend, "judge_model_id": model_id, "probe": ""}
            for dialogue, dimension, sample, score, model, backend, model_id in columns]


def _frame(rows: Sequence[dict[str, object]]) -> pd.DataFrame:
    columns = ["dialogue_id", "dimension", "sample", "score", "judge_model", "judge_backend",
               "judge_model_id", "probe"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values(["dialogue_id", "dimension", "sample"]).reset_index(drop=True)


# -- intervals ---------------------------------------------------------------------------------------------


def _bootstrap(n: int, statistic: Callable[[np.ndarray], float],
               settings: CardSettings) -> tuple[float, float]:
    """Percentile interval of `statistic(indices)` over resamples of n items (seeded)."""
    rng = np.random.default_rng(settings.seed)
    draws = np.array([statistic(rng.integers(0, n, n)) for _ in range(settings.n_resamples)])
    tail = (1 - settings.confidence) / 2
    if np.isnan(draws).all():
        return float("nan"), float("nan")
    low, high = np.nanquantile(draws, [tail, 1 - tail])
    return float(low), float(high)


def _agreement_verdict(estimate: float, low: float) -> str:
    return PASS if estimate >= AGREEMENT_FLOOR and low > 0 else FAIL


# -- the checks --------------------------------------------------------------------------------------------


def known_order(material: _Material, judge: JudgeRef, settings: CardSettings) -> list[Check]:
    """J3 per dimension: Kendall's tau-b between designed rank and score; pass when recovered."""
    tidy = material.first(judge)
    part = tidy[tidy["assistant_setting"] == settings.setting]
    out = []
    for dim in settings.dimensions:
        name = f"known order ({_short(dim)})"
        scored = part[(part["dimension"] == dim) & part["score"].notna()]
        absent = [m for m in settings.designed_order if m not in set(scored["assistant_model"])]
        if absent:
            out.append(_not_measured(judge, name, f"no scored dialogues of the reference assistants {absent} "
                                                  f"in setting {settings.setting!r}"))
            continue
        result = judge_sanity(tidy, settings.designed_order, dimensions=[dim], setting=settings.setting,
                              confidence=settings.confidence, n_resamples=settings.n_resamples,
                              seed=settings.seed)
        tau = result.data[result.data["statistic"] == "kendall_tau_b"].iloc[0]
        out.append(Check(judge.label, name, PASS if tau["recovered"] else FAIL, float(tau["estimate"]),
                         float(tau["ci_low"]), float(tau["ci_high"]), int(tau["n"]),
                         "Kendall tau-b of designed rank and score"))
    return out


def human_agreement(material: _Material, judge: JudgeRef, annotations: pd.DataFrame | None,
                    settings: CardSettings) -> list[Check]:
    """Table 5's Cohen's kappa of the judge against each annotator, averaged, per dimension."""
    out = []
    for dim in settings.dimensions:
        name = f"human agreement ({_short(dim)})"
        if annotations is None or annotations.empty:
            out.append(_not_measured(judge, name, "no human annotations given"))
            continue
        first = material.first(judge)
        mine = first[first["dimension"] == dim].assign(rater="judge")
        humans = annotations[annotations["dimension"] == dim].rename(columns={"annotator": "rater"})
        items, _, ref, raters = shared_matrices(mine, humans)
        if len(items) < 2:
            out.append(_not_measured(judge, name, f"{len(items)} annotated dialogue(s) the judge scored"))
            continue
        cats = SCALES[dim].categories

        def kappa(idx: np.ndarray, ref: np.ndarray = ref, raters: np.ndarray = raters,
                  cats: list[float] = cats) -> float:
            return agreement.mean_pairwise_cohen(ref[0, idx], raters[:, idx], categories=cats)

        estimate = kappa(np.arange(len(items)))
        if np.isnan(estimate):
            out.append(_not_measured(judge, name, "kappa undefined: every rating the same value"))
            continue
        low, high = _bootstrap(len(items), kappa, settings)
        out.append(Check(judge.label, name, _agreement_verdict(estimate, low), estimate, low, high,
                         len(items), f"Cohen's kappa with {raters.shape[0]} annotator(s), averaged"))
    return out


def self_consistency(material: _Material, judge: JudgeRef, settings: CardSettings) -> list[Check]:
    """Krippendorff's alpha across the judge's samples (raters) of the same dialogues (items)."""
    frame = material.scores[judge]
    out = []
    for dim in settings.dimensions:
        name = f"self-consistency ({_short(dim)})"
        part = frame[frame["dimension"] == dim]
        samples = sorted(part["sample"].unique())
        if len(samples) < 2:
            out.append(_not_measured(judge, name, "one judge sample per dialogue; judge with two or more"))
            continue
        wide = part.pivot_table(index="sample", columns="dialogue_id", values="score", aggfunc="first")
        wide = wide.loc[:, wide.notna().sum(axis=0) >= 2]
        matrix = wide.to_numpy(dtype=float)
        scale = SCALES[dim]

        def alpha(idx: np.ndarray, matrix: np.ndarray = matrix, scale: object = scale) -> float:
            return agreement.krippendorff_alpha(matrix[:, idx], level=scale.level,  # type: ignore[attr-defined]
                                                categories=scale.categories)  # type: ignore[attr-defined]

        estimate = alpha(np.arange(matrix.shape[1])) if matrix.shape[1] else float("nan")
        if np.isnan(estimate):
            out.append(_not_measured(judge, name, "alpha undefined: fewer than two values or no dialogue "
                                                  "scored twice"))
            continue
        low, high = _bootstrap(matrix.shape[1], alpha, settings)
        verdict = PASS if estimate >= ALPHA_RELIABLE and low >= ALPHA_TENTATIVE else FAIL
        out.append(Check(judge.label, name, verdict, estimate, low, high, matrix.shape[1],
                         f"Krippendorff's alpha ({scale.level}) over {len(samples)} samples"))
    return out


def _paired(material: _Material, judge: JudgeRef, probe: str, dim: str) -> tuple[np.ndarray, np.ndarray]:
    """(probe scores, ordinary first-sample scores) of the dialogues both scored, by dialogue id."""
    base = material.scores[judge]
    base = base[(base["sample"] == 0) & (base["dimension"] == dim)][["dialogue_id", "score"]]
    probed = material.probes[judge]
    probed = probed[(probed["probe"] == probe) & (probed["sample"] == 0) & (probed["dimension"] == dim)]
    both = probed[["dialogue_id", "score"]].merge(base, on="dialogue_id", suffixes=("_probe", "_base"))
    both = both.dropna()
    both = both.sort_values("dialogue_id")
    return both["score_probe"].to_numpy(), both["score_base"].to_numpy()


def _needed(changes: np.ndarray, effect: float) -> int:
    """Dialogues a paired design needs to detect `effect` (the planner's paired t-test, each dialogue a
    unit), from the spread of the per-dialogue changes seen."""
    spread = float(np.var(changes, ddof=1)) if len(changes) > 1 else 0.0
    return users_needed(PairedComponents(spread, 0.0, 0.0, 0.0), effect, Design(2, 1), alpha=PLAN_ALPHA,
                        power=PLAN_POWER)


def _three_way(judge: JudgeRef, name: str, diff: Interval, verdict: str, note: str, changes: np.ndarray,
               effect: float) -> Check:
    """A probe check's row; an inconclusive one says how many dialogues would settle it."""
    needed = _needed(changes, effect) if verdict == INCONCLUSIVE else None
    if needed is not None:
        note += f"; inconclusive at n={diff.n}: about {needed} dialogues would detect a change of {effect:g}"
    return Check(judge.label, name, verdict, diff.estimate, diff.low, diff.high, diff.n, note, needed)


def drop_verdict(low: float, high: float, effect: float) -> str:
    """A drop is expected: pass when the interval lies below 0, fail when it rules out a drop of
    `effect` (lies above -effect), inconclusive when it holds both no change and that drop."""
    return PASS if high < 0 else FAIL if low > -effect else INCONCLUSIVE


def no_rise_verdict(low: float, high: float, effect: float) -> str:
    """No material rise is expected: pass when the interval rules out a rise of `effect` (lies below
    it), fail when it shows a rise (lies above 0), inconclusive when it holds both."""
    return PASS if high < effect else FAIL if low > 0 else INCONCLUSIVE


def hold_verdict(low: float, high: float, margin: float) -> str:
    """No material change either way is expected: pass when the interval lies within +/- `margin`, fail
    when it shows a change (excludes 0), inconclusive when it holds both."""
    return PASS if -margin <= low and high <= margin else FAIL if low > 0 or high < 0 else INCONCLUSIVE


def _smallest(dimension: str, settings: CardSettings) -> float:
    """The smallest change of `dimension` that matters: `tc_margin` on TC (0-1), else `smallest_effect`."""
    return settings.tc_margin if dimension == TASK_COMPLETION else settings.smallest_effect


def profile_counterfactual(material: _Material, judge: JudgeRef, settings: CardSettings) -> list[Check]:
    """Personalization must drop (`drop_verdict`, against a drop of `smallest_effect`); task completion
    must hold (`hold_verdict`, within plus or minus `tc_margin`)."""
    rows = [(PERSONALIZATION, f"profile counterfactual ({_short(PERSONALIZATION)} drops)"),
            (TASK_COMPLETION, f"profile counterfactual ({_short(TASK_COMPLETION)} holds)")]
    out = []
    for dim, name in rows:
        probe, base = _paired(material, judge, ProfileSwap.name, dim)
        if not len(probe):
            out.append(_not_measured(judge, name, "no profile-swap judgments by this judge (run_probe)"))
            continue
        diff = paired_comparison(probe, base, confidence=settings.confidence,
                                 n_resamples=settings.n_resamples, seed=settings.seed).difference
        effect = _smallest(dim, settings)
        if dim == PERSONALIZATION:
            verdict = drop_verdict(diff.low, diff.high, effect)
            note = f"mean change of the score with another user's profile shown; a drop of {effect:g} matters"
        else:
            verdict = hold_verdict(diff.low, diff.high, effect)
            note = f"mean change of the verdict (0-1); must stay within +/-{effect:g}"
        out.append(_three_way(judge, name, diff, verdict, note, probe - base, effect))
    return out


def length_sensitivity(material: _Material, judge: JudgeRef, settings: CardSettings) -> list[Check]:
    """Padding the assistant's turns must not raise a score (`no_rise_verdict`, against a rise of the
    smallest change that matters)."""
    out = []
    for dim in settings.length_dimensions:
        name = f"length sensitivity ({_short(dim)})"
        probe, base = _paired(material, judge, Padding.name, dim)
        if not len(probe):
            out.append(_not_measured(judge, name, "no padding judgments by this judge (run_probe)"))
            continue
        diff = paired_comparison(probe, base, confidence=settings.confidence,
                                 n_resamples=settings.n_resamples, seed=settings.seed).difference
        effect = _smallest(dim, settings)
        out.append(_three_way(judge, name, diff, no_rise_verdict(diff.low, diff.high, effect),
                              f"mean change of the score with padded assistant turns; a rise of {effect:g} "
                              "matters", probe - base, effect))
    return out


def model_family(model: str, backend: BackendName) -> str | None:
    """The family of a model that answered on `backend` (None offline: rules, not a model; or unknown)."""
    if backend == OFFLINE or registry.called_backend(model) == OFFLINE:
        return None
    info = registry.lookup(model)
    names = " ".join([model, *((info.name, *info.ids.values()) if info else ())]).lower()
    return next((family for word, family in FAMILIES if word in names), None)


def self_preference(material: _Material, judge: JudgeRef, others: Sequence[JudgeRef],
                    settings: CardSettings) -> list[Check]:
    """Against a judge of another family: the judge's lead on dialogues of its own family's assistants
    minus its lead on the other dialogues; fail when that interval lies above 0."""
    names = [(dim, f"self-preference ({_short(dim)})") for dim in settings.dimensions]
    mine = model_family(judge.model, judge.backend)
    rival = next((o for o in others if model_family(o.model, o.backend) not in (None, mine)), None)
    first = material.first(judge)
    own = pd.Series([model_family(m, b) == mine if mine else False
                     for m, b in zip(first["assistant_model_id"], first["assistant_backend"], strict=True)],
                    index=first.index, dtype=bool)
    why = ("the judge has no known model family (or is offline)" if mine is None
           else f"no assistant of the {mine} family was judged" if not own.any()
           else "no second judge of another model family")
    if mine is None or not own.any() or rival is None:
        return [_not_measured(judge, name, why) for _, name in names]
    theirs = material.first(rival)[["dialogue_id", "dimension", "score"]]
    out = []
    for dim, name in names:
        both = first[first["dimension"] == dim].assign(own=own).merge(
            theirs[theirs["dimension"] == dim], on="dialogue_id", suffixes=("", "_rival")).dropna(
            subset=["score", "score_rival"]).sort_values("dialogue_id")
        lead = (both["score"] - both["score_rival"]).to_numpy()
        is_own = both["own"].to_numpy(dtype=bool)
        if not is_own.any():
            out.append(_not_measured(judge, name, f"{rival.label} scored none of its family's dialogues"))
            continue

        def gap(idx: np.ndarray, lead: np.ndarray = lead, is_own: np.ndarray = is_own) -> float:
            inside, outside = lead[idx][is_own[idx]], lead[idx][~is_own[idx]]
            if not len(inside):
                return float("nan")
            return float(inside.mean() - (outside.mean() if len(outside) else 0.0))

        estimate = gap(np.arange(len(lead)))
        low, high = _bootstrap(len(lead), gap, settings)
        out.append(Check(judge.label, name, FAIL if low > 0 else PASS, estimate, low, high, int(is_own.sum()),
                         f"lead over {rival.label} on {mine} assistants minus its lead on the others"))
    return out


def _tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b from the contingency table (fast, equal to scipy's; for the resamples)."""
    xs, ys = np.unique(x, return_inverse=True), np.unique(y, return_inverse=True)
    table = np.zeros((len(xs[0]), len(ys[0])))
    np.add.at(table, (xs[1], ys[1]), 1)
    return kendall_tau_b(table)


def cross_judge(material: _Material, judge: JudgeRef, others: Sequence[JudgeRef],
                settings: CardSettings) -> list[Check]:
    """Kendall's tau-b (scipy) between this judge and each other judge on the dialogues both scored."""
    from scipy.stats import kendalltau  # here: scipy.stats costs every kernel of 08 half a second

    if not others:
        return [_not_measured(judge, f"agreement with another judge ({_short(dim)})", "one judge on the card")
                for dim in settings.dimensions]
    out = []
    mine = material.first(judge)[["dialogue_id", "dimension", "score"]]
    for other in others:
        theirs = material.first(other)[["dialogue_id", "dimension", "score"]]
        for dim in settings.dimensions:
            name = f"agreement with {other.label} ({_short(dim)})"
            both = mine[mine["dimension"] == dim].merge(theirs[theirs["dimension"] == dim], on="dialogue_id",
                                                        suffixes=("", "_other")).dropna()
            both = both.sort_values("dialogue_id")
            x, y = both["score"].to_numpy(), both["score_other"].to_numpy()
            estimate = float(kendalltau(x, y).statistic) if len(x) >= 2 else float("nan")
            if np.isnan(estimate):
                why = f"tau undefined on {len(x)} shared dialogue(s): too few, or one judge gave one value"
                out.append(_not_measured(judge, name, why))
                continue
            low, high = _bootstrap(len(x), lambda idx, x=x, y=y: _tau(x[idx], y[idx]), settings)
            out.append(Check(judge.label, name, _agreement_verdict(estimate, low), estimate, low, high,
                             len(x), "Kendall tau-b of the two judges' scores"))
    return out


# -- the card ----------------------------------------------------------------------------------------------


def report_card(store: RunStore | str | Path, judges: Sequence[JudgeRef], *,
                annotations: pd.DataFrame | None = None, select: Select | None = None,
                settings: CardSettings = CardSettings()) -> TableResult:
    """The judge report card of `judges` over one run store: one row per judge and check.

    `select` keeps the dialogues the card rests on (e.g. notebook 07's `ProbeDesign.select`), so every
    check of every judge reads the same dialogues; None: all the store holds.

    `annotations` is the long frame of `labels.reading.read_sheets` (None: human agreement not
    measured). Probe checks read the `ProbeJudgment`s of `probes.run_probe`; self-consistency reads the
    judges' samples (`Judgment.sample`).
    """
    store = store if isinstance(store, RunStore) else RunStore(store)
    judges = list(dict.fromkeys(judges))
    if not judges:
        raise CardError("report_card needs at least one judge (JudgeRef(model, backend))")
    material = _Material(store, judges, select)
    checks: list[Check] = []
    for judge in judges:
        others = [j for j in judges if j != judge]
        checks += known_order(material, judge, settings)
        checks += human_agreement(material, judge, annotations, settings)
        checks += self_consistency(material, judge, settings)
        checks += profile_counterfactual(material, judge, settings)
        checks += length_sensitivity(material, judge, settings)
        checks += self_preference(material, judge, others, settings)
        checks += cross_judge(material, judge, others, settings)
    data = pd.DataFrame([vars(c) for c in checks]).astype({"n_needed": "Int64"})
    frame = data[list(CARD_COLUMNS)].copy()
    frame["n"] = frame["n"].astype(int)
    used = [material.first(j) for j in judges]
    tidy = pd.concat(used, ignore_index=True)
    return TableResult(frame, card_caption(settings) + provenance_note(backends(tidy)),
                       Source.of(f"run store {store.root.name}/", tidy["dialogue_id"].nunique(),
                                 "judged dialogues", backends(tidy), model_ids(tidy)),
                       data, precision=3)


def card_caption(settings: CardSettings) -> str:
    """The card's caption: what each check measures and when it passes."""
    level = round(settings.confidence * 100)
    return (
        f"Judge report card: each check pass, fail, inconclusive or not measured (missing material), with "
        f"its estimate, {level}% bootstrap interval over dialogues and n. Known order: Kendall tau-b of the "
        "reference assistants' designed rank and score, pass when the order is recovered (J3). Human "
        "agreement: Cohen's kappa with annotators (Table 5), and agreement with another judge: Kendall "
        f"tau-b, both pass at {AGREEMENT_FLOOR:g} or more with the interval above 0. Self-consistency: "
        f"Krippendorff's alpha across judge samples, pass at {ALPHA_RELIABLE:g} or more with the "
        f"interval's lower end at least {ALPHA_TENTATIVE:g}. The probes are read against the smallest "
        f"change that matters, {settings.smallest_effect:g} scale points (TC: {settings.tc_margin:g} on its "
        "0-1 scale): inconclusive where the interval holds both no change and that change, with n_needed, "
        f"the dialogues a paired t-test needs to detect it (alpha {PLAN_ALPHA:g}, power {PLAN_POWER:.0%}). "
        "Profile counterfactual: the mean change when the judge sees another user's profile; P passes "
        f"when the interval lies below 0 and fails when it lies above -{settings.smallest_effect:g}; TC "
        f"passes within +/-{settings.tc_margin:g} and fails when the interval excludes 0. Length "
        "sensitivity: the mean change with neutral padding added to assistant turns; passes when the "
        "interval lies below the smallest change, fails when it lies above 0. Self-preference: the judge's "
        "lead over a judge of another family on its own family's assistants minus its lead elsewhere; fails "
        "when the interval lies above 0."
    )


def verdicts(card: TableResult) -> dict[str, dict[str, str]]:
    """judge -> check -> verdict, for reading a card in code (tests, notebooks)."""
    out: dict[str, dict[str, str]] = {}
    for row in card.frame.itertuples(index=False):
        out.setdefault(str(row.judge), {})[str(row.check)] = str(row.verdict)
    return out


def export_card(card: TableResult, output_dir: str | Path, output: OutputId) -> dict[str, Path]:
    """The card saved as the table `output` (notebook 07's Table T1), its numbers at three decimals."""
    return card.save(output_dir, output, float_format="{:.3f}")


__all__ = ["CARD_COLUMNS", "CardError", "CardSettings", "Check", "JudgeRef", "export_card",
           "model_family", "report_card", "verdicts"]
