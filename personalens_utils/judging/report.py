"""What a judging run did (`JudgingReport`) and how often the judge gave no valid score (`missing_rate`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from personalens_utils.store import RunStore

from .dimensions import ALL_DIMENSIONS, DIMENSIONS, Dimension, judge_model_key
from .plan import JUDGEABLE_STATUSES, JUDGMENTS


@dataclass
class JudgingReport:
    """What one judging run did, for the notebook to show."""

    judge_model: str
    prompt_version: str
    dimensions: list[str]
    dialogues_in_store: int
    dialogues_judgeable: int
    dialogues_skipped_error: int
    judgments_done_before: int
    judgments_written: int
    status_counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    pending_in_batches: int = 0
    shard: str | None = None
    left_by_budget: int = 0
    """Judgments not stored because `max_cost_usd` was reached; the next run makes them."""

    @classmethod
    def planned(
        cls,
        judge_model: str,
        prompt_version: str,
        dimensions: Sequence[Dimension],
        dialogues: Sequence[Mapping[str, Any]],
        judgeable: Sequence[Mapping[str, Any]],
        work: Sequence[tuple[Mapping[str, Any], Sequence[Dimension]]],
    ) -> JudgingReport:
        """The report of a run before any call: what the store holds and what is left to judge."""
        return cls(
            judge_model=judge_model, prompt_version=prompt_version, dimensions=[d.name for d in dimensions],
            dialogues_in_store=len(dialogues), dialogues_judgeable=len(judgeable),
            dialogues_skipped_error=sum(1 for d in dialogues if d.get("status") not in JUDGEABLE_STATUSES),
            judgments_done_before=len(judgeable) * len(dimensions) - sum(len(todo) for _, todo in work),
            judgments_written=0,
        )

    @property
    def status(self) -> str:
        return "budget reached" if self.left_by_budget else "complete"

    def count_written(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Add records just stored to the written count and the per-status counts."""
        for rec in records:
            self.judgments_written += 1
            self.status_counts[rec["status"]] = self.status_counts.get(rec["status"], 0) + 1

    def as_frame(self) -> pd.DataFrame:
        rows = {k: v for k, v in self.__dict__.items() if k not in ("dimensions", "status_counts")}
        rows["dimensions"] = ", ".join(self.dimensions)
        rows.update({f"written_{k}": v for k, v in sorted(self.status_counts.items())})
        return pd.DataFrame({"value": pd.Series(rows, dtype=object)})


def missing_rate(store: RunStore | pd.DataFrame, judge_model: str | None = None) -> pd.DataFrame:
    """Per judge model and dimension: the backend(s), judgments ok / missing / error, the missing rate.

    The rate is missing / (ok + missing): errors are infrastructure failures, judged again on the
    next run, not answers. For turn-level personalization the turn columns count assistant turns.
    """
    frame = store.frame(JUDGMENTS) if isinstance(store, RunStore) else store
    columns = ["judge_model", "dimension", "backend", "ok", "missing", "error", "missing_rate",
               "turns", "turns_missing", "turn_missing_rate"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    if judge_model is not None:
        frame = frame[frame["judge_model"] == judge_model_key(judge_model)]
    rows = []
    for (model, dimension), group in frame.groupby(["judge_model", "dimension"], sort=False):
        counts = group["status"].value_counts()
        ok, missing, error = (int(counts.get(s, 0)) for s in ("ok", "missing", "error"))
        answered = ok + missing
        row: dict[str, Any] = {
            "judge_model": model, "dimension": dimension, "backend": ", ".join(sorted(set(group["backend"]))),
            "ok": ok, "missing": missing, "error": error,
            "missing_rate": missing / answered if answered else float("nan"),
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
    return out.sort_values(["judge_model", "_order"]).drop(columns="_order").reset_index(drop=True)
