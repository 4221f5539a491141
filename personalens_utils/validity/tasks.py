"""Tasks that measure personalization (docs/validity.md, "Task audit"): does knowing the user change the
result of a task at all?

For each task (or domain), the gap in personalization (P) and task completion (TCR, in percentage
points) between an assistant that sees everything of the user (`full`) and one that sees nothing
(`blind`), on the scenarios both ran: the mean per-scenario difference, with an interval that
resamples users (`measures.bootstrap.paired_difference`). Offline, the reference assistants are the two
arms (the best against the worst of `assistants.reference_assistants.DESIGNED_ORDER`); on a real run, one
assistant under the ablation's settings (e.g. "base+all" against "base", `simulation.settings`).

A task is flagged when it does not tell the two apart: the interval of every gap in `FLAG_ON` includes
0 (no measured gap on P nor on TCR), or the blind assistant already reaches the top of the P scale in
most of its dialogues (more than `TOP_SHARE`). A gap resting on fewer than `MIN_CLUSTERS` users has no
interval (`measures.stats`), so it cannot show "no gap": such a task is not flagged for it, and its row
says the gap was not judged. Table 3 is then shown on the unflagged tasks beside all
tasks (`table3_on_measuring_tasks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from personalens_utils.analysis.tables import LeftOut, table3_beside
from personalens_utils.assistants.reference_assistants import DESIGNED_ORDER
from personalens_utils.base.errors import KitError
from personalens_utils.measures.bootstrap import method_note, paired_difference
from personalens_utils.measures.design import design_frame
from personalens_utils.measures.display import MAIN_SETTING, fmt_ci, provenance_note, score_source
from personalens_utils.measures.scores import (
    PERSONALIZATION,
    SCALES,
    TASK_COMPLETION,
    backends,
    explode_domains,
    per_scenario,
)
from personalens_utils.measures.stats import DEFAULT_RESAMPLES, FEW_CLUSTERS, MIN_CLUSTERS, Interval
from personalens_utils.outputs.tables import TableResult
from personalens_utils.simulation.settings import AssistantSetting, SettingError

FLAG_ON = (PERSONALIZATION, TASK_COMPLETION)
"""The gaps a task must show (an interval above or below 0) on at least one of, not to be flagged."""
TOP_SHARE = 0.5
"""A task is flagged when the blind assistant's P is at the top of the scale in more than this share."""
UNITS = {"task_id": "Task", "domain": "Domain"}
ARM = "arm"


class TaskAuditError(KitError, ValueError):
    """A task audit that cannot be made from the scores given: an arm without dialogues, an unknown unit."""


@dataclass(frozen=True)
class Arm:
    """One side of the gap: an assistant model in one setting."""

    assistant_model: str
    setting: str = MAIN_SETTING

    @property
    def label(self) -> str:
        return f"{self.assistant_model} ({self.setting})"

    @classmethod
    def parse(cls, text: str | None, default: Arm, what: str = "arm") -> Arm:
        """A notebook parameter "model" or "model:setting" (the last colon splits, so a spec's own colon
        stays in the model); None: `default`."""
        if text is None:
            return default
        if not str(text).strip():
            raise TaskAuditError(f"parameter {what}: empty; give \"model\" or \"model:setting\"")
        model, sep, setting = str(text).rpartition(":")
        try:
            return cls(model, AssistantSetting.parse(setting).name) if sep and model else cls(str(text))
        except SettingError:
            return cls(str(text))


OFFLINE_BLIND = Arm(DESIGNED_ORDER[0])
"""The offline assistant that uses nothing of the user, not even what the user says."""
OFFLINE_FULL = Arm(DESIGNED_ORDER[-1])
"""The offline assistant that knows every relevant preference and the situation."""


def _arm_rows(tidy: pd.DataFrame, arm: Arm) -> pd.Series:
    return ((tidy["assistant_model"] == arm.assistant_model) & (tidy["assistant_setting"] == arm.setting)
            & tidy["dimension"].isin(FLAG_ON))


def _absent(tidy: pd.DataFrame, arm: Arm) -> str:
    return (f"no judged dialogues of {arm.label} in the scores; they hold "
            f"{sorted(set(tidy['assistant_model']))} under settings {sorted(set(tidy['assistant_setting']))}")


def _arms(tidy: pd.DataFrame, blind: Arm, full: Arm) -> pd.DataFrame:
    """The rows of the two arms on the gap's dimensions, labelled with their arm."""
    frames = []
    for arm in (blind, full):
        keep = _arm_rows(tidy, arm)
        if not keep.any():
            raise TaskAuditError(_absent(tidy, arm))
        frames.append(tidy.loc[keep].assign(**{ARM: arm.label}))
    return pd.concat(frames, ignore_index=True)


def task_audit_unavailable(tidy: pd.DataFrame, blind: Arm = OFFLINE_BLIND,
                           full: Arm = OFFLINE_FULL) -> str | None:
    """Why the task audit cannot be made from `tidy` (an arm was never simulated and judged, as on a store
    notebooks 03 and 04 made on their defaults), saying what would make it; None when it can."""
    absent = [_absent(tidy, arm) for arm in (blind, full) if not _arm_rows(tidy, arm).any()]
    if not absent:
        return None
    return (f"Tables V4 and V5 compare a blind assistant ({blind.label}) with a full-context one "
            f"({full.label}) on the same tasks, and this store cannot: {'; '.join(absent)}. Simulate and "
            "judge both (notebooks 03 and 04 with them in `assistant_models`, or `make reproduce`), or name "
            "the store's own arms in `blind_assistant` and `full_assistant`.")


def _top_share(group: pd.DataFrame, blind: Arm) -> float:
    """Share of the blind arm's scenarios whose P (averaged over samples) is the top of the scale."""
    mine = group[(group[ARM] == blind.label) & (group["dimension"] == PERSONALIZATION)]
    scores = per_scenario(mine)["score"].dropna()
    return float((scores >= SCALES[PERSONALIZATION].high).mean()) if len(scores) else float("nan")


def task_gaps(tidy: pd.DataFrame, blind: Arm = OFFLINE_BLIND, full: Arm = OFFLINE_FULL, *,
              by: str = "task_id", confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES,
              seed: int = 0) -> pd.DataFrame:
    """One row per task (`by="task_id"`) or domain (`by="domain"`: a multi-domain task counts toward each
    of its domains): each gap's estimate and interval (full minus blind, P in levels, TCR in percentage
    points), the scenarios paired, the blind arm's share at the top of the P scale, and the flag."""
    if by not in UNITS:
        raise TaskAuditError(f"by must be one of {list(UNITS)}, got {by!r}")
    both = _arms(tidy, blind, full)
    if by == "domain":
        both = explode_domains(both)
    rows = []
    for unit, group in both.groupby(by, sort=True):
        row: dict[str, Any] = {by: unit, "task_types": "/".join(sorted(set(group["task_type"]))),
                               "users": int(group["user_id"].nunique())}
        measured: list[bool | None] = []
        for dimension in FLAG_ON:
            scored = group[(group["dimension"] == dimension) & group["score"].notna()]
            if scored[ARM].nunique() < 2:
                gap = None
            else:
                design = design_frame(scored, dimension, arm=ARM)
                gap = paired_difference(design, full.label, blind.label, confidence=confidence,
                                        n_resamples=n_resamples, seed=seed).difference
            if gap is not None and gap.n > 0:
                estimate, low, high, pairs = gap.estimate, gap.low, gap.high, gap.n
            else:
                estimate, low, high, pairs = np.nan, np.nan, np.nan, 0
            row.update({f"{dimension}_gap": estimate, f"{dimension}_low": low, f"{dimension}_high": high,
                        f"{dimension}_pairs": pairs})
            if pairs and gap is not None:
                measured.append(_includes_zero(gap))
        row["blind_top"] = _top_share(group, blind)
        unjudged = any(m is None for m in measured)
        no_gap = not unjudged and len(measured) == len(FLAG_ON) and all(measured)
        at_top = bool(row["blind_top"] > TOP_SHARE)
        row["flagged"] = no_gap or at_top
        row["why"] = ", ".join([*(["no gap"] if no_gap else []), *(["blind at top"] if at_top else []),
                                *([f"gap not judged: {FEW_CLUSTERS}"] if unjudged and not at_top else [])])
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs.update({"by": by, "arms": (blind, full), "confidence": confidence, "n_resamples": n_resamples,
                      "backends": backends(both), "origin": tidy.attrs.get("origin")})
    return out


def _includes_zero(gap: Interval) -> bool | None:
    """Whether a gap's interval includes 0; None where too few users stand behind it to say. Where every
    resample agrees the interval is that one value, so it includes 0 only when the gap is exactly 0."""
    if gap.withheld == FEW_CLUSTERS:
        return None
    if gap.withheld:
        return bool(gap.estimate == 0)
    return bool(gap.low <= 0 <= gap.high)


def flagged_units(gaps: pd.DataFrame) -> list[str]:
    """The tasks (or domains) the audit flagged, sorted."""
    return sorted(gaps.loc[gaps["flagged"], gaps.attrs["by"]].astype(str))


def task_audit_table(gaps: pd.DataFrame, tidy: pd.DataFrame) -> TableResult:
    """The audit as a table: per task (or domain), both gaps with their intervals, the blind assistant's
    share at the top of the P scale, and whether the task is flagged."""
    by = gaps.attrs["by"]
    blind, full = gaps.attrs["arms"]
    rows = [{UNITS[by]: getattr(r, by), "Type": r.task_types, "Users": r.users,
             "ΔP": fmt_ci(r.personalization_gap, r.personalization_low, r.personalization_high),
             "ΔTCR": fmt_ci(r.task_completion_gap, r.task_completion_low, r.task_completion_high, 1),
             "Blind P=4 (%)": 100.0 * r.blind_top, "Flagged": r.why or "no"}
            for r in gaps.itertuples(index=False)]
    unit = "task" if by == "task_id" else "domain"
    flagged = len(flagged_units(gaps))
    intervals = method_note(gaps.attrs["confidence"], gaps.attrs["n_resamples"])
    caption = (f"Task audit: per {unit}, the gap between an assistant that sees everything of the user "
               f"({full.label}) and one that sees nothing ({blind.label}) in personalization (ΔP, levels) "
               f"and task completion (ΔTCR, percentage points), on the scenarios both ran; {intervals}. "
               f"A {unit} is flagged when no gap's interval excludes 0 (no gap) or the blind assistant's P "
               f"is 4 in more than {TOP_SHARE:.0%} of its dialogues (blind at top): it does not measure "
               f"personalization. A gap resting on fewer than {MIN_CLUSTERS} users is not judged (the "
               f"{unit} is not flagged for it). {flagged} of {len(gaps)} flagged.")
    caption += provenance_note(gaps.attrs["backends"])
    return TableResult(pd.DataFrame(rows), caption, score_source(_arms(tidy, blind, full)), gaps, precision=0)


def table3_on_measuring_tasks(tidy: pd.DataFrame, gaps: pd.DataFrame, *, setting: str = MAIN_SETTING,
                              models: Sequence[str] | None = None, seed: int = 0) -> TableResult:
    """Table 3 on all tasks beside Table 3 on the tasks the audit did not flag (by domain: a dialogue is
    left out when any of its domains is flagged)."""
    by = gaps.attrs["by"]
    flagged = set(flagged_units(gaps))
    part = tidy if models is None else tidy[tidy["assistant_model"].isin(models)]
    if by == "task_id":
        out = part.loc[part["task_id"].isin(flagged), "dialogue_id"]
    else:
        out = part.loc[part["domains"].map(lambda ds: bool(set(ds) & flagged)), "dialogue_id"]
    unit = "tasks" if by == "task_id" else "domains"
    note = (f"Flagged {unit} ({', '.join(sorted(flagged)) or 'none'}) show no gap between an assistant "
            "that sees the user and one that does not (docs/validity.md, task audit).")
    without = f"on the {unit} the task audit did not flag, leaving out the dialogues of flagged {unit}"
    left_out = LeftOut(set(out), without, f"Unflagged {unit}", note)
    return table3_beside(part, left_out, setting=setting, seed=seed)
