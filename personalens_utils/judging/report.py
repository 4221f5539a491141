"""How often the judge gave no valid score (`missing_rate`), and how many answers the strict and the
official scoring rule read differently; a run's own report is the engine's `StageReport`, with the
judging details (judge model, dialogues skipped) in its `details`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from personalens_utils.judging.dimensions import ALL_DIMENSIONS, DIMENSIONS, judge_model_key
from personalens_utils.judging.scoring import OFFICIAL, STRICT, score_under
from personalens_utils.runstore.identity import PROMPT_SET, STORED_COLUMNS
from personalens_utils.runstore.records import Judgment
from personalens_utils.runstore.store import RunStore


def read_differently(group: pd.DataFrame) -> tuple[int, int]:
    """(answers without a score under the official rule, answers the two rules read differently:
    another score, or a score under one rule and none under the other). Errors are not answers."""
    official_missing = differ = 0
    for rec in group[group["status"] != "error"].itertuples(index=False):
        args = (rec.dimension, rec.status, rec.score, rec.raw)
        strict, official = score_under(STRICT, *args), score_under(OFFICIAL, *args)
        official_missing += official is None
        differ += strict != official
    return official_missing, differ


def missing_rate(store: RunStore | pd.DataFrame, judge_model: str | None = None) -> pd.DataFrame:
    """Per judge model, backend, prompt set and dimension: judgments ok / missing / error, the missing
    rate (one judge on two backends, e.g. offline and a real one, or with the kit's and the official
    prompts, gets a row for each, never a pooled rate).

    The rate is missing / (ok + missing): errors are infrastructure failures, judged again on the
    next run, not answers. For turn-level personalization the turn columns count assistant turns.
    `official_missing` counts answers the official rule finds no score in (for task completion it
    counts them as failures instead, so it is always 0 there) and `read_differently` the answers the
    two rules score differently (`judging.scoring`); both need the records' `raw` answers.
    """
    frame = store.frame(Judgment) if isinstance(store, RunStore) else store
    columns = ["judge_model", "dimension", "backend", PROMPT_SET, "ok", "missing", "error", "missing_rate",
               "official_missing", "read_differently", "turns", "turns_missing", "turn_missing_rate"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    if judge_model is not None:
        frame = frame[frame["judge_model"] == judge_model_key(judge_model)]
    frame = frame.copy()
    STORED_COLUMNS.fill(frame)
    rows = []
    for (model, backend, prompts, dimension), group in frame.groupby(
            ["judge_model", "backend", PROMPT_SET, "dimension"], sort=False):
        counts = group["status"].value_counts()
        ok, missing, error = (int(counts.get(s, 0)) for s in ("ok", "missing", "error"))
        answered = ok + missing
        official_missing, differ = read_differently(group)
        row: dict[str, Any] = {
            "judge_model": model, "dimension": dimension, "backend": backend, PROMPT_SET: prompts,
            "ok": ok, "missing": missing, "error": error,
            "missing_rate": missing / answered if answered else float("nan"),
            "official_missing": official_missing, "read_differently": differ,
            "turns": pd.NA, "turns_missing": pd.NA, "turn_missing_rate": float("nan"),
        }
        if DIMENSIONS.get(dimension) is not None and DIMENSIONS[dimension].turn_level:
            answered_turns = group.loc[group["status"] != "error", "turn_scores"]
            turn_lists = [t for t in answered_turns if isinstance(t, list)]
            turns = sum(len(t) for t in turn_lists)
            turns_missing = sum(s is None for t in turn_lists for s in t)
            row.update(turns=turns, turns_missing=turns_missing,
                       turn_missing_rate=turns_missing / turns if turns else float("nan"))
        rows.append(row)
    out = pd.DataFrame(rows, columns=columns)
    out["_order"] = out["dimension"].map({name: i for i, name in enumerate(ALL_DIMENSIONS)})
    return (out.sort_values(["judge_model", "backend", PROMPT_SET, "_order"]).drop(columns="_order")
            .reset_index(drop=True))
