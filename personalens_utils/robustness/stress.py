"""R4: the stress gap, what each assistant loses when the user agent stops cooperating. An assistant
that relies on what the user volunteers should lose personalization under a reticent user; one that
reads the user's history should not."""

from __future__ import annotations

import pandas as pd

from personalens_utils.assistants.python import row_label
from personalens_utils.measures.bootstrap import method_note, paired_difference
from personalens_utils.measures.design import ARM, SCORE, TASK, USER
from personalens_utils.measures.display import CLUSTER, fmt_ci, score_source
from personalens_utils.measures.scores import SCALES, TASK_COMPLETION
from personalens_utils.measures.stats import DEFAULT_RESAMPLES, withheld_note
from personalens_utils.outputs.tables import TableResult
from personalens_utils.prompt_templates.user_styles import COOPERATIVE
from personalens_utils.robustness.condition_table import DIMENSIONS
from personalens_utils.robustness.conditions import (
    ASSISTANT,
    JUDGE_MODEL,
    SCENARIO,
    USER_MODEL,
    roles_note,
    with_conditions,
)
from personalens_utils.runstore.identity import USER_STYLE

PAIRED_WITHIN = (ASSISTANT, USER_MODEL, JUDGE_MODEL)
"""What a style is compared within: the same assistant, user model and judge."""


def stress_gaps(tidy: pd.DataFrame, baseline: str = COOPERATIVE, *, seed: int = 0,
                n_resamples: int = DEFAULT_RESAMPLES) -> pd.DataFrame:
    """Long: each style's mean score minus `baseline`'s, per assistant, user model, judge and dimension,
    on the scenarios both styles were run on (each scenario's samples averaged first), with its
    user-clustered interval and sign-flip p-value. TCR in percent points."""
    frame = with_conditions(tidy)
    if baseline not in set(frame[USER_STYLE]):
        raise ValueError(f"no dialogues with the {baseline!r} user style to compare with; the frame holds "
                         f"{sorted(frame[USER_STYLE].unique())}")
    rows = []
    for dimension in DIMENSIONS:
        part = frame[(frame["dimension"] == dimension) & frame["score"].notna()]
        factor = 100.0 if dimension == TASK_COMPLETION else 1.0
        for keys, group in part.groupby(list(PAIRED_WITHIN), sort=True, observed=True):
            design = pd.DataFrame({USER: group[CLUSTER].to_numpy(),
                                   TASK: group[SCENARIO].astype(str).to_numpy(),
                                   ARM: group[USER_STYLE].astype(str).to_numpy(),
                                   SCORE: group["score"].to_numpy(dtype=float) * factor})
            styles = set(design[ARM])
            for style in sorted(styles - {baseline}) if baseline in styles else []:
                found = paired_difference(design, style, baseline, n_resamples=n_resamples, seed=seed)
                rows.append({**dict(zip(PAIRED_WITHIN, keys, strict=True)), USER_STYLE: style,
                             "dimension": dimension, **found.difference.as_dict("gap_"),
                             "p_permutation": found.p_permutation, "withheld": found.difference.withheld})
    return pd.DataFrame(rows)


def stress_gap_table(tidy: pd.DataFrame, baseline: str = COOPERATIVE, *, seed: int = 0) -> TableResult:
    """R4: one row per assistant, user model, judge and style, its TCR and P gap to `baseline`."""
    long = stress_gaps(tidy, baseline, seed=seed)
    frame = with_conditions(tidy)
    rows: dict[tuple[str, ...], dict[str, str]] = {}
    for rec in long.to_dict("records"):
        key = (row_label(str(rec[ASSISTANT])), *(str(rec[c]) for c in (USER_MODEL, USER_STYLE, JUDGE_MODEL)))
        digits = 1 if rec["dimension"] == TASK_COMPLETION else 2
        rows.setdefault(key, {})[f"Δ {SCALES[rec['dimension']].short}"] = fmt_ci(
            rec["gap_mean"], rec["gap_ci_low"], rec["gap_ci_high"], digits)
    display = pd.DataFrame([{"Assistant": a, "User model": u, "Style": s, "Judge": j, **cells}
                            for (a, u, s, j), cells in rows.items()])
    caption = (
        f"Stress gap: each assistant's TCR (% points) and P under each user style minus under {baseline!r}, "
        "with the same user model and judge, paired by scenario (each scenario's repeats averaged first); "
        f"in brackets {method_note()}." + withheld_note(long["withheld"].tolist()) + roles_note(frame)
    )
    return TableResult(display, caption, score_source(frame), long.drop(columns="withheld"))
