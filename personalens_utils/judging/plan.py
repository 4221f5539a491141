"""What judging has left to do: which dialogues, which of their dimensions, and at what cost.

Both runners (online and batch) and the cost estimate plan from the same functions, so an
estimate counts exactly the judgments a run with the same arguments would make.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from personalens_utils.data import UsersArg, resolve_users
from personalens_utils.llm.budget import CostEstimate, Tally
from personalens_utils.prompts import judge as prompts
from personalens_utils.shards import Shard
from personalens_utils.store import RunStore

from .dimensions import (
    DEFAULT_JUDGE_MODEL,
    Dimension,
    JudgingError,
    dimensions_from,
    judge_model_key,
    judgment_id,
)
from .requests import ContextFor, dimension_requests

DIALOGUES = "dialogues"
JUDGMENTS = "judgments"
JUDGEABLE_STATUSES = ("terminated", "turn_cap")
ANSWER_TOKENS = 300
"""Answer length assumed by `estimate_judging` (a score line and a few sentences of justification)."""

Select = Callable[[Mapping[str, Any]], bool]


def judgeable(dialogues: Iterable[Mapping[str, Any]], select: Select | None) -> list[Mapping[str, Any]]:
    """The finished dialogues `select` keeps (all finished ones when it is None)."""
    return [d for d in dialogues if d.get("status") in JUDGEABLE_STATUSES and (select is None or select(d))]


def pending_work(
    dialogues: Iterable[Mapping[str, Any]],
    done: set[str],
    dimensions: Sequence[Dimension],
    judge_model: str,
    prompt_version: str,
) -> list[tuple[Mapping[str, Any], list[Dimension]]]:
    """(dialogue, dimensions still to judge) for every dialogue with something left to do."""
    model_key = judge_model_key(judge_model)
    work = []
    for dialogue in dialogues:
        todo = [
            d for d in dimensions
            if judgment_id(dialogue["id"], d.name, model_key, prompt_version) not in done
        ]
        if todo:
            work.append((dialogue, todo))
    return work


def check_dialogue(dialogue: Mapping[str, Any], store: RunStore) -> None:
    """A dialogue record has what judging reads; otherwise a JudgingError names the record and field."""
    where = f"{store.path(DIALOGUES)}: dialogue {dialogue.get('id')!r}"
    for key in ("id", "scenario_id", "turns"):
        if key not in dialogue:
            raise JudgingError(f"{where} has no {key!r}")
    turns = dialogue["turns"]
    if not isinstance(turns, list):
        raise JudgingError(f"{where}: 'turns' must be a list, got {type(turns).__name__}")
    for index, turn in enumerate(turns):
        if not (
            isinstance(turn, Mapping)
            and turn.get("role") in ("user", "assistant")
            and isinstance(turn.get("content"), str)
        ):
            raise JudgingError(
                f"{where}: turns[{index}] must be {{'role': 'user' or 'assistant', 'content': str}}, "
                f"got {turn!r}"
            )


def dialogue_filter(users: UsersArg = None, task_types: Iterable[str] | None = None) -> Select:
    """`select` for `run_judging`: dialogues of the given users (a sample name or indices) and task types."""
    wanted_users = resolve_users(users)
    user_set = set(wanted_users) if wanted_users is not None else None
    type_set = set(task_types) if task_types is not None else None
    unknown = sorted((type_set or set()) - {"SD", "MD"})
    if unknown:
        raise JudgingError(f"unknown task types {unknown}; use 'SD' and/or 'MD'")

    def select(dialogue: Mapping[str, Any]) -> bool:
        return (user_set is None or dialogue.get("user_id") in user_set) and (
            type_set is None or dialogue.get("task_type") in type_set
        )

    return select


def sharded(select: Select | None, shard: str | Shard | None) -> Select | None:
    """`select` narrowed to the dialogues of one shard ("i/n"); all judgments of a dialogue go together."""
    part = Shard.parse(shard)
    if part is None:
        return select
    return lambda dialogue: part.owns(dialogue["id"]) and (select is None or select(dialogue))


def judged_users(store: RunStore, select: Select | None = None) -> list[int]:
    """User indices of the judgeable dialogues in the store: the profiles judging needs loaded."""
    return sorted({int(d["user_id"]) for d in judgeable(store.records(DIALOGUES), select)})


def estimate_judging(
    store: RunStore,
    context_for: ContextFor,
    *,
    judge_model: str = DEFAULT_JUDGE_MODEL,
    dimensions: Iterable[str] | None = None,
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION,
    select: Select | None = None,
    shard: str | Shard | None = None,
    backend: str = "",
    batch: bool = False,
    answer_tokens: int = ANSWER_TOKENS,
    sample: int = 300,
) -> CostEstimate:
    """Calls, tokens and cost of the judgments `run_judging` with these arguments would still make.

    The prompts are built for up to `sample` of the dialogues to judge and scaled up per dimension;
    answers are assumed to be `answer_tokens` long and format reminders are not counted.
    """
    select = sharded(select, shard)
    dims = dimensions_from(dimensions)
    done = store.ids(JUDGMENTS, include_errors=False)
    work = pending_work(judgeable(store.records(DIALOGUES), select), done, dims, judge_model, prompt_version)
    tally = Tally(backend, batch=batch)
    contexts: dict[str, Mapping[str, Any]] = {}
    for dim in dims:
        wanted = [dialogue for dialogue, todo in work if dim in todo]
        chosen = wanted[:: max(1, len(wanted) // sample)]
        for dialogue in chosen:
            if dialogue["id"] not in contexts:
                contexts[dialogue["id"]] = context_for(dialogue)
            context = contexts[dialogue["id"]]
            tally.add_requests("judging", dimension_requests(dim, context, judge_model), answer_tokens,
                               weight=len(wanted) / len(chosen))
    judgments = sum(len(todo) for _, todo in work)
    return tally.estimate([
        f"{judgments} judgments of {len(work)} dialogues to make; prompts built for {len(contexts)} of them",
        f"answers assumed {answer_tokens} tokens; the format reminder after an unreadable answer not counted",
        "turn-level personalization: one call per assistant turn",
    ])
