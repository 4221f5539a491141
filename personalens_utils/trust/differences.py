"""Every assistant difference with an interval that resamples users: the companion of Table 3.

Table 3 gives each assistant's mean; a reader compares them by eye, and overlapping intervals of two
means say little about their difference when both assistants met the same users (the users' share
cancels in the difference). This table compares each pair on the scenarios both hold, per task type
and metric (`bootstrap.pairwise_differences`), with Holm-adjusted p-values over the whole table.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from personalens_utils.assistants.python import row_label
from personalens_utils.measures.bootstrap import method_note, pairwise_differences
from personalens_utils.measures.design import DesignError, design_frame
from personalens_utils.measures.display import MAIN_SETTING, fmt_diff, provenance_note, score_source
from personalens_utils.measures.scores import PERSONALIZATION, SCALES, TASK_COMPLETION, backends, run_label
from personalens_utils.measures.stats import holm_adjust, withheld_note
from personalens_utils.outputs.tables import TableResult


def differences_table(tidy: pd.DataFrame, dimensions: Sequence[str] = (TASK_COMPLETION, PERSONALIZATION), *,
                      setting: str = MAIN_SETTING, models: Sequence[str] | None = None,
                      seed: int = 0, against: str | None = None) -> TableResult:
    """Each later assistant model (in `models` order, default sorted) minus each earlier one under
    `setting`, per task type and metric: mean paired difference, cluster interval, Holm-adjusted p.
    With `against`, only that assistant's differences (listed last in `models`: it minus each other one),
    Holm-adjusted over those alone."""
    part = tidy[tidy["assistant_setting"] == setting]
    if part.empty:
        raise DesignError(f"no judged dialogues under setting {setting!r}")
    part = part.assign(assistant_model=run_label(part, "assistant_model"))
    rows, withheld = [], []
    for task_type in sorted(part["task_type"].unique()):
        of_type = part[part["task_type"] == task_type]
        for dimension in dimensions:
            if not of_type.loc[of_type["dimension"] == dimension, "score"].notna().any():
                continue
            design = design_frame(of_type, dimension, arm="assistant_model")
            held = set(design["assistant"])
            arms = [m for m in (models or sorted(held)) if m in held]
            pairs = pairwise_differences(design, arms, seed=seed)
            withheld += pairs.attrs["withheld"]
            rows.append(pairs.assign(task_type=task_type, dimension=dimension))
    if not rows:
        raise DesignError(f"no valid {list(dimensions)} scores under setting {setting!r}")
    data = pd.concat(rows, ignore_index=True)
    if against is not None:
        data = data[data["treatment"] == against].reset_index(drop=True)
        if data.empty:
            raise DesignError(f"no scenario under setting {setting!r} holds {against!r} and another "
                              "assistant")
    data["p_holm"] = holm_adjust(data["p_permutation"].tolist())
    display = pd.DataFrame({
        "Difference": [f"{row_label(t)} − {row_label(c)}" for t, c in zip(data["treatment"], data["control"],
                                                                           strict=True)],
        "Tasks": data["task_type"],
        "Metric": [SCALES[d].short for d in data["dimension"]],
        "Δ [95% CI], p (Holm)": [fmt_diff(r.difference, r.ci_low, r.ci_high, r.p_holm)
                                 for r in data.itertuples(index=False)],
        "Scenarios": data["n_scenarios"],
    })
    caption = (
        f"Differences between assistant models under the {setting!r} setting on the scenarios both hold "
        "(each averaged over its repeats; TCR in percentage points, other metrics in scale points), with "
        f"{method_note()}; p: two-sided permutation test flipping each user's sign, Holm-adjusted over the "
        "table (unadjusted in the CSV)." + withheld_note(withheld) + provenance_note(backends(part))
    )
    return TableResult(display, caption, score_source(part), data)
