"""How often the judge gave no valid score (`missing_rate`), and how many answers the strict and the
official scoring rule read differently; a run's own report is the engine's `StageReport`, with the
judging details (judge model, dialogues skipped) in its `details`."""

from __future__ import annotations

import os

import pandas as pd

from personalens_utils.judging.dimensions import ALL_DIMENSIONS, DIMENSIONS, judge_model_key
from personalens_utils.runstore.columnar import Columnar
from personalens_utils.runstore.identity import KIT_PROMPTS, PROMPT_SET
from personalens_utils.runstore.store import RunStore

COUNTS = f"""
SELECT judge_model, backend, coalesce({PROMPT_SET}, ?) AS {PROMPT_SET}, dimension,
       count(*) FILTER (WHERE status = 'ok') AS ok,
       count(*) FILTER (WHERE status = 'missing') AS missing,
       count(*) FILTER (WHERE status = 'error') AS error,
       count(*) FILTER (WHERE status <> 'error' AND official_score IS NULL) AS official_missing,
       count(*) FILTER (WHERE status <> 'error'
                        AND (CASE WHEN status = 'ok' AND NOT isnan(score) THEN score END)
                        IS DISTINCT FROM official_score) AS read_differently,
       coalesce(sum(len(turn_scores)) FILTER (WHERE status <> 'error'), 0) AS turns,
       coalesce(sum(len(list_filter(turn_scores, lambda s: s IS NULL))) FILTER (WHERE status <> 'error'), 0)
           AS turns_missing
FROM judgments
WHERE judge_model IS NOT NULL AND backend IS NOT NULL AND dimension IS NOT NULL AND (? OR judge_model = ?)
GROUP BY ALL
"""
"""Per judge model, backend, prompt set and dimension, over the current record of each judgment. The
strict reading is the stored score of an "ok" judgment; the official one is the copy's `official_score`
(`runstore.official_reading.official_column`), so no answer text is read."""
COLUMNS = ["judge_model", "dimension", "backend", PROMPT_SET, "ok", "missing", "error", "missing_rate",
           "official_missing", "read_differently", "turns", "turns_missing", "turn_missing_rate"]


def missing_rate(store: RunStore | str | os.PathLike[str], judge_model: str | None = None) -> pd.DataFrame:
    """Per judge model, backend, prompt set and dimension: judgments ok / missing / error, the missing
    rate (one judge on two backends, e.g. offline and a real one, or with the kit's and the official
    prompts, gets a row for each, never a pooled rate).

    The rate is missing / (ok + missing): errors are infrastructure failures, judged again on the
    next run, not answers. For turn-level personalization the turn columns count assistant turns.
    `official_missing` counts answers the official rule finds no score in (for task completion it
    counts them as failures instead, so it is always 0 there) and `read_differently` the answers the
    two rules score differently (`judging.scoring`). Read from the store's columnar copy.
    """
    key = None if judge_model is None else judge_model_key(judge_model)
    with Columnar(store) as source:
        counts = source.sql(COUNTS, [KIT_PROMPTS, key is None, key])
    if counts.empty:
        return pd.DataFrame(columns=COLUMNS)
    answered = counts["ok"] + counts["missing"]
    counts["missing_rate"] = (counts["missing"] / answered).where(answered > 0, float("nan"))
    turn_level = counts["dimension"].map(lambda d: DIMENSIONS.get(d) is not None and DIMENSIONS[d].turn_level)
    turns = counts["turns"]
    counts["turn_missing_rate"] = (counts["turns_missing"] / turns).where(turn_level & (turns > 0))
    for column in ("turns", "turns_missing"):  # turn-level dimensions only, as the tables print them
        counted = zip(counts[column], turn_level, strict=True)
        counts[column] = pd.Series([int(n) if level else pd.NA for n, level in counted], dtype=object)
    for column in ("ok", "missing", "error", "official_missing", "read_differently"):
        counts[column] = counts[column].astype(int)
    counts["_order"] = counts["dimension"].map({name: i for i, name in enumerate(ALL_DIMENSIONS)})
    return (counts.sort_values(["judge_model", "backend", PROMPT_SET, "_order"])[COLUMNS]
            .reset_index(drop=True))
