"""What the explorer reads: a run store's dialogues and judgments, filtered, with each dialogue's context.

No widgets here, so the filtering and the views can be tested and reused without a front end.
The store is queried through its columnar copy (`columnar.Columnar`), never read whole: a filter is
a query, the list is a page of it with a count, and only the dialogue opened is read in full (its
line and its judgments' lines, by offset). So the explorer opens as fast on 122k dialogues as on 4.
Several stores (the run folders of `shard="i/n"` machines) are read together.
The profile and task of a dialogue come from the benchmark it was simulated on (the judge's own
view of it, `judging.benchmark_contexts`); the places where the assistant applied a preference
are found by the offline judge's whole-word matching (`judging.offline.mentions`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from personalens_utils.base.stored import BackendName
from personalens_utils.data import BenchmarkDataError
from personalens_utils.judging import ALL_DIMENSIONS, JUDGEABLE_STATUSES, JudgingError, benchmark_contexts
from personalens_utils.judging.offline import Mention, mentions
from personalens_utils.runstore.columnar import Columnar, StoreLike
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

ANY = None
"""A filter left open."""
PAGE = 200
"""Dialogues in one page of `Catalog.select` unless another limit is asked for."""

ContextFor = Callable[[Dialogue], Mapping[str, Any]]
Stores = StoreLike | Sequence[StoreLike]


@dataclass(frozen=True)
class Filters:
    """What to show: each field None (any) or the one value wanted; `score_range` applies to `dimension`;
    `search` keeps the dialogues whose list line (`Catalog.label`) holds every word of it, in any case."""

    assistant_model: str | None = ANY
    setting: str | None = ANY
    task_type: str | None = ANY
    domain: str | None = ANY
    user: int | None = ANY
    judge_model: str | None = ANY
    dimension: str | None = ANY
    score_range: tuple[float, float] | None = None
    search: str = ""


@dataclass(frozen=True)
class DialogueSummary:
    """A dialogue as the list shows it: who and what, how it ended, no texts (those are read on `view`)."""

    id: str
    scenario_id: str
    user_id: int
    task_id: str
    task_type: str
    domains: tuple[str, ...]
    assistant_model: str
    assistant_setting: str
    assistant_backend: BackendName
    status: str
    n_turns: int


@dataclass(frozen=True)
class Page:
    """One page of the dialogues that pass the filters, in the catalog's order, and how many pass."""

    dialogues: tuple[DialogueSummary, ...]
    total: int
    offset: int


@dataclass(frozen=True)
class DialogueView:
    """One dialogue with everything the explorer shows beside it."""

    dialogue: Dialogue
    judgments: tuple[Judgment, ...]
    context: Mapping[str, Any] | None
    """The judge's context (task, profile for the task's domains, situation); None without a benchmark."""
    problem: str = ""
    """Why there is no context (no benchmark given, or the scenario is not in it)."""
    mentions: tuple[Mention, ...] = field(default=())


def _dimension_order(judgment: Judgment) -> tuple[int, str, str]:
    known = judgment.dimension in ALL_DIMENSIONS
    return (
        ALL_DIMENSIONS.index(judgment.dimension) if known else len(ALL_DIMENSIONS),
        judgment.dimension,
        judgment.judge_model,
    )


_TABLE = "explorer_dialogues"
"""The catalog's own table: the current dialogues' list fields, numbered (`pos`) in the catalog's order."""
_SUMMARY = tuple(f.name for f in fields(DialogueSummary))
_COLUMNS = ", ".join(_SUMMARY)
_LABEL = ("lower('user ' || user_id || ' · ' || task_id || ' · ' || assistant_model || ' · ' || "
          "assistant_setting || ' · ' || status || ' · ' || n_turns || ' turns')")
"""`Catalog.label` in SQL, lower-cased, for the search words (a test holds the two to one line)."""
_BACKEND = "coalesce(nullif(assistant_backend, ''), backend) AS assistant_backend"
"""A record written before the run-identity fields ran its assistant on `backend` (as `Dialogue` reads it)."""
_PASSING = "explorer_passing"
"""The `pos` of the dialogues that pass the last filters asked for: pages and counts read it."""
_SCORES = (
    "WITH lines AS (SELECT id, _source, _offset, dialogue_id, judge_model, score FROM judgments_lines "
    "WHERE dimension = ?), replaced AS (SELECT id, _source, max(_offset) AS last FROM lines "
    "GROUP BY id, _source HAVING count(*) > 1) SELECT d.pos, j.judge_model, j.score FROM lines j "
    f"JOIN {_TABLE} d ON d.id = j.dialogue_id WHERE NOT EXISTS (SELECT 1 FROM replaced r "
    "WHERE r.id = j.id AND r._source = j._source AND r.last > j._offset)")
"""One dimension's scores by dialogue (`pos`) and judge, each from its judgment's current line (the
`judgments` view's rule: a later line of an id replaces it) worked out on that dimension's lines only (a
judgment's id is made from its dimension, `identity.judgment_id`): the view orders every line, seconds
at 122k dialogues."""
_JUDGED = (f"SELECT DISTINCT d.pos FROM judgments_lines j JOIN {_TABLE} d ON d.id = j.dialogue_id "
           "WHERE j.judge_model = ?")
"""The dialogues one judge scored: the judge is part of a judgment's id, so any line of it will do."""
_CURRENT = ("QUALIFY row_number() OVER (PARTITION BY id, _source ORDER BY _offset DESC) = 1")
"""The `judgments` view's rule, applied to a few lines (one dialogue's)."""
_JUDGEABLE = "status IN (" + ", ".join(f"'{s}'" for s in JUDGEABLE_STATUSES) + ")"


class Catalog:
    """The dialogues and judgments of one run store (or several, read together), queried for filtering
    and paging; a dialogue and its judgments are read in full only when viewed.

    `context_for` gives a dialogue's task and profile (e.g. `judging.benchmark_contexts(benchmark)`);
    without it the views say where the profile would come from.
    """

    def __init__(self, store: Stores, context_for: ContextFor | None = None):
        self.columnar = Columnar(store)
        self.stores: list[RunStore] = self.columnar.stores
        self.store = self.stores[0]
        self.context_for = context_for
        self._con = self.columnar.refresh()
        self._con.execute(  # numbered on the narrow view, then joined to the lines: faster at 122k
            f"CREATE OR REPLACE TEMP TABLE {_TABLE} AS WITH numbered AS (SELECT _source, _offset, "
            "row_number() OVER (ORDER BY user_id, task_id, assistant_model, assistant_setting, id) AS pos "
            f"FROM dialogues) SELECT {_COLUMNS.replace('assistant_backend', _BACKEND)}, _source, _offset, "
            "_length, pos FROM dialogues_lines JOIN numbered USING (_source, _offset)")
        self.total: int = self._one(f"SELECT count(*) FROM {_TABLE}")
        self._filters: Filters | None = None
        self._passing = 0
        self._tables: dict[tuple[str, str], str] = {}

    @classmethod
    def of(cls, store: Stores | Any, benchmark: Any = None) -> Catalog:
        """A catalog of a store (or shards) with the benchmark's contexts, if one is given."""
        return cls(store, benchmark_contexts(benchmark) if benchmark is not None else None)

    @property
    def where(self) -> str:
        """The store folder, or the shards' folders, for messages."""
        return ", ".join(str(s.root) for s in self.stores)

    def _rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._con.execute(query, list(params)).fetchall()

    def _one(self, query: str, params: Sequence[Any] = ()) -> Any:
        return self._rows(query, params)[0][0]

    def values(self, name: str) -> list[Any]:
        """The distinct values a filter can take in this store, sorted."""
        if name in ("judge_model", "dimension"):
            # judge and dimension make a judgment's id: every line of an id has the current record's
            found = [v for (v,) in self._rows(f"SELECT DISTINCT {name} FROM judgments_lines")]
            return sorted(found, key=lambda v: (ALL_DIMENSIONS.index(v) if v in ALL_DIMENSIONS else 99, v))
        if name == "domain":
            query = f"SELECT DISTINCT unnest(domains) AS v FROM {_TABLE} ORDER BY v"
            return [v for (v,) in self._rows(query)]
        column = {"setting": "assistant_setting", "user": "user_id"}.get(name, name)
        if column not in _SUMMARY:
            raise ValueError(f"no explorer filter {name!r}; known: {[f.name for f in fields(Filters)]}")
        return [v for (v,) in self._rows(f"SELECT DISTINCT {column} FROM {_TABLE} ORDER BY {column}")]

    def _condition(self, filters: Filters) -> tuple[str, list[Any]]:
        """The filters as a WHERE clause over the catalog's table (alias `d`) and its parameters."""
        terms, params = ["true"], []
        for column, value in (("assistant_model", filters.assistant_model),
                              ("assistant_setting", filters.setting), ("task_type", filters.task_type),
                              ("user_id", filters.user)):
            if value is not None:
                terms.append(f"d.{column} = ?")
                params.append(value)
        if filters.domain is not None:
            terms.append("list_contains(d.domains, ?)")
            params.append(filters.domain)
        if filters.judge_model is not None:
            terms.append(f"d.pos IN (SELECT pos FROM {self._table(_JUDGED, filters.judge_model)})")
        if filters.dimension is not None:
            low, high = filters.score_range or (float("-inf"), float("inf"))
            judges = [] if filters.judge_model is None else [filters.judge_model]
            terms.append(f"d.pos IN (SELECT pos FROM {self._table(_SCORES, filters.dimension)} "
                         f"WHERE score BETWEEN ? AND ?{' AND judge_model = ?' * bool(judges)})")
            params += [float(low), float(high), *judges]
        for word in filters.search.lower().split():
            terms.append(f"contains({_LABEL}, ?)")
            params.append(word)
        return " AND ".join(terms), params

    def _table(self, query: str, value: str) -> str:
        """A temporary table of `query` for one parameter, made on first use (the catalog reads its store
        once, so it stays true): a judge's or a dimension's, asked again as the user moves a slider."""
        name = self._tables.get((query, value))
        if name is None:
            name = self._tables[(query, value)] = f"explorer_{len(self._tables)}"
            self._con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {query}", [value])
        return name

    def _pass(self, filters: Filters) -> int:
        """Work out which dialogues pass (once per new set of filters: paging reuses it); how many."""
        if filters != self._filters:
            where, params = self._condition(filters)
            self._con.execute(f"CREATE OR REPLACE TEMP TABLE {_PASSING} AS SELECT pos FROM {_TABLE} d "
                              f"WHERE {where}", params)
            self._filters, self._passing = filters, self._one(f"SELECT count(*) FROM {_PASSING}")
        return self._passing

    def count(self, filters: Filters = Filters()) -> int:
        """How many dialogues pass the filters."""
        return self._pass(filters)

    def select(self, filters: Filters = Filters(), *, offset: int = 0, limit: int = PAGE) -> Page:
        """One page of the dialogues that pass every filter, in the catalog's order (user, task,
        assistant, setting, id), from the `offset`-th, and how many pass in all."""
        total, offset = self._pass(filters), max(offset, 0)
        rows = self._rows(f"SELECT {_COLUMNS} FROM {_TABLE} WHERE pos IN (SELECT pos FROM {_PASSING} "
                          "ORDER BY pos LIMIT ? OFFSET ?) ORDER BY pos", [limit, offset])
        return Page(tuple(_summary(row) for row in rows), total, offset)

    def position(self, dialogue_id: str, filters: Filters = Filters()) -> int | None:
        """Where a dialogue stands among those that pass the filters (0 first); None if it does not pass."""
        self._pass(filters)
        found = self._rows(f"SELECT (SELECT count(*) FROM {_PASSING} p WHERE p.pos < t.pos), t.pos IN "
                           f"(SELECT pos FROM {_PASSING}) FROM {_TABLE} t WHERE t.id = ?", [dialogue_id])
        return found[0][0] if found and found[0][1] else None

    def summary(self, dialogue_id: str) -> DialogueSummary:
        """One dialogue's list fields; a KeyError names an id the store does not hold."""
        rows = self._rows(f"SELECT {_COLUMNS} FROM {_TABLE} WHERE id = ?", [dialogue_id])
        if not rows:
            raise KeyError(f"dialogue {dialogue_id!r} is not in the run store at {self.where}")
        return _summary(rows[0])

    @staticmethod
    def label(dialogue: Dialogue | DialogueSummary) -> str:
        """One line naming a dialogue in a list: user, task, assistant, setting, status, turns."""
        return (
            f"user {dialogue.user_id} · {dialogue.task_id} · {dialogue.assistant_model} · "
            f"{dialogue.assistant_setting} · {dialogue.status} · {dialogue.n_turns} turns"
        )

    def dialogue(self, dialogue_id: str) -> Dialogue:
        """One dialogue read in full (turns and all) from its line."""
        rows = self._con.execute(f"SELECT _source, _offset, _length FROM {_TABLE} WHERE id = ?",
                                 [dialogue_id]).df()
        if rows.empty:
            raise KeyError(f"dialogue {dialogue_id!r} is not in the run store at {self.where}")
        (dialogue,) = self.columnar.records(Dialogue, rows)
        assert isinstance(dialogue, Dialogue)
        return dialogue

    def judgments(self, dialogue_id: str, judge_model: str | None = None) -> tuple[Judgment, ...]:
        """A dialogue's current judgments (by `judge_model`, or every judge) read in full, dimension order."""
        judge = "" if judge_model is None else " AND j.judge_model = ?"
        rows = self._con.execute(
            f"SELECT _source, _offset, _length FROM judgments_lines j WHERE j.dialogue_id = ?{judge} "
            f"{_CURRENT} ORDER BY _source, _offset",
            [dialogue_id, *([] if judge_model is None else [judge_model])]).df()
        found = [j for j in self.columnar.records(Judgment, rows) if isinstance(j, Judgment)]
        return tuple(sorted(found, key=_dimension_order))

    def view(self, dialogue_id: str, judge_model: str | None = None) -> DialogueView:
        """One dialogue with its judgments (by `judge_model`, or every judge), context and mentions."""
        dialogue = self.dialogue(dialogue_id)
        judgments = self.judgments(dialogue_id, judge_model)
        if self.context_for is None:
            return DialogueView(
                dialogue,
                judgments,
                None,
                "no benchmark was given: pass benchmark= (or a Session) to see the profile",
            )
        try:
            context = dict(self.context_for(dialogue))
        except (JudgingError, BenchmarkDataError) as exc:
            return DialogueView(dialogue, judgments, None, str(exc))
        return DialogueView(dialogue, judgments, context, mentions=tuple(mentions(context)))

    @staticmethod
    def _comparable(judge_model: str | None) -> tuple[str, list[Any]]:
        """A dialogue (alias `d`) worth a side of the comparison, as SQL."""
        if judge_model is None:
            return f"d.{_JUDGEABLE}", []
        return (f"d.{_JUDGEABLE} AND EXISTS (SELECT 1 FROM judgments_lines j WHERE j.dialogue_id = d.id "
                "AND j.judge_model = ?)", [judge_model])

    def comparable(self, dialogue: Dialogue | DialogueSummary, judge_model: str | None = None) -> bool:
        """A dialogue worth a side of the comparison: it finished (an errored or unfinished one has
        nothing to compare) and, when a judge is named, that judge scored it."""
        if dialogue.status not in JUDGEABLE_STATUSES:
            return False
        if judge_model is None:
            return True
        query = "SELECT 1 FROM judgments_lines WHERE dialogue_id = ? AND judge_model = ? LIMIT 1"
        return bool(self._rows(query, [dialogue.id, judge_model]))

    def runs_of(self, scenario_id: str, judge_model: str | None = None) -> list[DialogueSummary]:
        """The comparable dialogues of one scenario (one per assistant model, setting and run identity)."""
        where, params = self._comparable(judge_model)
        query = f"SELECT {_COLUMNS} FROM {_TABLE} d WHERE d.scenario_id = ? AND {where} ORDER BY pos"
        rows = self._rows(query, [scenario_id, *params])
        return [_summary(row) for row in rows]

    def compared_scenarios(self, judge_model: str | None = None, *, search: str = "",
                           limit: int | None = None) -> list[str]:
        """Scenarios with at least two comparable dialogues (two settings or assistants), in catalog order;
        those whose id holds every word of `search`, the first `limit` of them."""
        where, params = self._comparable(judge_model)
        for word in search.lower().split():
            where += " AND contains(lower(d.scenario_id), ?)"
            params.append(word)
        rows = self._rows(
            f"SELECT scenario_id FROM {_TABLE} d WHERE {where} GROUP BY scenario_id HAVING count(*) >= 2 "
            "ORDER BY min(pos) LIMIT ?", [*params, limit])
        return [s for (s,) in rows]


def _summary(row: Sequence[Any]) -> DialogueSummary:
    values = dict(zip(_SUMMARY, row, strict=True))
    return DialogueSummary(**{**values, "domains": tuple(values["domains"] or ())})


def as_stores(source: Any) -> Stores | None:
    """`source` as the stores a catalog reads (a store, a folder, or a list of them), or None."""
    if isinstance(source, RunStore | str | os.PathLike):
        return source
    if isinstance(source, list | tuple) and source and all(
            isinstance(s, RunStore | str | os.PathLike) for s in source):
        return list(source)
    return None

