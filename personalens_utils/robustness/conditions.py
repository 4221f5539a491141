"""What a condition of the sensitivity grid is, and the caption words every robustness table shares.

A condition is one way of measuring: a user agent (its model and its style) and a judge. The grid
scores the same assistants on the same scenarios under each, so a table can ask whether a conclusion
drawn under one condition holds under the others.
"""

from __future__ import annotations

import pandas as pd

from personalens_utils.measures.design import PERCENT_DIMENSIONS
from personalens_utils.measures.display import CLUSTER, provenance_note
from personalens_utils.measures.scores import backends, provenance
from personalens_utils.prompt_templates.user_styles import COOPERATIVE
from personalens_utils.runstore.identity import USER_STYLE
from personalens_utils.runstore.records import OFFLINE

USER_MODEL, JUDGE_MODEL, ASSISTANT = "user_model", "judge_model", "assistant_model"
CONDITION = (USER_MODEL, USER_STYLE, JUDGE_MODEL)
"""The columns that name a condition: who played the user, how, and who judged."""
LABEL = "condition"
SCENARIO = "scenario_id"


def with_conditions(tidy: pd.DataFrame) -> pd.DataFrame:
    """`tidy` with its user style (cooperative where the frame has none: a run made before styles
    existed used the paper's user agent) and a readable `condition` label on every row."""
    absent = [c for c in (USER_MODEL, JUDGE_MODEL, ASSISTANT, CLUSTER, SCENARIO, "dimension", "score")
              if c not in tidy.columns]
    if absent:
        raise ValueError(f"the score frame has no column(s) {absent}; load it with "
                         "measures.scores.load_scores")
    given = USER_STYLE in tidy.columns
    styles = tidy[USER_STYLE].astype(object).fillna(COOPERATIVE) if given else COOPERATIVE
    frame = tidy.assign(**{USER_STYLE: styles})
    frame[LABEL] = condition_label(frame)
    frame.attrs = dict(tidy.attrs)
    return frame


def condition_label(frame: pd.DataFrame) -> pd.Series:
    """ "user model (style) / judge", short enough for a table row and a figure's axis."""
    return (frame[USER_MODEL].astype(str) + " (" + frame[USER_STYLE].astype(str) + ") / "
            + frame[JUDGE_MODEL].astype(str))


def conditions_in(frame: pd.DataFrame) -> list[str]:
    """The frame's condition labels, sorted by user model, style (cooperative first) and judge."""
    keys = frame[[*CONDITION, LABEL]].drop_duplicates()
    keys = keys.assign(_first=keys[USER_STYLE] != COOPERATIVE)
    return keys.sort_values([USER_MODEL, "_first", USER_STYLE, JUDGE_MODEL])[LABEL].tolist()


def scenario_scores(frame: pd.DataFrame, dimension: str) -> pd.DataFrame:
    """One score per condition, assistant and scenario: the mean over its simulation and judge samples
    (missing judgments left out), task completion in percent like the tables."""
    part = frame[(frame["dimension"] == dimension) & frame["score"].notna()]
    if part.empty:
        raise ValueError(f"no valid {dimension!r} scores in the frame")
    keys = [LABEL, ASSISTANT, CLUSTER, SCENARIO]
    means = part.groupby(keys, sort=True, observed=True)["score"].mean().reset_index()
    if dimension in PERCENT_DIMENSIONS:
        means["score"] *= 100.0
    return means


def roles_note(frame: pd.DataFrame) -> str:
    """Caption sentences naming the user agents and judges behind a table, and, when the offline
    backend played them, that its styles only demonstrate the pipeline; then the provenance."""
    agents = "; ".join(f"{model} ({', '.join(sorted(group[USER_STYLE].unique()))})"
                       for model, group in frame.groupby(USER_MODEL, sort=True, observed=True))
    judges = ", ".join(sorted(map(str, frame[JUDGE_MODEL].unique())))
    note = f" User agents (model and styles): {agents}; judges: {judges}."
    if OFFLINE in backends(frame):
        note += (" The offline user agent plays each style by rules, so what the styles change here is a "
                 "demonstration of the analysis, not a finding about a model.")
    return note + provenance_note(provenance(frame))

