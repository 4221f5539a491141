"""Dialogue statistics (the paper's Table 13): dialogues, turns per dialogue, tokens per turn.

A turn is one user message with the assistant's reply. Dialogues that ended in an error are left
out: they are incomplete and would shorten the averages. Tokens are what the models generated as
booked in each record's usage; records without usage (imported from files) are counted with the
offline backend's word-based estimate, and the caption says which was used. The table describes
one run: dialogues of one assistant model made on different backends or model ids are never pooled.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from personalens_utils.assistants.python import row_label
from personalens_utils.base.stored import BackendName
from personalens_utils.llm.offline import count_tokens
from personalens_utils.measures import scores
from personalens_utils.measures.display import provenance_note
from personalens_utils.measures.scores import Stores, check_one_identity, fill_identity
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.runstore.columnar import Columnar
from personalens_utils.runstore.identity import STORED_COLUMNS, STORED_KEYS
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import ERROR_STATUS, RunStore

GROUP = ("assistant_model", "assistant_setting", "task_type")
TASK_TYPES = ("SD", "MD")
ROWS = {"n_dialogues": "# Dialogues", "avg_turns": "Avg. turns per dialogue",
        "avg_tokens_per_turn": "Avg. tokens per turn"}


TOKEN_COLUMNS = ("output_tokens", "estimated_tokens")
"""A store's dialogue frame counts each dialogue's tokens (`columnar` derives them when it copies a line):
booked output tokens (null without usage) and the word-based estimate of its turns' text."""


FEW = (*GROUP, "task_id", *STORED_KEYS[:2], "backend", "user_backend", "user_model", "user_model_id",
       "assistant_backend", "assistant_model_id", "status")
"""The store frame's text columns that hold a handful of values (`scores.fetch`)."""


def _is_stores(source: Any) -> bool:
    if isinstance(source, RunStore | str | os.PathLike | Columnar):
        return True
    return isinstance(source, list | tuple) and bool(source) and all(
        isinstance(s, RunStore | str | os.PathLike) for s in source)


def _domain_lists(values: pd.Series) -> pd.Series:
    return pd.Series([d.tolist() if isinstance(d, np.ndarray) else d for d in values], index=values.index,
                     dtype=object)


def dialogues_frame(source: Stores | pd.DataFrame | Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Dialogues as a DataFrame, from a run store (its folder, or several shards' stores read together),
    a frame or records.

    A store's dialogues come from its columnar copy: one row per dialogue, sorted by id (not in
    completion order), with the summary fields and their token counts (`TOKEN_COLUMNS`) but not their
    texts; the frame remembers the store's folder name for the table's source. The variant's columns
    (`identity.STORED_COLUMNS`) say whose prompts made each and which sample it is (records that store
    none: the kit's, sample 0). Records (or a frame of them) keep their fields as they are.
    """
    if isinstance(source, pd.DataFrame):
        return source
    if _is_stores(source):
        names = [*Dialogue.summary_fields, *TOKEN_COLUMNS]
        with scores.reading(source) as store:
            frame = scores.fetch(store, [(name, name) for name in names], Dialogue.table, few=FEW,
                                 convert={"domains": _domain_lists})
        STORED_COLUMNS.fill(frame)
        frame.attrs["origin"] = f"run store {store.name}/"
        return frame
    return pd.DataFrame.from_records(list(source))


def _token_counts(done: pd.DataFrame) -> pd.DataFrame:
    """`TOKEN_COLUMNS` of finished dialogues: as a store's frame has them, or counted from the records'
    `usage` and `turns`."""
    if all(c in done.columns for c in TOKEN_COLUMNS):
        return done[list(TOKEN_COLUMNS)]
    booked = [u.get("output_tokens") if isinstance(u, dict) else None for u in done["usage"]]
    estimated = [sum(count_tokens(t["content"]) for t in turns) for turns in done["turns"]]
    return pd.DataFrame({"output_tokens": pd.array(booked, dtype="Int64"), "estimated_tokens": estimated},
                        index=done.index)


def dialogue_stats(source: Any, *, tokens: str = "auto") -> tuple[pd.DataFrame, str]:
    """Per (assistant model, setting, task type): dialogues, mean turns, mean tokens per turn.

    `tokens` is "usage" (booked output tokens), "estimate" (word-based count of the turns' text)
    or "auto" (usage if every counted record has it, else the estimate). Returns the table and the
    token method used.
    """
    if tokens not in ("auto", "usage", "estimate"):
        raise ValueError(f"tokens must be 'auto', 'usage' or 'estimate', got {tokens!r}")
    frame = dialogues_frame(source)
    columns = [*GROUP, "n_dialogues", "avg_turns", "avg_tokens_per_turn"]
    if frame.empty:
        return pd.DataFrame(columns=columns), tokens
    counts = TOKEN_COLUMNS if all(c in frame.columns for c in TOKEN_COLUMNS) else ("turns", "usage")
    missing = [c for c in (*GROUP, "status", "n_turns", *counts) if c not in frame.columns]
    if missing:
        raise ValueError(f"dialogue records lack the field(s) {missing} (see docs/architecture.md)")
    done = frame[frame["status"] != ERROR_STATUS]
    counted = _token_counts(done)
    booked = counted["output_tokens"]
    if tokens == "auto":
        tokens = "usage" if bool(booked.gt(0).fillna(False).all()) else "estimate"
    if done.empty:
        return pd.DataFrame(columns=columns), tokens
    if tokens == "usage" and bool(booked.isna().any()):
        raise ValueError(f"{int(booked.isna().sum())} finished dialogue(s) have no booked usage; count their "
                         "tokens with tokens='estimate'")
    chosen = booked if tokens == "usage" else counted["estimated_tokens"]
    done = done.assign(tokens=chosen.to_numpy(dtype="int64"))
    grouped = done.groupby(list(GROUP), sort=True)
    table = grouped.agg(n_dialogues=("id", "size"), turns=("n_turns", "sum"), tokens=("tokens", "sum"))
    table["avg_turns"] = table["turns"] / table["n_dialogues"]
    table["avg_tokens_per_turn"] = table["tokens"] / table["turns"].where(table["turns"] > 0)
    return table.reset_index()[columns], tokens


def _identity(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with each role's backend and model id (records from before run identity filled in)."""
    frame = frame.copy()
    for column in ("user_backend", "user_model_id", "assistant_backend", "assistant_model_id"):
        if column not in frame.columns:
            frame[column] = None
    fill_identity(frame, "backend", [("user_model", "user_backend", "user_model_id"),
                                     ("assistant_model", "assistant_backend", "assistant_model_id")])
    return frame


def table13(source: Any, *, assistant_model: str | None = None, assistant_setting: str | None = None,
            assistant_backend: BackendName | None = None, tokens: str = "auto",
            task_types: Sequence[str] = TASK_TYPES) -> TableResult:
    """Table 13: one row per task type (dialogues, avg. turns per dialogue, avg. tokens per turn).

    With several assistant models, settings or backends in the store, name the one to report.
    """
    frame = dialogues_frame(source)
    origin = frame.attrs.get("origin", "dialogue records")
    if not frame.empty:
        frame = _identity(frame)
    for column, wanted in (("assistant_model", assistant_model), ("assistant_setting", assistant_setting),
                           ("assistant_backend", assistant_backend)):
        if wanted is not None and not frame.empty:
            frame = frame[frame[column] == wanted]
    stats, method = dialogue_stats(frame, tokens=tokens)
    for column in ("assistant_model", "assistant_setting"):
        present = sorted(stats[column].unique())
        if len(present) > 1:
            raise ValueError(f"the dialogues cover several values of {column} ({present}); pass "
                             f"{column}=... to choose the one Table 13 reports")
    if stats.empty:
        raise ValueError("no finished dialogues to describe (all errored, or none match the filters)")
    counted = frame[frame["status"] != ERROR_STATUS]
    check_one_identity(counted, [], "Table 13 (pass assistant_backend=... to choose one)")
    model, setting = row_label(stats["assistant_model"].iloc[0]), stats["assistant_setting"].iloc[0]
    shaped = stats.set_index("task_type").reindex(list(task_types)).reset_index()
    out = shaped[["task_type", *ROWS]].rename(columns={"task_type": "Task type", **ROWS})
    out[ROWS["n_dialogues"]] = out[ROWS["n_dialogues"]].fillna(0).astype(int)
    how = "booked output tokens" if method == "usage" else "estimated tokens (words x 4/3)"
    caption = (f"Dialogue statistics (Table 13): assistant {model}, setting {setting}; a turn is a user "
               f"message and the assistant's reply; tokens per turn from {how}.")
    used = {*counted["user_backend"].unique(), *counted["assistant_backend"].unique()}
    caption += provenance_note(scores.provenance(counted))
    source = Source.of(origin, len(counted), "finished dialogues", used,
                       [*counted["assistant_model_id"].unique(), *counted["user_model_id"].unique()])
    return TableResult(out, caption, source)
