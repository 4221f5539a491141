"""What the explorer reads: a run store's dialogues and judgments, filtered, with each dialogue's context.

No widgets here, so the filtering and the views can be tested and reused without a front end.
The profile and task of a dialogue come from the benchmark it was simulated on (the judge's own
view of it, `judging.benchmark_contexts`); the places where the assistant applied a preference
are found by the offline judge's whole-word matching (`llm.offline.judge.mentions`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from personalens_utils.data import BenchmarkDataError
from personalens_utils.judging import ALL_DIMENSIONS, JUDGEABLE_STATUSES, JudgingError, benchmark_contexts
from personalens_utils.llm.offline.judge import Mention, mentions
from personalens_utils.records import Dialogue, Judgment
from personalens_utils.store import RunStore

ANY = None
"""A filter left open."""

ContextFor = Callable[[Dialogue], Mapping[str, Any]]


@dataclass(frozen=True)
class Filters:
    """What to show: each field None (any) or the one value wanted; `score_range` applies to `dimension`."""

    assistant_model: str | None = ANY
    setting: str | None = ANY
    task_type: str | None = ANY
    domain: str | None = ANY
    user: int | None = ANY
    judge_model: str | None = ANY
    dimension: str | None = ANY
    score_range: tuple[float, float] | None = None


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


class Catalog:
    """The dialogues and judgments of one run store, read once, for filtering and viewing.

    `context_for` gives a dialogue's task and profile (e.g. `judging.benchmark_contexts(benchmark)`);
    without it the views say where the profile would come from.
    """

    def __init__(self, store: RunStore, context_for: ContextFor | None = None):
        self.store = store
        self.context_for = context_for
        self.dialogues: list[Dialogue] = sorted(
            store.read(Dialogue),
            key=lambda d: (d.user_id, d.task_id, d.assistant_model, d.assistant_setting, d.id),
        )
        self.by_id = {d.id: d for d in self.dialogues}
        judged: dict[str, list[Judgment]] = defaultdict(list)
        for judgment in store.read(Judgment):
            judged[judgment.dialogue_id].append(judgment)
        self.judgments = {k: tuple(sorted(v, key=_dimension_order)) for k, v in judged.items()}

    @classmethod
    def of(cls, store: RunStore | Any, benchmark: Any = None) -> Catalog:
        """A catalog of a store with the benchmark's contexts, if one is given."""
        return cls(store, benchmark_contexts(benchmark) if benchmark is not None else None)

    def values(self, name: str) -> list[Any]:
        """The distinct values a filter can take in this store, sorted."""
        if name == "domain":
            return sorted({d for dialogue in self.dialogues for d in dialogue.domains})
        if name in ("judge_model", "dimension"):
            return sorted(
                {getattr(j, name) for js in self.judgments.values() for j in js},
                key=lambda v: (ALL_DIMENSIONS.index(v) if v in ALL_DIMENSIONS else 99, v),
            )
        attribute = {"setting": "assistant_setting", "user": "user_id"}.get(name, name)
        return sorted({getattr(d, attribute) for d in self.dialogues})

    def _scored(self, dialogue: Dialogue, filters: Filters) -> bool:
        if filters.dimension is None:
            return True
        low, high = filters.score_range or (float("-inf"), float("inf"))
        return any(
            j.dimension == filters.dimension
            and j.score is not None
            and low <= j.score <= high
            and filters.judge_model in (None, j.judge_model)
            for j in self.judgments.get(dialogue.id, ())
        )

    def select(self, filters: Filters = Filters()) -> list[Dialogue]:
        """The dialogues that pass every filter, in the catalog's order (user, task, assistant, setting)."""
        out = []
        for d in self.dialogues:
            if filters.assistant_model not in (None, d.assistant_model):
                continue
            if filters.setting not in (None, d.assistant_setting) or filters.task_type not in (
                None,
                d.task_type,
            ):
                continue
            if filters.domain is not None and filters.domain not in d.domains:
                continue
            if filters.user not in (None, d.user_id):
                continue
            if filters.judge_model is not None and not any(
                j.judge_model == filters.judge_model for j in self.judgments.get(d.id, ())
            ):
                continue
            if self._scored(d, filters):
                out.append(d)
        return out

    @staticmethod
    def label(dialogue: Dialogue) -> str:
        """One line naming a dialogue in a list: user, task, assistant, setting, status, turns."""
        return (
            f"user {dialogue.user_id} · {dialogue.task_id} · {dialogue.assistant_model} · "
            f"{dialogue.assistant_setting} · {dialogue.status} · {dialogue.n_turns} turns"
        )

    def view(self, dialogue_id: str, judge_model: str | None = None) -> DialogueView:
        """One dialogue with its judgments (by `judge_model`, or every judge), context and mentions."""
        dialogue = self.by_id[dialogue_id]
        judgments = tuple(
            j for j in self.judgments.get(dialogue_id, ()) if judge_model in (None, j.judge_model)
        )
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

    def comparable(self, dialogue: Dialogue, judge_model: str | None = None) -> bool:
        """A dialogue worth a side of the comparison: it finished (an errored or unfinished one has
        nothing to compare) and, when a judge is named, that judge scored it."""
        if dialogue.status not in JUDGEABLE_STATUSES:
            return False
        judges = {j.judge_model for j in self.judgments.get(dialogue.id, ())}
        return judge_model is None or judge_model in judges

    def runs_of(self, scenario_id: str, judge_model: str | None = None) -> list[Dialogue]:
        """The comparable dialogues of one scenario (one per assistant model, setting and run identity)."""
        return [d for d in self.dialogues if d.scenario_id == scenario_id and self.comparable(d, judge_model)]

    def compared_scenarios(
        self, dialogues: Iterable[Dialogue] | None = None, judge_model: str | None = None
    ) -> list[str]:
        """Scenarios with at least two comparable dialogues (two settings or assistants), in catalog order."""
        count: dict[str, int] = defaultdict(int)
        for d in self.dialogues if dialogues is None else dialogues:
            count[d.scenario_id] += self.comparable(d, judge_model)
        return [s for s, n in count.items() if n >= 2]
