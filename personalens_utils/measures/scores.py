"""Benchmark scores from a run store: one tidy frame of judgments, then aggregates with intervals.

The tidy frame has one row per judgment, carrying the attributes of its dialogue (model, setting,
task type, domains). A dialogue that errored is an infrastructure failure, not a model failure, so
it is left out; a judgment that is missing (no parseable answer) keeps its row with a NaN score and
is excluded from every mean, never counted as zero. Aggregates report how many were left out.

Each row also carries its run identity (`IDENTITY`): the backend and resolved model id of the user
agent, the assistant and the judge (records written before run identity read as made on the backend
they stored), and whose prompts made the dialogue and the judgment (`kit` or `official`; records
without a prompt set are the kit's). Offline results are never counted as a model's: `aggregate`
refuses a group that pools rows of two identities, naming both, and the tables keep them apart as
rows (`run_label`).

Repeats: a run with `repeats=k` simulations of each scenario and `judge_samples=m` judgments of each
dialogue has k x m rows per scenario and dimension, told apart by the `sample` and `judge_sample`
columns (`SAMPLES`; both 0 without repeats). `aggregate` never counts them as separate scenarios: it
first takes each scenario's mean over its samples (`per_scenario`), so `n` counts scenarios and the
interval resamples scenarios, and it says so in its frame's `attrs["samples"]` (`samples_note`).
A run without repeats is aggregated exactly as before.

Scores are read under one scoring rule (`judging.scoring`): `strict` (the stored reading, the
default) or `official` (the official gather script's reading of the stored answer). The frame carries
both readings (`strict_score`, `official_score`); `score` is the chosen one, and the `scoring` column
names it, so a table can show where the other rule would give another mean (`other_means`).

The loaders query the store's columnar copy (`columnar.Columnar`: summary fields only, texts never
read) rather than parsing every line, with the choices (`user_model=`, `judge_model=`, ...) made in
the query; the run folders of several shards are read together without a merge. The frames are the
ones a line-by-line reading gives (sorted by record id; tests/test_analysis_columnar.py compares them).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from personalens_utils.base.errors import KitError
from personalens_utils.base.stored import BackendName
from personalens_utils.judging import DIMENSIONS as JUDGE_DIMENSIONS
from personalens_utils.judging import OFFICIAL, STRICT, check_scoring, judge_model_key
from personalens_utils.llm import registry
from personalens_utils.llm.endpoints import SERVED_AT
from personalens_utils.llm.role import legacy_model_id
from personalens_utils.measures.bootstrap import cluster_ci
from personalens_utils.measures.stats import bootstrap_ci
from personalens_utils.outputs.frames import as_categories, distinct, fill_missing
from personalens_utils.prompt_templates.user_styles import COOPERATIVE
from personalens_utils.runstore.columnar import Columnar
from personalens_utils.runstore.identity import (
    DIALOGUE_COLUMNS,
    DIALOGUE_PROMPTS,
    JUDGE_COLUMNS,
    JUDGE_PROMPTS,
    USER_STYLE,
    VariantColumns,
)
from personalens_utils.runstore.records import KIT_PROMPTS, OFFLINE, Dialogue, Judgment, Record
from personalens_utils.runstore.store import RunStore

TASK_COMPLETION = "task_completion"
PERSONALIZATION = "personalization"
TURN_PERSONALIZATION = "turn_personalization"


@dataclass(frozen=True)
class Scale:
    """What a dimension's scores can be, and whether they are categories or ordered levels."""

    low: int
    high: int
    level: str  # "nominal" or "ordinal", for agreement measures
    short: str  # column name in tables

    @property
    def categories(self) -> list[float]:
        return [float(v) for v in range(self.low, self.high + 1)]


SHORT_NAMES = {
    TASK_COMPLETION: "TCR",
    PERSONALIZATION: "P",
    "naturalness_assistant": "Nat.",
    "coherence_assistant": "Coh.",
    "naturalness_user": "Nat. (U)",
    "coherence_user": "Coh. (U)",
    TURN_PERSONALIZATION: "P (turn)",
}
SCALES: dict[str, Scale] = {
    name: Scale(dim.low, dim.high, "nominal" if name == TASK_COMPLETION else "ordinal", SHORT_NAMES[name])
    for name, dim in JUDGE_DIMENSIONS.items()
}
"""Each judge dimension's scale (from `judging.DIMENSIONS`) with its agreement level and table name."""

IDENTITY = (
    "user_backend", "user_model_id", "assistant_backend", "assistant_model_id", "judge_backend",
    "judge_model_id", DIALOGUE_PROMPTS, JUDGE_PROMPTS,
)
"""The columns of a row's run identity: which backend and model id played each role, and whose
prompts (kit or official) made the dialogue and the judgment. The sample columns (`SAMPLES`) are not
part of it: samples of one run are that run's repetitions, to be averaged or modelled."""
PROMPT_COLUMNS = (("dialogue prompts", DIALOGUE_PROMPTS), ("judge prompts", JUDGE_PROMPTS))
SAMPLES = (DIALOGUE_COLUMNS.sample, JUDGE_COLUMNS.sample)
"""The sample columns of the tidy frame: which simulation (`sample`) and which judgment of it
(`judge_sample`) a row is; both 0 in a run without repeats."""
ROLES = (("user agent", "user"), ("assistant", "assistant"), ("judge", "judge"))


class ScoresError(KitError, ValueError):
    """The run store cannot be turned into one score per dialogue and dimension as asked."""


def fill_identity(frame: pd.DataFrame, backend_column: str, pairs: Sequence[tuple[str, str, str]]) -> None:
    """Give rows of records written before run identity the identity they read as: made on the backend
    they stored (the `backend_column`), with the model id they were made with (`llm.role.legacy_model_id`)."""
    for model, role_backend, model_id in pairs:
        frame[role_backend] = fill_missing(frame[role_backend], frame[backend_column])
        gaps = frame[model_id].isna()
        if gaps.any():
            frame[model_id] = frame[model_id].astype(object)  # new ids; the loaders make it categorical again
            frame.loc[gaps, model_id] = [
                legacy_model_id(m, b) for m, b in zip(frame.loc[gaps, model], frame.loc[gaps, role_backend],
                                                     strict=True)
            ]


def describe_identity(row: pd.Series | dict) -> str:
    """One run identity in words, e.g. "user agent offline:claude-3-sonnet-20240229, assistant ...";
    prompt sets are named when they are not the kit's."""
    roles = [
        f"{name} {row[f'{key}_backend']}:{row[f'{key}_model_id']}"
        for name, key in ROLES if f"{key}_backend" in row and f"{key}_model_id" in row
    ]
    sets = [f"{name} {row[key]}" for name, key in PROMPT_COLUMNS
            if row.get(key, KIT_PROMPTS) != KIT_PROMPTS]
    return ", ".join([*roles, *sets])


MAX_NAMED = 4
"""The run identities an error about pooling names (the rest are counted)."""


def check_one_identity(frame: pd.DataFrame, by: Sequence[str], what: str) -> None:
    """Raise naming them (up to `MAX_NAMED`) when a group of `frame` (by `by`) pools rows of different run
    identities."""
    cols = [c for c in IDENTITY if c in frame.columns]
    if not cols or frame.empty:
        return
    identities = distinct(frame, [*by, *cols])
    mixed = identities.duplicated(list(by), keep=False) if by else pd.Series(len(identities) > 1,
                                                                                  index=identities.index)
    if mixed.any():
        rows = identities[mixed].to_dict("records")
        first = rows[0]
        group = [row for row in rows if all(row[k] == first[k] for k in by)]
        named = list(dict.fromkeys(describe_identity(row) for row in group))
        shown = named[:MAX_NAMED] + ([f"{len(named) - MAX_NAMED} more"] if len(named) > MAX_NAMED else [])
        where = ", ".join(f"{k}={first[k]!r}" for k in by) or "the frame"
        raise ScoresError(
            f"{what} would pool records of {len(named)} different runs ({where}): "
            f"{'; '.join(shown[:-1])} and {shown[-1]}; offline results are never counted as a model's, "
            "nor the kit's prompts' results as the official prompts'. Keep them apart "
            f"(group by the identity columns {list(IDENTITY)}) or select one run, e.g. "
            f"tidy[tidy['assistant_backend'] == {first['assistant_backend']!r}]"
        )


def run_label(frame: pd.DataFrame, column: str) -> pd.Series:
    """`column`'s value, with the run identity added where one value stands for rows of several runs,
    so a table keyed on it shows e.g. an offline and a real model's results as separate rows."""
    cols = [c for c in IDENTITY if c in frame.columns]
    if not cols:
        return frame[column]
    runs = distinct(frame, [column, *cols])
    shared = runs.loc[runs.duplicated(column, keep=False)]
    if shared.empty:
        return frame[column]  # one run per value: the values are the labels
    labels = pd.Series(frame[column].to_numpy(dtype=object), index=frame.index, dtype=object)
    named = shared.assign(_label=[f"{value} ({describe_identity(row)})" for value, (_, row)
                                  in zip(shared[column], shared[cols].iterrows(), strict=True)])
    rows = frame[column].isin(set(shared[column]))
    found = frame.loc[rows, [column, *cols]].merge(named, on=[column, *cols], how="left")["_label"]
    labels[rows] = found.to_numpy(dtype=object)
    return labels


Stores = RunStore | str | os.PathLike[str] | Sequence[RunStore | str | os.PathLike[str]] | Columnar
"""What the loaders read: one run store (or its folder), the run folders of several shards read together
(`shard="i/n"` machines; an id in two of them is refused), or an open `columnar.Columnar`."""
FEW_VALUES_MAX = 4096
"""A text column named as having few values is fetched as a categorical when it has at most this many
(a run's model names, statuses and dimensions then cost a small code per row, not a string)."""
CHUNK_VECTORS = 64
"""DuckDB vectors (2048 rows each) fetched into one pandas chunk while reading a view."""


def columnar(stores: Stores) -> Columnar:
    """The columnar copy of `stores` (`columnar.Columnar`): queried instead of reading every line."""
    return stores if isinstance(stores, Columnar) else Columnar(stores)


@contextmanager
def reading(stores: Stores) -> Iterator[Columnar]:
    """`columnar(stores)`, closed on leaving when made here: DuckDB's working memory is given back before
    the frames read are joined and aggregated (an open `Columnar` passed in stays open)."""
    source = columnar(stores)
    try:
        yield source
    finally:
        if source is not stores:
            source.close()


def _origin(source: Columnar) -> str:
    return f"run store {source.name}/"


def _share(frame: pd.DataFrame, name: str) -> None:
    """One string object per value of a text column (in place)."""
    codes, uniques = pd.factorize(frame[name], use_na_sentinel=True)
    frame[name] = pd.Series(uniques.take(codes, allow_fill=True), index=frame.index, dtype=frame[name].dtype)


def _decode(codes: pd.Series, values: list[str]) -> pd.Series:
    """Positions in `values` (1-based, null: none; `values` sorted) as the categorical they stand for."""
    positions = codes.fillna(0).to_numpy(dtype="int64") - 1
    return pd.Series(pd.Categorical.from_codes(positions, categories=values), index=codes.index)


def fetch(source: Columnar, columns: Sequence[tuple[str, str]], rows: str, params: Sequence[Any] = (), *,
          order: str = "id", few: Sequence[str] = (),
          convert: Mapping[str, Callable[[pd.Series], pd.Series]] | None = None) -> pd.DataFrame:
    """`SELECT columns FROM rows ORDER BY order` as one frame, fetched in chunks; `columns` are pairs of an
    expression and the name it gets. The text columns named in `few` (a run's model names, statuses,
    dimensions: a handful of values) come as positions in their sorted list of values and are made
    categoricals (`frames`), not one string per row. `convert` turns a column of each chunk into the
    form the frame holds (DuckDB's list columns into tuples or lists) before the next is fetched."""
    con = source.connection()
    coded = [(expr, name) for expr, name in columns if name in few]
    values: dict[str, list[str]] = {}
    if coded:
        lists = ", ".join(f"list(DISTINCT {expr}) FILTER (WHERE {expr} IS NOT NULL)" for expr, _ in coded)
        found = con.execute(f"SELECT {lists} FROM {rows}", list(params)).fetchone() or ()
        values = {name: sorted(held) for (_, name), held in zip(coded, found, strict=True)
                  if held and len(held) <= FEW_VALUES_MAX}
    select = ", ".join(f'list_position(?, {expr}) AS "{name}"' if name in values else f'{expr} AS "{name}"'
                       for expr, name in columns)
    cursor = con.execute(f"SELECT {select} FROM {rows} ORDER BY {order}",
                         [*(values[name] for _, name in columns if name in values), *params])
    chunks: list[pd.DataFrame] = []
    while True:
        chunk = cursor.fetch_df_chunk(CHUNK_VECTORS)
        if chunk.empty and chunks:
            break
        for name, held in values.items():
            chunk[name] = _decode(chunk[name], held)
        for name, how in (convert or {}).items():
            chunk[name] = how(chunk[name])
        chunks.append(chunk)
        if chunk.empty:
            break
    return chunks[0] if len(chunks) == 1 else _stacked(chunks)


def _stacked(chunks: list[pd.DataFrame]) -> pd.DataFrame:
    """`pd.concat(chunks, ignore_index=True)` a column at a time, each chunk's column let go once stacked:
    the chunks and the whole frame are never all held at once."""
    names = list(chunks[0].columns)
    return pd.DataFrame({name: pd.concat([chunk.pop(name) for chunk in chunks], ignore_index=True)
                         for name in names}, copy=False)


def _joined(judgments: pd.DataFrame, dialogues: pd.DataFrame) -> pd.DataFrame:
    """`judgments.merge(dialogues, on="dialogue_id", how="inner")` (a dialogue id is one dialogue), built a
    column at a time and emptying `judgments` as it goes: the two frames and the joined one are never all
    held at once."""
    shared = (set(judgments.columns) & set(dialogues.columns)) - {"dialogue_id"}
    if shared:
        raise ValueError(f"judgment and dialogue frames both have the column(s) {sorted(shared)}")
    at = pd.Index(dialogues["dialogue_id"]).get_indexer(judgments["dialogue_id"])
    kept = at >= 0
    rows = None if kept.all() else np.flatnonzero(kept)
    at = at[kept]
    joined: dict[str, pd.Series] = {}
    for name in list(judgments.columns):
        column = judgments.pop(name)
        joined[name] = column if rows is None else column.iloc[rows].reset_index(drop=True)
    for name in dialogues.columns.drop("dialogue_id"):
        joined[name] = dialogues[name].take(at).reset_index(drop=True)
    return pd.DataFrame(joined, copy=False)


@dataclass(frozen=True)
class Only:
    """One choice a loader makes in SQL (`column` = `value`), refused as `_only` would when it leaves
    nothing of what the earlier choices kept; `scope` limits the rows it applies to."""

    column: str
    value: Any
    what: str
    scope: str = "true"

    def condition(self) -> str:
        return f"(NOT ({self.scope}) OR {self.column} = ?)"


def _choose(source: Columnar, view: str, choices: Sequence[Only]) -> tuple[str, list[Any]]:
    """The SQL condition and parameters of `choices` (those with a value), after checking each keeps a row
    where the rows before it were not none (the error names what the store holds instead)."""
    chosen = [c for c in choices if c.value is not None]
    if not chosen:
        return "true", []
    counts, params, before, before_params = [], [], "true", []
    for choice in chosen:
        counts += [f"count(*) FILTER (WHERE {before} AND {choice.scope})",
                   f"count(*) FILTER (WHERE {before} AND {choice.scope} AND {choice.column} = ?)"]
        params += [*before_params, *before_params, choice.value]
        before, before_params = f"{before} AND {choice.condition()}", [*before_params, choice.value]
    found = source.connection().execute(f"SELECT {', '.join(counts)} FROM {view}", params).fetchone()
    assert found is not None
    prior, prior_params = "true", []
    for k, choice in enumerate(chosen):
        if found[2 * k] and not found[2 * k + 1]:
            held = source.connection().execute(
                f"SELECT DISTINCT {choice.column} FROM {view} WHERE {prior} AND {choice.scope} "
                f"AND {choice.column} IS NOT NULL", prior_params).fetchall()
            raise ScoresError(f"no {choice.what} {choice.value!r} in the store; it holds "
                              f"{sorted(v for (v,) in held)}")
        prior, prior_params = f"{prior} AND {choice.condition()}", [*prior_params, choice.value]
    return before, before_params


def _select(kind: type[Record], columns: VariantColumns, renames: dict[str, str],
            extra: Sequence[str] = ()) -> list[tuple[str, str]]:
    """A table's summary fields (and `extra` columns), each with the name the frames give it."""
    names = {**columns.renames(), **renames}
    return [(f'"{name}"', names.get(name, name))
            for name in (*kind.summary_fields, *extra)]  # type: ignore[attr-defined]


def _domains(values: pd.Series) -> pd.Series:
    """DuckDB's lists of domains as tuples (none: an empty tuple), one tuple object per combination of
    domains (a run has a few hundred; a row per dialogue would hold a tuple and its strings each)."""
    known: dict[tuple[str, ...], tuple[str, ...]] = {}
    tuples = [tuple(d.tolist()) if isinstance(d, np.ndarray) else () for d in values]
    return pd.Series([known.setdefault(t, t) for t in tuples], index=values.index, dtype=object)


def _dialogue_frame(frame: pd.DataFrame) -> pd.DataFrame:
    DIALOGUE_COLUMNS.fill(frame)
    frame[USER_STYLE] = fill_missing(frame[USER_STYLE], COOPERATIVE)  # stored only when not cooperative
    fill_identity(frame, "dialogue_backend", [("user_model", "user_backend", "user_model_id"),
                                          ("assistant_model", "assistant_backend", "assistant_model_id")])
    as_categories(frame, DIALOGUE_FEW)
    return frame


DIALOGUE_NAMES = {"id": "dialogue_id", "backend": "dialogue_backend", "status": "dialogue_status"}
JUDGMENT_NAMES = {"id": "judgment_id", "backend": "judge_backend", "status": "judgment_status"}
DIALOGUE_FEW = ("task_id", "task_type", "user_model", "assistant_model", "assistant_setting",
                DIALOGUE_COLUMNS.prompt_version, DIALOGUE_PROMPTS, "dialogue_backend", "user_backend",
                "user_model_id", USER_STYLE, "assistant_backend", "assistant_model_id", "dialogue_status")
JUDGMENT_FEW = ("dimension", "judge_model", JUDGE_COLUMNS.prompt_version, JUDGE_PROMPTS, "judge_backend",
                "judge_model_id", "judgment_status")
"""The text columns of the dialogue and judgment frames that hold a handful of values: fetched as
categoricals (`fetch`, `frames`)."""
DIALOGUE_SELECT = _select(Dialogue, DIALOGUE_COLUMNS, DIALOGUE_NAMES)
JUDGMENT_SELECT = _select(Judgment, JUDGE_COLUMNS, JUDGMENT_NAMES, ["official_score"])
SCORE_SELECT = [(expr, name) for expr, name in JUDGMENT_SELECT if name != "judgment_id"]
"""The judgment columns of the tidy frame: a row there is told by its dialogue, dimension and judge
sample, and no analysis reads the judgment's own id (a string per row: 0.6 GiB for 8.5 million rows)."""


def load_dialogues(store: Stores) -> pd.DataFrame:
    """One row per dialogue (texts left out), sorted by id; `domains` as a tuple; `dialogue_id` names the
    record id, `sample` which simulation of its scenario it is."""
    with reading(store) as source:
        frame = fetch(source, DIALOGUE_SELECT, Dialogue.table, few=DIALOGUE_FEW, convert=DIALOGUE_CONVERT)
    return _dialogue_frame(frame)


def _turn_scores(values: pd.Series) -> pd.Series:
    """DuckDB's lists of turn scores (masked arrays, NA for none) as the stored lists, holding one float
    object per score value (a rubric has a handful) rather than one per turn."""
    known: dict[float, float] = {}
    lists = [value.tolist() if isinstance(value, np.ndarray) else None for value in values]
    return pd.Series([None if scores is None else [s if s is None else known.setdefault(s, s) for s in scores]
                      for scores in lists], index=values.index, dtype=object)


DIALOGUE_CONVERT = {"domains": _domains}
CONDITION_DIALOGUE = ("user_model", "user_model_id", USER_STYLE)
"""What tells a grid's dialogues of one scenario and assistant apart: the user agent's model and style."""
CONDITION_JUDGE = ("judge_model", "judge_backend", "judge_model_id", JUDGE_COLUMNS.prompt_version,
                   JUDGE_PROMPTS)
"""What tells a grid's judgments of one dialogue and dimension apart: the judge's run."""
JUDGMENT_CONVERT = {"turn_scores": _turn_scores}


def _judgment_frame(frame: pd.DataFrame, scoring: str) -> pd.DataFrame:
    JUDGE_COLUMNS.fill(frame)
    fill_identity(frame, "judge_backend", [("judge_model", "judge_backend", "judge_model_id")])
    frame["score"] = frame["score"].astype(float)
    frame.loc[frame["judgment_status"] != "ok", "score"] = np.nan
    frame["strict_score"] = frame["score"]
    frame["official_score"] = frame["official_score"].astype(float)
    frame["score"] = frame[f"{scoring}_score"]
    frame["scoring"] = pd.Categorical.from_codes(np.zeros(len(frame), dtype=np.int8), categories=[scoring])
    frame.attrs["scoring"] = scoring
    as_categories(frame, JUDGMENT_FEW)
    return frame


def load_judgments(store: Stores, scoring: str = STRICT) -> pd.DataFrame:
    """One row per judgment (texts left out), sorted by id; `judge_backend` and `judge_model_id` name the
    judge's run.

    `strict_score` and `official_score` are the two readings (NaN: no score under that rule), `score`
    the one `scoring` names.
    """
    check_scoring(scoring)
    with reading(store) as source:
        frame = fetch(source, JUDGMENT_SELECT, Judgment.table, few=JUDGMENT_FEW, convert=JUDGMENT_CONVERT)
    return _judgment_frame(frame, scoring)


def _read_scores(
    store: Stores,
    *,
    judge_model: str | None = None,
    judge_prompt_version: str | None = None,
    user_model: str | None = None,
    judge_backend: BackendName | None = None,
    judge_prompt_set: str | None = None,
    scoring: str = STRICT,
    dialogue_ids: Collection[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """`load_scores`'s frame before its checks, with the dialogues it joined and where it came from."""
    check_scoring(scoring)
    judge_model = judge_model_key(judge_model) if judge_model is not None else None
    with reading(store) as source:
        origin = _origin(source)
        where, params = _choose(source, Dialogue.table, [Only("user_model", user_model, "user model")])
        kept = "AND status IS DISTINCT FROM 'error'"  # errored records are infrastructure failures
        some = [] if dialogue_ids is None else [sorted(dialogue_ids)]
        within = "" if dialogue_ids is None else "AND {} IN (SELECT unnest(?::VARCHAR[]))"
        dialogues = fetch(source, DIALOGUE_SELECT, f"dialogues WHERE {where} {kept} {within.format('id')}",
                          [*params, *some], few=DIALOGUE_FEW, convert=DIALOGUE_CONVERT)
        where, params = _choose(source, Judgment.table, [
            Only("judge_model", judge_model, "judge model"),
            Only("prompt_version", judge_prompt_version, "judge prompt version"),
            Only("backend", judge_backend, "judge backend"),
            Only(f"coalesce(prompt_set, '{KIT_PROMPTS}')", judge_prompt_set, "judge prompt set",
                 f"dimension IS DISTINCT FROM '{TURN_PERSONALIZATION}'"),
        ])
        judgments = fetch(source, SCORE_SELECT,
                          f"judgments WHERE {where} {kept} {within.format('dialogue_id')}", [*params, *some],
                          order="judgments.dialogue_id, judgments.dimension, judgments.id", few=JUDGMENT_FEW,
                          convert=JUDGMENT_CONVERT)
    dialogues, judgments = _dialogue_frame(dialogues), _judgment_frame(judgments, scoring)
    tidy = _joined(judgments, dialogues)
    del judgments
    _share(tidy, "dialogue_id")
    return tidy, dialogues, origin


def load_scores(
    store: Stores,
    *,
    judge_model: str | None = None,
    judge_prompt_version: str | None = None,
    user_model: str | None = None,
    judge_backend: BackendName | None = None,
    judge_prompt_set: str | None = None,
    scoring: str = STRICT,
    dialogue_ids: Collection[str] | None = None,
) -> pd.DataFrame:
    """The tidy frame: judgments of non-errored dialogues, joined to their dialogue's attributes; a row is
    told by `dialogue_id`, `dimension` and `judge_sample` (`load_judgments` has the judgments' own ids).
    With `dialogue_ids`, only the judgments of those dialogues (e.g. an annotation sample) are read.

    `score` is read under `scoring` ("strict" or "official", `judging.scoring`); both readings stay
    in `strict_score` and `official_score`. `store` may be several stores (shards) read together.

    With several judge models (or judge prompt versions) in the store, name the one to score with;
    the frame must end up with at most one judgment per dialogue and dimension. Judge model names
    are matched the way judging stores them (any registry spelling of a model works). With one judge
    run on several backends (e.g. offline and a real one), name its `judge_backend`; with the kit's
    and the official judge prompts in one store, name the `judge_prompt_set` (turn-level
    personalization, which only the kit scores, is kept under either). The choices are made in the
    query, so only the rows kept are read.

    `condition_scores` reads the same frame with every condition of a sensitivity grid kept apart.
    """
    tidy, dialogues, origin = _read_scores(
        store, judge_model=judge_model, judge_prompt_version=judge_prompt_version, user_model=user_model,
        judge_backend=judge_backend, judge_prompt_set=judge_prompt_set, scoring=scoring,
        dialogue_ids=dialogue_ids)
    return _checked(tidy, dialogues, origin, scoring, apart=False)


def condition_scores(store: Stores, *, scoring: str = STRICT,
                     dialogue_ids: Collection[str] | None = None) -> pd.DataFrame:
    """`load_scores` of every condition of a sensitivity grid (notebook 10), kept apart instead of
    refused: a scenario may repeat for another user model or style (`CONDITION_DIALOGUE`), and a
    dialogue be judged by several judges (`CONDITION_JUDGE`); their columns tell the rows apart."""
    tidy, dialogues, origin = _read_scores(store, scoring=scoring, dialogue_ids=dialogue_ids)
    return _checked(tidy, dialogues, origin, scoring, apart=True)


def _checked(tidy: pd.DataFrame, dialogues: pd.DataFrame, origin: str, scoring: str, *,
             apart: bool) -> pd.DataFrame:
    """The frame once no two rows claim one judgment or one scenario's dialogue (unless `apart` keeps
    the conditions of a grid apart), with where it came from and how it was scored."""
    judge_key = list(CONDITION_JUDGE) if apart else []
    dup = tidy.duplicated(["dialogue_id", "dimension", JUDGE_COLUMNS.sample, *judge_key], keep=False)
    if dup.any():
        named = tidy.loc[dup, ["judge_model", "judge_backend", "judge_model_id"]].astype(str)
        judges = sorted(set(named["judge_model"] + " on " + named["judge_backend"] + ":"
                            + named["judge_model_id"]))
        versions = sorted(tidy.loc[dup, JUDGE_COLUMNS.prompt_version].unique())
        sets = sorted(tidy.loc[dup, JUDGE_PROMPTS].unique())
        raise ScoresError(
            f"{int(dup.sum())} judgments share a dialogue and dimension (judges {judges}, "
            f"prompt versions {versions}, prompt sets {sets}); pass judge_model=, judge_prompt_version=, "
            "judge_prompt_set= and/or judge_backend= to pick one"
        )
    scenario_dup = dialogues.duplicated(
        ["scenario_id", "assistant_model", "assistant_setting", "user_backend", "assistant_backend",
         "assistant_model_id", DIALOGUE_PROMPTS, DIALOGUE_COLUMNS.sample,
         *(CONDITION_DIALOGUE if apart else ())],
        keep=False,
    )
    if scenario_dup.any():
        raise ScoresError(
            f"{int(scenario_dup.sum())} dialogues repeat a scenario for the same assistant and setting "
            f"(user models {sorted(dialogues['user_model'].unique())}, user styles "
            f"{sorted(dialogues[USER_STYLE].unique())}, prompt versions "
            f"{sorted(dialogues[DIALOGUE_COLUMNS.prompt_version].unique())}); pass user_model= or use one "
            "run folder per prompt version"
        )
    tidy.attrs["origin"] = origin
    tidy.attrs["scoring"] = scoring
    return tidy


def scoring_of(tidy: pd.DataFrame) -> str:
    """The scoring rule a tidy frame's `score` was read under (its `scoring` column, which survives
    filters and concatenation; frames built by hand without one: strict). Two rules in one frame raise."""
    if "scoring" not in tidy.columns or tidy.empty:
        return tidy.attrs.get("scoring", STRICT)
    rules = sorted(tidy["scoring"].dropna().unique())
    if len(rules) > 1:
        raise ScoresError(f"the score frame mixes scoring rules {rules}; load it with one `scoring=`")
    return rules[0] if rules else STRICT


def other_means(tidy: pd.DataFrame, by: Sequence[str], dimensions: Iterable[str]) -> pd.DataFrame:
    """Per group and dimension, the mean under the rule `tidy` was not read under, and how many of
    its judgments the two rules read differently; empty when the frame holds one reading only.

    Task completion as a rate in percent, as in `aggregate`.
    """
    other = OFFICIAL if scoring_of(tidy) == STRICT else STRICT
    columns = [*by, "dimension", "other_scoring", "other_mean", "n_read_differently"]
    if f"{other}_score" not in tidy.columns:
        return pd.DataFrame(columns=columns)
    part = tidy.loc[tidy["dimension"].isin(list(dimensions)), [*by, "dimension", "score", f"{other}_score"]]
    rows = []
    for keys, group in part.groupby([*by, "dimension"], sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        factor = 100.0 if keys[-1] == TASK_COMPLETION else 1.0
        values = group[f"{other}_score"].dropna().to_numpy() * factor
        mine, theirs = group["score"], group[f"{other}_score"]
        differ = int(((mine != theirs) & ~(mine.isna() & theirs.isna())).sum())
        rows.append({**dict(zip(by, keys[:-1], strict=True)), "dimension": keys[-1], "other_scoring": other,
                     "other_mean": float(values.mean()) if len(values) else float("nan"),
                     "n_read_differently": differ})
    return pd.DataFrame(rows, columns=columns)


def explode_domains(tidy: pd.DataFrame) -> pd.DataFrame:
    """One row per (judgment, domain): a multi-domain dialogue counts toward each of its domains."""
    return tidy.explode("domains").rename(columns={"domains": "domain"}).dropna(subset=["domain"])


SCENARIO_UNIT = ("scenario_id", "user_model", "assistant_model", "assistant_setting", "judge_model")
"""What one scenario's result is, beside the run identity (`IDENTITY`): its samples are its repetitions."""


def has_samples(tidy: pd.DataFrame) -> bool:
    """Whether the frame holds a simulation or judge sample other than the first."""
    return any(column in tidy.columns and bool((tidy[column] > 0).any()) for column in SAMPLES)


def samples_note(tidy: pd.DataFrame) -> str:
    """What the aggregates did with the frame's samples, in words; empty without repeats."""
    if not has_samples(tidy):
        return ""
    sims, judges = (int(tidy[c].max()) + 1 if c in tidy.columns else 1 for c in SAMPLES)
    return (f"Each scenario's score is the mean over its samples (up to {sims} simulation(s) x {judges} "
            "judgment(s)) before aggregating; n counts scenarios.")


def per_scenario(group: pd.DataFrame, cluster: str | None = None) -> pd.DataFrame:
    """One score per scenario (column `score`): the mean over its simulation and judge samples (NaN when
    none of them has a score); without repeats, the scores as they are. With `cluster`, that column too
    (a scenario belongs to one user, so its first value)."""
    keep = ["score", *([cluster] if cluster else [])]
    if not has_samples(group):
        return group[keep]
    unit = [c for c in (*SCENARIO_UNIT, *IDENTITY) if c in group.columns]
    grouped = group.groupby(unit, sort=True, dropna=False)
    return grouped.agg({"score": "mean", **({cluster: "first"} if cluster else {})})[keep]


def aggregate_columns(tidy: pd.DataFrame, by: Sequence[str], cluster: str | None = None) -> list[str]:
    """The columns of `tidy` that `aggregate` reads: a caller filtering a large frame can keep only them."""
    needed = [*by, "dimension", "score", *([cluster] if cluster else []), *SCENARIO_UNIT, *IDENTITY, *SAMPLES]
    return [c for c in dict.fromkeys(needed) if c in tidy.columns]


def aggregate(
    tidy: pd.DataFrame,
    by: Sequence[str],
    dimensions: Iterable[str] | None = None,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    cluster: str | None = None,
) -> pd.DataFrame:
    """Long frame: one row per group and dimension with mean, bootstrap interval, n and n_missing.

    Task completion is reported as a rate in percent (TCR); the other dimensions on their scale.
    With `cluster` (a column, e.g. `user_id`) the interval resamples its values with all their rows
    (`measures.bootstrap.cluster_ci`); without, it resamples rows as independent.
    A group holding rows of two run identities (`IDENTITY`) is refused (`check_one_identity`).
    With repeats, each scenario's samples are averaged first (`per_scenario`): `n` and `n_missing`
    count scenarios, and `attrs["samples"]` says so (`samples_note`). With `cluster`, a group of fewer
    than `stats.MIN_CLUSTERS` clusters, or a zero-width interval, gets its mean with NaN bounds, and
    `attrs["withheld"]` holds each row's reason ("" where the interval stands; `stats.withheld_note`).
    """
    dims = (
        list(dimensions)
        if dimensions is not None
        else sorted(set(tidy["dimension"].unique()) - {TURN_PERSONALIZATION})
    )
    unknown = [d for d in dims if d not in SCALES]
    if unknown:
        raise ScoresError(f"unknown dimensions {unknown}; known: {sorted(SCALES)}")
    rows, withheld = [], []
    part = tidy.loc[tidy["dimension"].isin(dims), aggregate_columns(tidy, by, cluster)]
    check_one_identity(part, list(by), "a mean")
    for keys, group in part.groupby([*by, "dimension"], sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        dimension = keys[-1]
        per_unit = per_scenario(group, cluster)
        valid = per_unit[per_unit["score"].notna()]
        scores = valid["score"].to_numpy() * (100.0 if dimension == TASK_COMPLETION else 1.0)
        if cluster is None:
            ci = bootstrap_ci(scores, confidence=confidence, n_resamples=n_resamples, seed=seed)
        else:
            ci = cluster_ci(scores, valid[cluster].to_numpy(), confidence=confidence, n_resamples=n_resamples,
                            seed=seed)
        withheld.append(ci.withheld)
        rows.append(
            {
                **dict(zip(by, keys[:-1], strict=True)),
                "dimension": dimension,
                **ci.as_dict(),
                "n_missing": int(per_unit["score"].isna().sum()),
            }
        )
    columns = [*by, "dimension", "mean", "ci_low", "ci_high", "n", "n_missing"]
    out = pd.DataFrame(rows, columns=columns)
    out.attrs["samples"] = samples_note(part)
    out.attrs["withheld"] = withheld
    return out


def turn_frame(tidy: pd.DataFrame) -> pd.DataFrame:
    """Turn-level personalization, one row per scored assistant turn (1-based); null turns left out."""
    keep = ["dialogue_id", "scenario_id", "user_id", "task_type", "domains", "assistant_model",
            "assistant_setting", *(c for c in IDENTITY if c in tidy.columns)]
    part = tidy.loc[(tidy["dimension"] == TURN_PERSONALIZATION) & (tidy["judgment_status"] == "ok"),
                    [*keep, "turn_scores"]]
    lists = [scores or [] for scores in part["turn_scores"]]
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter((np.nan if s is None else float(s) for scores in lists for s in scores), dtype=float,
                       count=int(lengths.sum()))
    del lists
    turn = np.arange(1, len(flat) + 1, dtype=np.int64)
    turn -= np.repeat(np.cumsum(lengths) - lengths, lengths)  # each list's turns count from 1
    scored = ~np.isnan(flat)
    turns = part[keep].iloc[np.repeat(np.arange(len(part)), lengths)[scored]].reset_index(drop=True)
    turns["turn"], turns["score"] = turn[scored], flat[scored]
    turns.attrs = {"origin": tidy.attrs.get("origin", "a score frame")}
    return turns


def missing_rates(tidy: pd.DataFrame) -> pd.DataFrame:
    """Share of judgments without a valid score, per dimension and judge model."""
    grouped = tidy.groupby(["judge_model", "dimension"])["score"]
    missing = grouped.apply(lambda s: int(s.isna().sum()))
    out = pd.DataFrame({"n_judgments": grouped.size(), "missing": missing})
    out["missing_rate"] = out["missing"] / out["n_judgments"]
    return out.reset_index()


def _values(column: pd.Series) -> set[Any]:
    """A column's distinct values, nulls left out (hashed in one pass, not read value by value)."""
    return set(column.dropna().unique())


def backends(tidy: pd.DataFrame) -> set[str]:
    """Every backend that played a role (user agent, assistant, judge) in the frame, with the backend of
    the model each assistant that calls one through the kit called (so an offline one is labelled as such)."""
    roles = [c for c in ("user_backend", "assistant_backend", "judge_backend") if c in tidy.columns]
    found = set().union(*(_values(tidy[c]) for c in roles)) if roles else set()
    if "assistant_model_id" in tidy.columns:
        found |= {b for b in map(registry.called_backend, tidy["assistant_model_id"].dropna().unique()) if b}
    return found


ROLE_COLUMNS = {"user agent": ("user_backend", "user_model_id"), "judge": ("judge_backend", "judge_model_id")}
"""The roles besides the assistant whose backend and model id a frame may carry."""
Maker = tuple[str, str]
"""A backend and the model id it was called with (without its endpoint)."""


@dataclass(frozen=True)
class Provenance:
    """What made a frame's numbers, role by role: every backend (`backends`), the (backend, model id)
    pairs that played the user agent and the judge, and those each assistant ran on, by its name in the
    frame (an assistant calling a model through the kit counts as that model). It lets a caption say
    which roles the offline backend played when it played only some (`display.provenance_note`)."""

    backends: frozenset[str]
    roles: Mapping[str, frozenset[Maker]]
    assistants: Mapping[str, frozenset[Maker]]

    def _makers(self) -> set[Maker]:
        return set().union(*self.roles.values(), *self.assistants.values())

    @property
    def partly_offline(self) -> bool:
        """Whether the offline backend played some role and something else another."""
        backends = {backend for backend, _ in self._makers()}
        return OFFLINE in backends and len(backends) > 1

    def offline_roles(self) -> list[str]:
        """The roles the offline backend played when it did not play them all, as a reader names them."""
        if not self.partly_offline:
            return []
        named = [role for role, makers in self.roles.items() if _offline(makers)]
        offline = [name for name, makers in self.assistants.items() if _offline(makers)]
        if offline:
            named.append("assistant" if len(self.assistants) == 1 else
                         "assistants" if len(offline) == len(self.assistants) else "some assistants")
        return named


def _offline(makers: Iterable[Maker]) -> bool:
    return any(backend == OFFLINE for backend, _ in makers)


def _maker(backend: BackendName, model_id: str) -> Maker:
    """The (backend, model id) that answered: the model an assistant calls through the kit when it names
    one (`registry.CALLS`), the endpoint left out (a caption names the model, the source its address)."""
    _, sep, called = model_id.rpartition(registry.CALLS)
    if sep:
        backend, _, model_id = called.partition(":")
    return backend, model_id.partition(SERVED_AT)[0]


def provenance(frame: pd.DataFrame) -> Provenance:
    """The `Provenance` of a frame's rows (`backends` as `backends` gives them); a role whose columns the
    frame lacks is left out."""
    roles = {role: frozenset(_maker(b, m) for b, m in _known(frame, cols))
             for role, cols in ROLE_COLUMNS.items() if set(cols) <= set(frame.columns)}
    assistants: dict[str, set[Maker]] = {}
    for name, backend, model_id in _known(frame, ["assistant_model", "assistant_backend",
                                                  "assistant_model_id"]):
        assistants.setdefault(name, set()).add(_maker(backend, model_id))
    return Provenance(frozenset(backends(frame)), roles,
                      {name: frozenset(makers) for name, makers in assistants.items()})


def _known(frame: pd.DataFrame, columns: Sequence[str]) -> list[tuple[str, ...]]:
    """The distinct rows of `columns` with a value in each (none when the frame lacks one of them)."""
    if not set(columns) <= set(frame.columns):
        return []
    rows = distinct(frame, columns).dropna()
    return [tuple(map(str, row)) for row in rows.itertuples(index=False)]


def model_ids(tidy: pd.DataFrame) -> set[str]:
    """Every resolved model id that played a role in the frame."""
    roles = [c for c in ("user_model_id", "assistant_model_id", "judge_model_id") if c in tidy.columns]
    return set().union(*(_values(tidy[c]) for c in roles)) if roles else set()
