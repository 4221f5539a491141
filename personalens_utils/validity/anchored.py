"""Human-anchored estimates: the judge's scores on every dialogue, corrected by human ratings of a sample.

A judge scores every dialogue, cheaply and with a bias nobody knows; people rate a few, slowly and
without it. Prediction-powered inference (PPI, Angelopoulos et al. 2023; PPI++ for the power tuning)
combines them: the anchored mean is lambda x (judge mean over all dialogues) + (human mean - lambda x
judge mean) over the labelled ones. The second term measures the judge's bias where people rated,
so the estimate is as right as the human mean, and with a judge that tracks people its interval is
narrower than the human mean's at the same number of labels. lambda in [0, 1] is tuned to the data
(`tuned_lambda`, PPI++'s rule); lambda = 0 is the human mean.

What it assumes (docs/validity.md): the labelled dialogues are a random sample of the judged ones,
drawn by the design the annotation manifest records (`SampleDesign`; each label weighted
by the inverse of its chance of being drawn), and the judge scored every dialogue of the population.

Intervals: with `cluster=None`, the CLT intervals of `ppi_py` (`ppi_mean_ci`, `classical_mean_ci`),
which treat dialogues as independent. Dialogues of one user move together and `ppi_py` has no
clustered interval, so by default (`cluster="user_id"`) the same estimator is bootstrapped over users
(a drawn user brings all their dialogues, judged and labelled, and lambda is tuned again in each
resample); the interval is the estimate +- z x the bootstrap standard error. Differences between
assistants use the same draws of users for both, so the users' share cancels as it should.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, count
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate
from scipy.stats import norm

from personalens_utils.base.errors import KitError
from personalens_utils.base.files import atomic_file
from personalens_utils.judging import DIMENSIONS as JUDGE_DIMENSIONS
from personalens_utils.labels import AnnotationError
from personalens_utils.labels.reading import ratings_of
from personalens_utils.labels.sampling import SampleDesign, read_manifest
from personalens_utils.labels.sheets import MANIFEST_NAME, WRITER_STAGE, export_sheet, writing_folder
from personalens_utils.labels.synthetic import SYNTHETIC_PREFIX, synthetic_sheets
from personalens_utils.measures.bootstrap import MAX_DRAWS
from personalens_utils.measures.design import PERCENT_DIMENSIONS
from personalens_utils.measures.display import DIMENSION_NAMES, provenance_note
from personalens_utils.measures.scores import backends, run_label
from personalens_utils.measures.stats import DEFAULT_RESAMPLES, Interval
from personalens_utils.outputs.latex import Block, Printed
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.runstore.store import writer_files

DIMENSIONS = ("task_completion", "personalization", "naturalness_assistant", "coherence_assistant")
"""The assistant's dimensions a sheet rates (the sheet's ids), the table's default."""
KINDS = ("judge", "human", "anchored")
MIN_LABELS = 2
"""Fewer labelled dialogues (or labelled users, when clustered) than this in a group: no human or
anchored estimate (blank, and the caption says why)."""
DIFFERENCE_COLUMNS = ("dimension", "treatment", "control", "judge_difference", "judge_ci_low",
                      "judge_ci_high", "human_difference", "human_ci_low", "human_ci_high",
                      "anchored_difference", "ci_low", "ci_high")
"""The differences frame of `estimate`, also when it has no row (fewer than two assistants)."""


class ValidityError(KitError, ValueError):
    """Human-anchored estimates cannot be made from what was given: the message names what and where."""


def _number(value: Any) -> float:
    return float(np.asarray(value, dtype=float).ravel()[0])


def tuned_lambda(human: np.ndarray, judge_labelled: np.ndarray, judge_all: np.ndarray,
                 weights: np.ndarray) -> float:
    """PPI++'s power tuning for a mean: Cov(human, judge) / ((1 + n/N) Var(judge)), clipped to [0, 1].

    Computed here (with the design weights in the covariance) so that the CLT intervals of `ppi_py` and
    the cluster bootstrap use one rule; with equal weights it is `ppi_py`'s own choice.
    """
    n, big_n = len(human), len(judge_all)
    w = weights / weights.mean()
    cov = np.mean(w * human * judge_labelled) - np.mean(w * human) * np.mean(w * judge_labelled)
    var = np.var(np.concatenate([judge_labelled, judge_all]), ddof=1)
    if not var > 0:
        return 0.0
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


@dataclass(frozen=True)
class Group:
    """One assistant's dialogues of one dimension: the judge's score of each judged dialogue and its
    cluster (user), and for the labelled ones the human rating, the judge's score and the design weight."""

    judge_all: np.ndarray
    clusters_all: np.ndarray
    human: np.ndarray
    judge_labelled: np.ndarray
    weights: np.ndarray
    clusters_labelled: np.ndarray

    @property
    def usable(self) -> bool:
        """Enough labels (and labelled users) for a human or anchored estimate."""
        return len(self.human) >= MIN_LABELS and len(np.unique(self.clusters_labelled)) >= MIN_LABELS


@dataclass(frozen=True)
class Estimates:
    """A group's three estimates, and what the planner needs: lambda and the anchored estimate's two
    variance parts per observation (labelled: the rectifier; judged: the judge's own spread)."""

    judge: Interval
    human: Interval
    anchored: Interval
    lam: float
    rectifier_var: float
    imputed_var: float


def clt_estimates(group: Group, confidence: float = 0.95) -> Estimates:
    """The three estimates of one group with `ppi_py`'s CLT intervals (dialogues independent)."""
    alpha = 1 - confidence
    judge_all, big_n = group.judge_all, len(group.judge_all)
    low, high = classical_mean_ci(judge_all, alpha=alpha)
    judge = Interval(float(judge_all.mean()), _number(low), _number(high), big_n, confidence)
    n = len(group.human)
    if not group.usable:
        nan = float("nan")
        blank = Interval(nan, nan, nan, n, confidence)
        return Estimates(judge, blank, blank, nan, nan, nan)
    w = group.weights / group.weights.mean()
    low, high = classical_mean_ci(group.human, w=w, alpha=alpha)
    human = Interval(float(np.mean(w * group.human)), _number(low), _number(high), n, confidence)
    lam = tuned_lambda(group.human, group.judge_labelled, judge_all, w)
    args = (group.human, group.judge_labelled, judge_all)
    low, high = ppi_mean_ci(*args, alpha=alpha, lam=lam, w=w)
    point = _number(ppi_mean_pointestimate(*args, lam=lam, w=w))
    anchored = Interval(point, _number(low), _number(high), n, confidence)
    rectifier = float(np.var(w * (group.human - lam * group.judge_labelled)))
    return Estimates(judge, human, anchored, lam, rectifier, float(np.var(lam * judge_all)))


def _user_sums(group: Group, users: np.ndarray) -> np.ndarray:
    """Per-user sums (rows) of what the estimator needs, users in the order of `users` (10 x users)."""
    def add(clusters: np.ndarray, values: np.ndarray) -> np.ndarray:
        codes = np.searchsorted(users, clusters)
        return np.bincount(codes, weights=values, minlength=len(users))

    w = group.weights / group.weights.mean() if len(group.weights) else group.weights
    y, h, a = group.human, group.judge_labelled, group.judge_all
    lab, every = group.clusters_labelled, group.clusters_all
    return np.vstack([
        add(every, np.ones_like(a)), add(every, a), add(every, a * a),
        add(lab, np.ones_like(h)), add(lab, h), add(lab, h * h),
        add(lab, w), add(lab, w * y), add(lab, w * h), add(lab, w * y * h),
    ])


def _from_sums(s: np.ndarray) -> np.ndarray:
    """Judge, human and anchored estimates from summed user rows (`_user_sums` order; last axis kinds)."""
    big_n, a1, a2, n, h1, h2, w0, wy, wh, wyh = s
    with np.errstate(invalid="ignore", divide="ignore"):
        judge = a1 / big_n
        human, judged_h = wy / w0, wh / w0
        cov = wyh / w0 - human * judged_h
        m = n + big_n
        var = (h2 + a2 - (h1 + a1) ** 2 / m) / (m - 1)
        lam = np.where(var > 0, np.clip(cov / ((1 + n / big_n) * var), 0, 1), 0.0)
        anchored = lam * judge + human - lam * judged_h
    return np.stack([judge, human, anchored], axis=-1)


def bootstrap_draws(groups: Sequence[Group], n_resamples: int, seed: int) -> np.ndarray:
    """Estimates of every group (resamples x groups x kinds) over the same draws of users with replacement:
    each drawn user brings their dialogues in every group, judged and labelled."""
    users = np.unique(np.concatenate([g.clusters_all for g in groups]))
    sums = np.stack([_user_sums(g, users) for g in groups])  # groups x 10 x users
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, len(groups), len(KINDS)))
    chunk = max(1, min(n_resamples, MAX_DRAWS // max(len(users) * len(groups) * 10, 1)))
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        idx = rng.integers(0, len(users), size=(stop - start, len(users)))
        drawn = sums[:, :, idx].sum(axis=-1)  # groups x 10 x resamples
        out[start:stop] = _from_sums(np.moveaxis(drawn, 1, 0)).transpose(1, 0, 2)
    return out


def _around(point: float, se: float, n: int, confidence: float) -> Interval:
    z = norm.ppf(0.5 + confidence / 2)
    return Interval(point, float(point - z * se), float(point + z * se), n, confidence)


def clustered_estimates(
    groups: Sequence[Group], *, confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> tuple[list[Estimates], np.ndarray]:
    """Each group's estimates with intervals from a bootstrap of users, and the draws (for differences)."""
    draws = bootstrap_draws(groups, n_resamples, seed)
    out = []
    for k, group in enumerate(groups):
        clt = clt_estimates(group, confidence)
        se = np.nanstd(draws[:, k, :], axis=0, ddof=1)
        parts = [_around(iv.estimate, float(s), iv.n, confidence) if not math.isnan(iv.estimate) else iv
                 for iv, s in zip((clt.judge, clt.human, clt.anchored), se, strict=True)]
        out.append(Estimates(*parts, clt.lam, clt.rectifier_var, clt.imputed_var))
    return out, draws


def labelled_frame(scores: pd.DataFrame, ratings: pd.DataFrame, design: SampleDesign, *,
                   where: Mapping[str, Any] | None = None, arm: str = "assistant_model",
                   dimensions: Sequence[str] = DIMENSIONS, cluster: str | None = "user_id") -> pd.DataFrame:
    """One row per judged dialogue and dimension of the sample's population: `dimension`, `arm`,
    `dialogue_id`, `cluster`, `judge` (mean over judge samples), `human` (mean over annotators; NaN
    where unlabelled or left blank), `weight` (the label's inverse chance of being drawn). TC in %.

    The population is the score frame's dialogues that `where` (the manifest's) keeps: the pool the
    sample was drawn from.
    """
    needed = ["dialogue_id", "dimension", "score", arm, *([cluster] if cluster else [])]
    absent = [c for c in needed if c not in scores.columns]
    if absent:
        raise ValidityError(f"the score frame has no column(s) {absent}; load it with "
                            "measures.scores.load_scores")
    if "judge_model" in scores.columns and scores["judge_model"].nunique() > 1:
        judges = sorted(map(str, scores["judge_model"].unique()))
        raise ValidityError(f"the score frame holds several judges {judges}; anchor one judge at a time "
                            "(load_scores(..., judge_model=...))")
    part = scores
    for key, value in (where or {}).items():
        if key not in part.columns:
            raise ValidityError(f"the sample was drawn where {key!r} = {value!r}, a column the score frame "
                                "does not have")
        part = part[part[key] == value]
    part = part[part["dimension"].isin(list(dimensions)) & part["score"].notna()]
    if part.empty:
        raise ValidityError(f"no judge scores of {list(dimensions)} in the score frame"
                            + (f" where {dict(where)}" if where else ""))
    frame = pd.DataFrame({
        "dimension": part["dimension"].astype(str).to_numpy(),
        "arm": np.asarray(run_label(part, arm), dtype=object).astype(str),
        "dialogue_id": part["dialogue_id"].astype(str).to_numpy(),
        "cluster": (part[cluster] if cluster else part["dialogue_id"]).astype(str).to_numpy(),
        "judge": part["score"].to_numpy(dtype=float),
    })
    keys = ["dimension", "arm", "dialogue_id", "cluster"]
    judged = frame.groupby(keys, sort=True)["judge"].mean().reset_index()
    rated = ratings[ratings["dimension"].isin(list(dimensions))]
    humans = rated.groupby(["dialogue_id", "dimension"], sort=True)["score"].mean().rename("human")
    humans = humans.reset_index()
    labelled = sorted(set(rated["dialogue_id"]))
    stray = sorted(set(labelled) - set(judged["dialogue_id"]))
    if stray:
        raise ValidityError(f"{len(stray)} rated dialogue(s) have no judge score in the score frame, e.g. "
                            f"{stray[0]!r}: load the scores of the run (and setting) the sample was drawn "
                            "from")
    try:
        weight = dict(zip(labelled, design.weights(labelled), strict=True))
    except AnnotationError as exc:
        raise ValidityError(str(exc)) from exc
    out = judged.merge(humans, on=["dialogue_id", "dimension"], how="left")
    out["weight"] = out["dialogue_id"].map(weight).where(out["human"].notna())
    percent = out["dimension"].isin(PERCENT_DIMENSIONS)
    out.loc[percent, ["judge", "human"]] *= 100.0
    return out


def _group(part: pd.DataFrame) -> Group:
    rated = part[part["human"].notna()]
    return Group(part["judge"].to_numpy(dtype=float), part["cluster"].to_numpy(dtype=str),
                 rated["human"].to_numpy(dtype=float), rated["judge"].to_numpy(dtype=float),
                 rated["weight"].to_numpy(dtype=float), rated["cluster"].to_numpy(dtype=str))


def estimate(frame: pd.DataFrame, *, clustered: bool = True, confidence: float = 0.95,
             n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per arm and dimension of a `labelled_frame`: the three estimates with intervals; and per dimension
    every pair of arms' differences (later minus earlier, arms sorted)."""
    rows, diffs = [], []
    for dimension, of_dim in frame.groupby("dimension", sort=True):
        arms = sorted(of_dim["arm"].unique())
        groups = [_group(of_dim[of_dim["arm"] == a]) for a in arms]
        if clustered:
            found, draws = clustered_estimates(groups, confidence=confidence, n_resamples=n_resamples,
                                               seed=seed)
        else:
            found, draws = [clt_estimates(g, confidence) for g in groups], None
        for a, group, est in zip(arms, groups, found, strict=True):
            rows.append({"assistant": a, "dimension": dimension, **_columns(est, _bounds(str(dimension))),
                         "n_labels": len(group.human), "n_judged": len(group.judge_all),
                         "n_labelled_users": len(np.unique(group.clusters_labelled)),
                         "lam": est.lam, "rectifier_var": est.rectifier_var, "imputed_var": est.imputed_var})
        for (c, control), (t, treatment) in combinations(enumerate(zip(arms, found, strict=True)), 2):
            diffs.append({"dimension": dimension, "treatment": treatment[0], "control": control[0],
                          **_difference(c, control[1], t, treatment[1], draws, confidence)})
    return pd.DataFrame(rows), pd.DataFrame(diffs, columns=list(DIFFERENCE_COLUMNS))


def _bounds(dimension: str) -> tuple[float, float]:
    """The dimension's scale in the table's units (TC in %): a mean cannot lie outside it."""
    dim = JUDGE_DIMENSIONS[dimension]
    factor = 100.0 if dimension in PERCENT_DIMENSIONS else 1.0
    return dim.low * factor, dim.high * factor


def _columns(est: Estimates, bounds: tuple[float, float]) -> dict[str, float]:
    """The three estimates and their intervals, each interval cut to the scale (a normal interval of a
    share near 0% or 100% reaches past it; the mean cannot, so coverage is unchanged)."""
    low, high = bounds
    out = {}
    for kind, prefix in (("judge", "judge_"), ("human", "human_"), ("anchored", "")):
        iv = getattr(est, kind)
        out |= {f"{kind}_estimate": iv.estimate, f"{prefix}ci_low": float(np.clip(iv.low, low, high)),
                f"{prefix}ci_high": float(np.clip(iv.high, low, high))}
    return out


def _difference(c: int, control: Estimates, t: int, treatment: Estimates, draws: np.ndarray | None,
                confidence: float) -> dict[str, float]:
    """Treatment minus control for each kind: from the shared user draws when clustered, else the two
    CLT standard errors combined as independent (conservative when the assistants met the same users)."""
    z = norm.ppf(0.5 + confidence / 2)
    out = {}
    for k, kind in enumerate(KINDS):
        a, b = getattr(treatment, kind), getattr(control, kind)
        point = a.estimate - b.estimate
        if draws is not None:
            se = float(np.nanstd(draws[:, t, k] - draws[:, c, k], ddof=1))
        else:
            se = math.hypot((a.high - a.low) / (2 * z), (b.high - b.low) / (2 * z))
        prefix = "" if kind == "anchored" else f"{kind}_"
        out |= {f"{kind}_difference": point, f"{prefix}ci_low": point - z * se,
                f"{prefix}ci_high": point + z * se}
    return out


def _is_synthetic(ratings: pd.DataFrame) -> bool:
    return bool(ratings["annotator"].astype(str).str.startswith(SYNTHETIC_PREFIX).any())


@dataclass(frozen=True)
class HumanAnchored:
    """Human-anchored estimates of a run: per assistant and dimension (`estimates`), the differences
    between assistants (`differences`), the caption's shared sentences and the source."""

    estimates: pd.DataFrame
    differences: pd.DataFrame
    note: str
    source: Source
    confidence: float
    synthetic: bool

    def _caption(self, first: str) -> str:
        warning = ("SYNTHETIC ANNOTATORS (seeded noise on the judge's scores, no person rated): this table "
                   "shows how the estimator works, not how right the judge is. ") if self.synthetic else ""
        return warning + first + self.note

    def table(self) -> TableResult:
        """One row per assistant and dimension: judge-only, human-only and anchored estimates, each with
        its interval, and the labels and judged dialogues behind them."""
        columns = ["assistant", "dimension", "judge_estimate", "judge_ci_low", "judge_ci_high",
                   "human_estimate", "human_ci_low", "human_ci_high", "anchored_estimate", "ci_low",
                   "ci_high", "n_labels", "n_judged"]
        caption = self._caption(
            "Human-anchored estimates: each assistant's mean by the judge alone (every judged dialogue), by "
            "people alone (the labelled sample) and anchored (the judge corrected by the human-judge gap on "
            f"the labelled dialogues, prediction-powered inference), {self.confidence:.0%} intervals.")
        if self.estimates["anchored_estimate"].isna().any():
            caption += (f" A blank anchored or human cell: fewer than {MIN_LABELS} labelled dialogues or "
                        "labelled users.")
        return TableResult(self.estimates[columns], caption, self.source, data=self.estimates, precision=2,
                           words=_words, printed=_printed)

    def differences_table(self) -> TableResult:
        """Each pair of assistants (later minus earlier), per dimension, by each of the three estimates."""
        caption = self._caption(f"Human-anchored differences between assistants, {self.confidence:.0%} "
                                "intervals (ci_low, ci_high: the anchored difference's).")
        if self.differences.empty:
            caption += " No rows: the scores hold one assistant, so there is no pair to compare."
        return TableResult(self.differences, caption, self.source, precision=2, words=_words,
                           printed=_printed)

    def plan(self, target_width: float | Mapping[str, float]) -> TableResult:
        """How many labels (in all, and more than now) each row needs for an anchored interval of
        `target_width` (one width, or one per dimension; TC in percentage points)."""
        plan = label_plan(self.estimates, target_width, confidence=self.confidence)
        caption = self._caption(
            "Labels needed for a target width of the anchored interval, from the variance of the "
            "human-judge gap and of the judge's scores seen so far, more labels drawn by the same design "
            "(the bootstrap's widening for users kept). 'not by labels': the judge's own spread over the "
            "judged dialogues is already wider; judge more dialogues.")
        return TableResult(plan, caption, self.source, precision=2, words=_words)


def label_plan(estimates: pd.DataFrame, target_width: float | Mapping[str, float], *,
               confidence: float = 0.95) -> pd.DataFrame:
    """Per row of `estimates` (`estimate`'s): the labels an anchored interval of the target width needs.

    The interval's half-width is z x sqrt(rectifier / n + judge / N) x inflation (inflation: the width
    seen over that CLT width, above 1 when users cluster), so the plan at the current width is the
    current labels; solved for n. None when the width cannot be
    reached by labels: the judge's term alone is wider, or more labels than judged dialogues are needed.
    """
    z = norm.ppf(0.5 + confidence / 2)
    rows = []
    for row in estimates.to_dict("records"):
        dim = row["dimension"]
        target = target_width.get(dim) if isinstance(target_width, Mapping) else target_width
        if target is None or not target > 0:
            raise ValidityError(f"no positive target width for dimension {dim!r} (got {target!r})")
        n, big_n = row["n_labels"], row["n_judged"]
        width = row["ci_high"] - row["ci_low"]
        needed: int | None = None
        if not math.isnan(width) and row["rectifier_var"] > 0:
            clt = 2 * z * math.sqrt(row["rectifier_var"] / n + row["imputed_var"] / big_n)
            inflation = width / clt if clt > 0 else 1.0
            room = (target / (2 * z * inflation)) ** 2 - row["imputed_var"] / big_n
            if room > 0:
                needed = math.ceil(row["rectifier_var"] / room)
                needed = needed if needed <= big_n else None
        rows.append({"assistant": row["assistant"], "dimension": dim, "n_labels": n, "width": width,
                     "target_width": float(target), "labels_needed": needed,
                     "more_labels": None if needed is None else max(0, needed - n),
                     "note": "" if needed is not None else ("too few labels to plan" if math.isnan(width)
                                                            else "not by labels")})
    out = pd.DataFrame(rows)
    for column in ("labels_needed", "more_labels"):
        out[column] = out[column].astype("Int64")
    return out


_HEADERS = {"judge_estimate": "judge", "judge_ci_low": "judge low", "judge_ci_high": "judge high",
            "human_estimate": "human", "human_ci_low": "human low", "human_ci_high": "human high",
            "anchored_estimate": "anchored", "ci_low": "low", "ci_high": "high", "n_labels": "labels",
            "n_judged": "judged", "judge_difference": "judge Δ", "human_difference": "human Δ",
            "anchored_difference": "anchored Δ", "labels_needed": "labels needed", "more_labels": "more",
            "target_width": "target", "width": "width"}


def _words(shown: pd.DataFrame) -> pd.DataFrame:
    """Headers and dimension ids as a reader names them; the CSV keeps the ids."""
    named = shown.copy()
    if "dimension" in named:
        named["dimension"] = named["dimension"].map(lambda d: DIMENSION_NAMES.get(d, d))
    return named.rename(columns=_HEADERS)


def _printed(shown: pd.DataFrame) -> Printed:
    """For a paper: each estimate with its interval below it, a heading row per dimension."""
    frame = shown.copy()
    kinds = [k for k in ("judge", "human", "anchored") if k in frame] or [
        f"{k} Δ" for k in ("judge", "human", "anchored")]
    for kind in kinds:
        prefix = "" if kind.startswith("anchored") else kind.split()[0] + " "
        low, high = frame.pop(f"{prefix}low"), frame.pop(f"{prefix}high")
        frame[kind] = [f"{v} [{lo}, {hi}]" if v else ""
                       for v, lo, hi in zip(frame[kind], low, high, strict=True)]
    if "treatment" in frame:
        frame.insert(1, "difference", frame.pop("treatment") + " − " + frame.pop("control"))
    ordered = ["dimension", *[c for c in frame if c not in ("dimension", *kinds)], *kinds]
    rest = [c for c in ("labels", "judged") if c in frame]
    ordered = [c for c in ordered if c not in rest] + rest
    return Printed((Block(frame[ordered], group="dimension"),), "Intervals in brackets below each estimate.")


@dataclass(frozen=True)
class AnchorOptions:
    """What `human_anchored` is asked to do: which column names the assistant (`arm`), which dimensions,
    whose values are bootstrapped (`cluster`: users; None for `ppi_py`'s CLT intervals), the interval's
    confidence, the bootstrap's resamples and seed."""

    arm: str = "assistant_model"
    dimensions: Sequence[str] = DIMENSIONS
    cluster: str | None = "user_id"
    confidence: float = 0.95
    n_resamples: int = DEFAULT_RESAMPLES
    seed: int = 0


def human_anchored(
    scores: pd.DataFrame,
    sheets: pd.DataFrame | str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    manifest: str | os.PathLike[str],
    options: AnchorOptions | None = None,
    origin: str = "a score frame",
) -> HumanAnchored:
    """Human-anchored estimates of one judge's scores (`load_scores`) from filled sheets (paths, a glob,
    or `labels.reading.read_sheets`' frame) of the sample the manifest describes, weighted by its design."""
    opts = options or AnchorOptions()
    record = read_manifest(manifest)
    design = SampleDesign.from_manifest(record)
    ratings = ratings_of(sheets, manifest)
    frame = labelled_frame(scores, ratings, design, where=record.get("where"), arm=opts.arm,
                           dimensions=opts.dimensions, cluster=opts.cluster)
    estimates, differences = estimate(frame, clustered=opts.cluster is not None, confidence=opts.confidence,
                                      n_resamples=opts.n_resamples, seed=opts.seed)
    method = (f"a bootstrap of {opts.cluster} values ({opts.n_resamples} resamples; ppi_py has no clustered "
              "interval): estimate ± z × bootstrap standard error" if opts.cluster else
              "ppi_py's CLT intervals (dialogues taken as independent)")
    drawn = ("a simple random sample of" if design.by is None else
             f"a random sample stratified by {design.by} ({len(design.strata)} strata, weighted by inverse "
             "inclusion probability) of")
    where = record.get("where") or {}
    pool = "the finished dialogues" + (" where " + ", ".join(f"{k} = {v}" for k, v in where.items())
                                       if where else "")
    annotators = ratings["annotator"].nunique()
    note = (f" Power-tuned PPI (PPI++, ppi_py); intervals: {method}. Labels: {drawn} {pool}, "
            f"{annotators} annotator(s) averaged per dialogue. TC in %."
            + provenance_note(backends(scores)))
    judged = int(frame["dialogue_id"].nunique())
    models = sorted(map(str, scores["judge_model"].unique())) if "judge_model" in scores.columns else ()
    source = Source.of(origin, judged, "judged dialogues", backends(scores), models)
    return HumanAnchored(estimates, differences, note, source, opts.confidence, _is_synthetic(ratings))


def human_anchored_table(scores: pd.DataFrame,
                         sheets: pd.DataFrame | str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                         **options: Any) -> TableResult:
    """`human_anchored(...).table()`: the table notebook 09 shows and saves as Table V1."""
    return human_anchored(scores, sheets, **options).table()


def synthetic_sample(
    store: Any, benchmark: Any, scores: pd.DataFrame, out_dir: str | os.PathLike[str], *,
    n: int = 120, seed: int = 0, where: Mapping[str, Any] | None = None,
) -> tuple[list[Path], Path]:
    """Notebook 09 without people's sheets: a sample exported to `out_dir` (stratified by assistant) and
    filled by the synthetic annotator, so tables say SYNTHETIC; the sheets and the sample's manifest.

    The sample is drawn again on every run from the store as it is then (one more assistant is one more
    stratum), so a rerun on the same inputs writes the same bytes and one on a grown store rewrites the
    sample. The folder's `KIT_MARKER` records what 09 wrote; a folder holding anything else (a sheet
    someone filled, or one written before the marker) is left as it is, with one line naming the file,
    and the sample goes to the next free `<out_dir>_<k>`. The folder is held while it is written
    (`writing_folder`): a second run of 09 into it stops at once, naming the folder and the
    run holding it, and the first run's files stay as it writes them.
    """
    folder = _own_folder(Path(out_dir))
    with writing_folder(folder, ValidityError, "give this run of notebook 09 another output_dir"):
        return _write_sample(folder, store, benchmark, scores, n=n, seed=seed, where=where)


def _write_sample(folder: Path, store: Any, benchmark: Any, scores: pd.DataFrame, *, n: int, seed: int,
                  where: Mapping[str, Any] | None) -> tuple[list[Path], Path]:
    """`synthetic_sample`'s writing, with the folder held: drafted aside, then swapped in file by file."""
    before = _marked(folder)
    with tempfile.TemporaryDirectory(prefix=f".{folder.name}-", dir=folder.parent) as draft:
        paths = export_sheet(store, benchmark, draft, n=n, seed=seed, where=where,
                                        stratify_by="assistant_model")
        sheets = synthetic_sheets(paths, scores, seed=seed)
        written = (paths["sheet"], paths["guidelines"], paths["manifest"], *sheets)
        digests = {path.name: _digest(path) for path in written}
        # Old and new digests both recorded while files are swapped: a run stopped midway leaves a folder
        # whose every file is still known as 09's.
        swapping = {name: list(known) for name, known in before.items()}
        for name, digest in digests.items():
            swapping.setdefault(name, []).append(digest)
        _mark(folder, swapping)
        for name, digest in digests.items():
            if (folder / name).is_file() and _digest(folder / name) == digest:
                continue
            os.replace(Path(draft) / name, folder / name)
        for name in before.keys() - digests.keys():
            (folder / name).unlink(missing_ok=True)
        _mark(folder, {name: [digest] for name, digest in digests.items()})
    return [folder / p.name for p in sheets], folder / MANIFEST_NAME


KIT_MARKER = "written_by_kit.json"
"""In the folder of notebook 09's own sample: each file 09 wrote there and its SHA-256, so a rerun
rewrites its own files and never one someone filled or put there."""


def _digest(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _marked(folder: Path) -> dict[str, list[str]]:
    """The files `KIT_MARKER` says 09 wrote in `folder`, with their digests; none when it is absent or
    unreadable (then nothing there counts as the kit's)."""
    try:
        files = json.loads((folder / KIT_MARKER).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return files if isinstance(files, dict) else {}


def _mark(folder: Path, files: Mapping[str, list[str]]) -> None:
    record = {"written_by": "notebook 09 (personalens_utils.validity.anchored.synthetic_sample)",
              "why": "a rerun rewrites these files, and only these, when they are as 09 wrote them",
              "files": dict(sorted(files.items()))}
    with atomic_file(folder / KIT_MARKER) as fh:
        fh.write(json.dumps(record, indent=1) + "\n")


def _foreign(folder: Path) -> list[Path]:
    """What `folder` holds that 09 did not write as it is now (per its marker), sheets first."""
    if not folder.exists():
        return []
    if not folder.is_dir():
        return [folder]
    marked = _marked(folder)
    return sorted((p for p in folder.iterdir() if not _kits_own(p.name)
                   and not (p.is_file() and _digest(p) in marked.get(p.name, ()))),
                  key=lambda p: (p.suffix != ".csv", p.name))


def _kits_own(name: str) -> bool:
    """The marker, the folder's writer lock and its note, and a marker being written (a run holds the
    folder): files of 09 that no digest lists."""
    return (name == KIT_MARKER or name in writer_files(WRITER_STAGE)
            or (name.startswith(f".{KIT_MARKER}.") and name.endswith(".tmp")))


def _own_folder(wanted: Path) -> Path:
    """`wanted`, or the first `<wanted>_<k>` (k = 2, 3, ...) holding nothing but 09's own files; each folder
    passed over is said in one line naming a file in it that 09 leaves alone."""
    passed: list[list[Path]] = []
    for k in count(1):
        folder = wanted if k == 1 else wanted.with_name(f"{wanted.name}_{k}")
        if not (foreign := _foreign(folder)):
            break
        passed.append(foreign)
    for foreign in passed:
        more = f" (and {len(foreign) - 1} more there)" if len(foreign) > 1 else ""
        print(f"{foreign[0]}{more}: not as notebook 09 wrote it (someone's sheet, or a sample from before "
              f"09 marked its files): left as it is and not used; 09's synthetic sample is in {folder}",
              flush=True)
    return folder
