"""The analysis loaders as they read a run store before the columnar copy (every line through
`RunStore.iter_lines`, kept in Python): the reference the columnar loaders are compared with."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from personalens_utils.judging import (
    JUDGEABLE_STATUSES,
    OFFICIAL,
    STRICT,
    check_scoring,
    judge_model_key,
    score_under,
)
from personalens_utils.measures.scores import (
    IDENTITY,
    TURN_PERSONALIZATION,
    ScoresError,
    describe_identity,
    fill_identity,
)
from personalens_utils.prompt_templates.user_styles import COOPERATIVE
from personalens_utils.runstore.identity import (
    DIALOGUE_COLUMNS,
    DIALOGUE_PROMPTS,
    JUDGE_COLUMNS,
    JUDGE_PROMPTS,
    STORED_COLUMNS,
    USER_STYLE,
    VariantColumns,
)
from personalens_utils.runstore.records import Dialogue, Judgment, Record
from personalens_utils.runstore.store import RunStore


def _project(
    store: RunStore,
    kind: type[Record],
    fields: Sequence[str],
    derived: dict[str, Callable[[dict[str, Any]], Any]] | None = None,
) -> pd.DataFrame:
    """Current records of a table keeping only `fields` (and the `derived` columns, each computed from
    the whole line), so dialogue texts and judge answers never fill memory.

    Rows come sorted by record id, not in the order records were appended (which follows thread
    completion), so everything computed from them is the same for the same store contents.
    """
    derived = derived or {}
    latest: dict[str, dict] = {}
    path = store.path(kind)
    for lineno, rec in store.iter_lines(kind):
        missing = [f for f in ("id", "status") if f not in rec]
        if missing:
            raise ScoresError(f"{path}:{lineno}: record lacks {missing}")
        latest[rec["id"]] = {**{f: rec.get(f) for f in fields},
                             **{name: derive(rec) for name, derive in derived.items()}}
    columns = [*fields, *derived]
    return pd.DataFrame.from_records([latest[rid] for rid in sorted(latest)], columns=columns)


def _variant_frame(store: RunStore, kind: type[Record], columns: VariantColumns, renames: dict[str, str],
                   derived: dict[str, Callable[[dict[str, Any]], Any]] | None = None) -> pd.DataFrame:
    """`_project` of a table's summary fields, its variant in `columns` (`identity.VariantColumns`)."""
    frame = _project(store, kind, kind.summary_fields, derived)  # type: ignore[attr-defined]
    frame = frame.rename(columns={**columns.renames(), **renames})
    columns.fill(frame)
    return frame


def load_dialogues(store: RunStore) -> pd.DataFrame:
    """One row per dialogue (texts left out); `domains` as a tuple; `dialogue_id` names the record id,
    `sample` which simulation of its scenario it is."""
    frame = _variant_frame(store, Dialogue, DIALOGUE_COLUMNS, {
        "id": "dialogue_id", "backend": "dialogue_backend", "status": "dialogue_status"})
    frame["domains"] = frame["domains"].map(lambda d: tuple(d) if isinstance(d, list | tuple) else ())
    frame[USER_STYLE] = frame[USER_STYLE].fillna(COOPERATIVE)
    fill_identity(frame, "dialogue_backend", [("user_model", "user_backend", "user_model_id"),
                                          ("assistant_model", "assistant_backend", "assistant_model_id")])
    return frame


def _official(rec: dict[str, Any]) -> float | None:
    return score_under(OFFICIAL, rec.get("dimension", ""), rec["status"], rec.get("score"), rec.get("raw"))


def load_judgments(store: RunStore, scoring: str = STRICT) -> pd.DataFrame:
    """One row per judgment (texts left out); `judge_backend` and `judge_model_id` name the judge's run.

    `strict_score` and `official_score` are the two readings (NaN: no score under that rule), `score`
    the one `scoring` names.
    """
    check_scoring(scoring)
    frame = _variant_frame(store, Judgment, JUDGE_COLUMNS, {
        "id": "judgment_id", "backend": "judge_backend", "status": "judgment_status"},
        {"official_score": _official})
    fill_identity(frame, "judge_backend", [("judge_model", "judge_backend", "judge_model_id")])
    frame["score"] = pd.to_numeric(frame["score"], errors="raise").astype(float)
    frame.loc[frame["judgment_status"] != "ok", "score"] = np.nan
    frame["strict_score"] = frame["score"]
    frame["official_score"] = pd.to_numeric(frame["official_score"], errors="raise").astype(float)
    frame["score"] = frame[f"{scoring}_score"]
    frame["scoring"] = scoring
    frame.attrs["scoring"] = scoring
    return frame


def _only(frame: pd.DataFrame, column: str, value: str | None, what: str) -> pd.DataFrame:
    if value is not None:
        kept = frame[frame[column] == value]
        if kept.empty and not frame.empty:
            raise ScoresError(f"no {what} {value!r} in the store; it holds {sorted(frame[column].unique())}")
        return kept
    return frame


def _only_judge_prompts(judgments: pd.DataFrame, name: str | None) -> pd.DataFrame:
    """The judgments made with the judge prompt set `name` (all when None); turn-level personalization,
    which only the kit's prompts score, is kept whatever the set."""
    if name is None:
        return judgments
    turn_level = judgments["dimension"] == TURN_PERSONALIZATION
    return pd.concat([_only(judgments[~turn_level], JUDGE_PROMPTS, name, "judge prompt set"),
                      judgments[turn_level]])


def load_scores(
    store: RunStore | str,
    *,
    judge_model: str | None = None,
    judge_prompt_version: str | None = None,
    user_model: str | None = None,
    judge_backend: str | None = None,
    judge_prompt_set: str | None = None,
    scoring: str = STRICT,
) -> pd.DataFrame:
    """The tidy frame: judgments of non-errored dialogues, joined to their dialogue's attributes.

    `score` is read under `scoring` ("strict" or "official", `judging.scoring`); both readings stay
    in `strict_score` and `official_score`.

    With several judge models (or judge prompt versions) in the store, name the one to score with;
    the frame must end up with at most one judgment per dialogue and dimension. Judge model names
    are matched the way judging stores them (any registry spelling of a model works). With one judge
    run on several backends (e.g. offline and a real one), name its `judge_backend`; with the kit's
    and the official judge prompts in one store, name the `judge_prompt_set` (turn-level
    personalization, which only the kit scores, is kept under either).
    """
    store = store if isinstance(store, RunStore) else RunStore(store)
    judge_model = judge_model_key(judge_model) if judge_model is not None else None
    dialogues = _only(load_dialogues(store), "user_model", user_model, "user model")
    dialogues = dialogues[dialogues["dialogue_status"] != "error"]
    judgments = load_judgments(store, scoring)
    judgments = _only(judgments, "judge_model", judge_model, "judge model")
    judgments = _only(judgments, JUDGE_COLUMNS.prompt_version, judge_prompt_version, "judge prompt version")
    judgments = _only(judgments, "judge_backend", judge_backend, "judge backend")
    judgments = _only_judge_prompts(judgments, judge_prompt_set)
    judgments = judgments[judgments["judgment_status"] != "error"]
    tidy = judgments.merge(dialogues, on="dialogue_id", how="inner", validate="many_to_one")
    dup = tidy.duplicated(["dialogue_id", "dimension", JUDGE_COLUMNS.sample], keep=False)
    if dup.any():
        judges = sorted(set(tidy.loc[dup, "judge_model"] + " on " + tidy.loc[dup, "judge_backend"] + ":"
                            + tidy.loc[dup, "judge_model_id"]))
        versions = sorted(tidy.loc[dup, JUDGE_COLUMNS.prompt_version].unique())
        sets = sorted(tidy.loc[dup, JUDGE_PROMPTS].unique())
        raise ScoresError(
            f"{int(dup.sum())} judgments share a dialogue and dimension (judges {judges}, "
            f"prompt versions {versions}, prompt sets {sets}); pass judge_model=, judge_prompt_version=, "
            "judge_prompt_set= and/or judge_backend= to pick one"
        )
    scenario_dup = dialogues.duplicated(
        ["scenario_id", "assistant_model", "assistant_setting", "user_backend", "assistant_backend",
         "assistant_model_id", DIALOGUE_PROMPTS, DIALOGUE_COLUMNS.sample],
        keep=False,
    )
    if scenario_dup.any():
        raise ScoresError(
            f"{int(scenario_dup.sum())} dialogues repeat a scenario for the same assistant and setting "
            f"(user models {sorted(dialogues['user_model'].unique())}, prompt versions "
            f"{sorted(dialogues[DIALOGUE_COLUMNS.prompt_version].unique())}); pass user_model= or use one "
            "run folder per prompt version"
        )
    tidy = tidy.sort_values(["dialogue_id", "dimension", "judgment_id"]).reset_index(drop=True)
    tidy.attrs["origin"] = f"run store {store.root.name}/"
    tidy.attrs["scoring"] = scoring
    return tidy


def dialogues_frame(source: RunStore | str | os.PathLike[str] | pd.DataFrame | Iterable[dict[str, Any]]
                    ) -> pd.DataFrame:
    """Dialogue records as a DataFrame, from a run store, its folder, a frame or records.

    A store's records come sorted by id (not in completion order) and the frame remembers the
    store's folder name for the table's source; the variant's columns (`identity.STORED_COLUMNS`) say
    whose prompts made each and which sample it is (records that store none: the kit's, sample 0).
    """
    if isinstance(source, pd.DataFrame):
        return source
    if isinstance(source, str | os.PathLike):
        source = RunStore(source)
    if isinstance(source, RunStore):
        frame = pd.DataFrame.from_records(sorted(source.records(Dialogue), key=lambda r: r["id"]))
        STORED_COLUMNS.fill(frame)
        frame.attrs["origin"] = f"run store {source.root.name}/"
        return frame
    return pd.DataFrame.from_records(list(source))


def run_label(frame: pd.DataFrame, column: str) -> pd.Series:
    cols = [c for c in IDENTITY if c in frame.columns]
    if not cols:
        return frame[column]
    runs = frame[[column, *cols]].drop_duplicates()
    shared = set(runs.loc[runs.duplicated(column, keep=False), column])
    return pd.Series(
        [f"{v} ({describe_identity(row)})" if v in shared else v
         for v, (_, row) in zip(frame[column], frame[cols].iterrows(), strict=True)],
        index=frame.index,
        dtype=object,
    )


def finished_dialogues(store: RunStore) -> list[Dialogue]:
    """The user-agent audit's dialogues as it read them: every record typed at once, sorted by id."""
    return [d for d in sorted(store.read(Dialogue), key=lambda d: d.id) if d.status in JUDGEABLE_STATUSES]
