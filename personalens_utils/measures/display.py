"""What every stage's tables say the same way: the dimensions' names, the main setting, the column the
intervals resample, the cells' formats, and the notes naming what made the numbers and where they came
from. One wording for all of them, so a caption of Table 3, of the trust checks and of the validity
tables reads alike."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import pandas as pd

from personalens_utils.assistants.python import PYTHON, row_label
from personalens_utils.assistants.reference_assistants import is_reference
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.measures.scores import (
    PERSONALIZATION,
    TASK_COMPLETION,
    TURN_PERSONALIZATION,
    Provenance,
    backends,
    has_samples,
    model_ids,
    samples_note,
)
from personalens_utils.outputs.tables import Source
from personalens_utils.runstore.identity import DIALOGUE_PROMPTS, JUDGE_PROMPTS
from personalens_utils.runstore.records import KIT_PROMPTS, OFFLINE

MAIN_SETTING = "base"
DIMENSION_NAMES = {
    TASK_COMPLETION: "Task Completion",
    PERSONALIZATION: "Personalization",
    "naturalness_user": "Naturalness (U)",
    "naturalness_assistant": "Naturalness (A)",
    "coherence_user": "Coherence (U)",
    "coherence_assistant": "Coherence (A)",
    TURN_PERSONALIZATION: "Personalization (turns)",
}
"""Each judge dimension as a reader names it (U: the user agent's turns, A: the assistant's)."""
CLUSTER = "user_id"
"""The column the tables' intervals resample: users, each with all their tasks and repeats."""
ASSISTANT_DIMENSIONS = (TASK_COMPLETION, PERSONALIZATION, "naturalness_assistant", "coherence_assistant")
USER_DIMENSIONS = ("naturalness_user", "coherence_user")
OFFLINE_JUDGE = (", so every score is the offline judge's, a demonstration of the pipeline, not a model's "
                 "judgment")
"""What an offline judge means for a caption whose other roles are not all offline."""
REAL_ASSISTANT = ("is a real model", "are real models")
REFERENCE_ASSISTANT = ("is an offline reference assistant", "are offline reference assistants")
OFFLINE_ASSISTANT = ("is offline", "are offline")
PYTHON_ASSISTANT = ("calls no model", "call no model")
ASSISTANT_KINDS = (REAL_ASSISTANT, REFERENCE_ASSISTANT, OFFLINE_ASSISTANT, PYTHON_ASSISTANT)
"""What a caption says of one or several assistants of each kind, in this order, where the offline
backend played only some roles."""


def provenance_note(made: Provenance | Collection[str]) -> str:
    """Caption suffix naming what made the numbers, the offline backend always spelled out. Where it
    played only some roles, a frame's `Provenance` says which, and which assistants are real models, so
    a real model's row is never called offline; a bare set of backends can only say "in part"."""
    names = sorted(made.backends if isinstance(made, Provenance) else set(made))
    if OFFLINE not in names:
        return f" Backend: {', '.join(names)}." if names else ""
    if isinstance(made, Provenance) and made.partly_offline:
        return f" Made in part with the {OFFLINE_LABEL}: {'; '.join(_role_clauses(made))}."
    others = [n for n in names if n not in (OFFLINE, PYTHON)]  # a Python assistant's code is no model
    if others:
        return f" Made in part with the {OFFLINE_LABEL}, in part with {', '.join(others)}."
    return f" Made with the {OFFLINE_LABEL}."


def _role_clauses(made: Provenance) -> list[str]:
    """What played each role, for a caption: the user agent and the judge by what they were (an offline
    judge makes every score a demonstration), then the assistants grouped by kind."""
    said: dict[str, list[str]] = {}
    for role, makers in made.roles.items():
        what = " and ".join(sorted({OFFLINE if b == OFFLINE else f"{b}:{m}" for b, m in makers}))
        said.setdefault(what, []).append(f"the {role}")
    clauses = [f"{_listed(roles)} {'are' if len(roles) > 1 else 'is'} {what}"
               + (OFFLINE_JUDGE if what == OFFLINE and "the judge" in roles else "")
               for what, roles in said.items()]
    kinds: dict[tuple[str, str], list[str]] = {kind: [] for kind in ASSISTANT_KINDS}
    for name, makers in sorted(made.assistants.items()):
        real = sorted(f"{b}:{m}" for b, m in makers if b not in (OFFLINE, PYTHON))
        kind = (REAL_ASSISTANT if real else REFERENCE_ASSISTANT if is_reference(name)
                else OFFLINE_ASSISTANT if any(b == OFFLINE for b, _ in makers) else PYTHON_ASSISTANT)
        named = f"{row_label(name)} ({', '.join(real)})" if real else row_label(name)
        kinds[kind].append(named)
    return clauses + [f"{_listed(names)} {kind[len(names) > 1]}" for kind, names in kinds.items() if names]


def _listed(names: Sequence[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def prompts_note(tidy: pd.DataFrame) -> str:
    """A note naming the prompt sets of the rows when some were made with the official prompts."""
    sets = {name: sorted(set(tidy[column].dropna().unique())) for name, column in
            (("simulation", DIALOGUE_PROMPTS), ("judge", JUDGE_PROMPTS)) if column in tidy.columns}
    if all(values in ([], [KIT_PROMPTS]) for values in sets.values()):
        return ""
    return " (prompts: " + "; ".join(f"{name} {', '.join(values)}" for name, values in sets.items()) + ")"


def score_source(tidy: pd.DataFrame) -> Source:
    """The source of a table computed from a tidy score frame: its store (and its prompt sets when not
    only the kit's), dialogues, and the backends and resolved model ids of every role."""
    return Source.of(
        tidy.attrs.get("origin", "a score frame") + prompts_note(tidy),
        tidy["dialogue_id"].nunique(),
        "judged dialogues",
        backends(tidy),
        model_ids(tidy),
    )


def fmt_ci(mean: float, low: float, high: float, digits: int = 2) -> str:
    """ "mean [low, high]"; the mean alone where the interval was withheld (NaN bounds, the caption
    says why: `stats.withheld_note`)."""
    if np.isnan(mean):
        return "n/a"
    if np.isnan(low) or np.isnan(high):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def missing_note(long: pd.DataFrame, tidy: pd.DataFrame | None = None) -> str:
    """Judgments without a score, left out; with repeats in `tidy`, how samples were combined
    (`scores.samples_note`: a scenario's samples are averaged first, so the count is of scenarios)."""
    missing = int(long["n_missing"].sum())
    if tidy is not None and has_samples(tidy):
        lost = f" {missing} scenario(s) had no valid score in any sample and are left out." if missing else ""
        return f"{lost} {samples_note(tidy)}"
    if not missing:
        return ""
    return f" {missing} judgments had no valid score and are left out (not counted as zero)."


def fmt_diff(diff: float, low: float, high: float, p: float) -> str:
    """A paired difference with its interval and p-value; a non-zero difference too small for two
    decimals gets three, so it never prints as a confusing "+0.00" beside a small p-value. A withheld
    interval (NaN bounds, `stats.withheld_note`) leaves the difference and its permutation p."""
    places = 3 if diff != 0 and abs(diff) < 0.005 else 2
    if pd.isna(low) or pd.isna(high):
        return f"{diff:+.{places}f}, {_fmt_p(p)}"
    return f"{diff:+.{places}f} [{low:+.{places}f}, {high:+.{places}f}], {_fmt_p(p)}"


def _fmt_p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"
