"""What judging has left to do: which dialogues, which of their dimensions, and at what cost.

Both runners (online and batch) and the cost estimate plan with `plan_judging` (the stage engine's
planning: a work item is one dialogue, its record ids the judgments still to make), so an
estimate counts exactly the judgments a run with the same arguments would make. A judgment belongs
to its judge's backend: judging on another backend makes new records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from personalens_utils import engine
from personalens_utils.data import UsersArg, resolve_users
from personalens_utils.engine import Plan
from personalens_utils.identity import Role, judgment_id, samples
from personalens_utils.llm.budget import CostEstimate, Tally
from personalens_utils.llm.registry import KNOWN_BACKENDS
from personalens_utils.prompting import KIT, PromptSet
from personalens_utils.records import Dialogue, Judgment
from personalens_utils.shards import Shard
from personalens_utils.store import RunStore

from .config import JudgingConfig, Select
from .dimensions import Dimension, JudgingError, dimensions_from, judge_model_key
from .requests import ContextFor, dimension_requests

JUDGEABLE_STATUSES = ("terminated", "turn_cap")
REAL_BACKENDS = tuple(b for b in KNOWN_BACKENDS if b != "offline")
"""Backends of language models; a judge on one skips offline-made dialogues by default."""
ANSWER_TOKENS = 300
"""Answer length assumed by `estimate_judging` (a score line and a few sentences of justification)."""

def judgeable(dialogues: Iterable[Dialogue], select: Select | None) -> list[Dialogue]:
    """The finished dialogues `select` keeps (all finished ones when it is None)."""
    return [d for d in dialogues if d.status in JUDGEABLE_STATUSES and (select is None or select(d))]


@dataclass
class JudgingPlan:
    """The dialogues in the store, those to judge, and the engine's plan over them."""

    dialogues: list[Dialogue]
    to_judge: list[Dialogue]
    dimensions: list[Dimension]
    model_key: str
    prompt_version: str
    backend: str
    plan: Plan[Dialogue]
    ids: dict[tuple[str, str, int], str]
    """(dialogue id, dimension name, judge sample) -> the id of its judgment in the store."""
    prompts: PromptSet = KIT
    """Whose judge prompts (`PromptSet.judge_set` says which set scores each dimension)."""
    skipped_offline: int = 0
    """Finished dialogues made on the offline backend that a real judge left alone (`offline_dialogues`)."""
    judge_samples: int = 1
    """How many independent judgments each dialogue gets on each dimension (`JudgingConfig`)."""

    def todo(self, dialogue_id: str, ids: Sequence[str]) -> list[tuple[Dimension, int]]:
        """The (dimension, judge sample) pairs of a dialogue whose judgment ids are among `ids`."""
        wanted = set(ids)
        return [(d, k) for k in range(self.judge_samples) for d in self.dimensions
                if self.ids[dialogue_id, d.name, k] in wanted]

    @property
    def judgments(self) -> int:
        return sum(len(item.ids) for item in self.plan.items)

    def details(self) -> dict[str, Any]:
        """What a judging report shows beside the engine's counts."""
        return {
            "judge_model": self.model_key, "judge_backend": self.backend,
            "prompt_version": self.prompt_version,
            **self.prompts.judge_details(self.dimensions),
            "dimensions": ", ".join(d.name for d in self.dimensions),
            "dialogues_in_store": len(self.dialogues),
            "dialogues_judgeable": len(self.to_judge),
            "dialogues_skipped_error": sum(d.status not in JUDGEABLE_STATUSES for d in self.dialogues),
            "dialogues_skipped_offline": self.skipped_offline,
            "judgments_done_before": (len(self.to_judge) * len(self.dimensions) * self.judge_samples
                                      - self.judgments),
            **({"judge_samples": self.judge_samples} if self.judge_samples > 1 else {}),
        }


def plan_judging(store: RunStore, config: JudgingConfig, backend: str) -> JudgingPlan:
    """Every judgeable dialogue with a judgment by the configured judge on `backend` still to make on
    its dimensions (errored ones when asked), with the judge prompts of `config.prompts`.
    A judge on a real backend (`REAL_BACKENDS`) leaves the dialogues made on the offline backend alone
    (money spent on rule-based text) unless `offline_dialogues=True`; other judges (offline, test
    doubles) judge them (False: never)."""
    dims = dimensions_from(config.dimensions)
    model_key = judge_model_key(config.judge_model)
    dialogues = store.read(Dialogue)
    to_judge = judgeable(dialogues, sharded(config.select, config.shard))
    skips = _skips_offline(backend, config.offline_dialogues)
    skipped = sum(d.made_offline for d in to_judge) if skips else 0
    if skipped:
        to_judge = [d for d in to_judge if not d.made_offline]
    judge = Role.of(model_key, backend)
    ids = {}
    judge_samples = samples(config.judge_samples, "judge_samples")
    for dim in dims:
        for k in judge_samples:
            variant = config.prompts.judge_variant(dim, config.prompt_version, k)
            for d in to_judge:
                ids[d.id, dim.name, k] = judgment_id(d.id, dim.name, judge=judge, variant=variant)
    candidates = [([ids[d.id, dim.name, k] for k in judge_samples for dim in dims], d) for d in to_judge]
    planned = engine.plan(store, Judgment, candidates, retry_errors=config.retry_errors)
    return JudgingPlan(dialogues, to_judge, dims, model_key, config.prompt_version, backend, planned, ids,
                       prompts=config.prompts, skipped_offline=skipped, judge_samples=len(judge_samples))


OFFLINE_PARAMETER = "judge_offline_dialogues"
"""The notebook parameter that makes a real judge judge offline-made dialogues too."""


def skipped_offline_note(details: Mapping[str, Any]) -> str:
    """One line saying how many offline-made dialogues a real judge left alone, and how to judge them
    anyway; empty when none were."""
    n = details.get("dialogues_skipped_offline", 0)
    if not n:
        return ""
    return (f"{n} finished dialogue(s) made on the offline backend were not judged by the "
            f"{details.get('judge_backend')} judge; set {OFFLINE_PARAMETER}=True (run_judging(..., "
            "offline_dialogues=True)) to judge them too.")


def dialogue_filter(users: UsersArg = None, task_types: Iterable[str] | None = None) -> Select:
    """`select` for `run_judging`: dialogues of the given users (a sample name or indices) and task types."""
    wanted_users = resolve_users(users)
    user_set = set(wanted_users) if wanted_users is not None else None
    type_set = set(task_types) if task_types is not None else None
    unknown = sorted((type_set or set()) - {"SD", "MD"})
    if unknown:
        raise JudgingError(f"unknown task types {unknown}; use 'SD' and/or 'MD'")

    def select(dialogue: Dialogue | Mapping[str, Any]) -> bool:
        """Also takes a row with `user_id` and `task_type` (notebook 04 filters score frames with it)."""
        row = dialogue if isinstance(dialogue, Mapping) else {"user_id": dialogue.user_id,
                                                               "task_type": dialogue.task_type}
        return (user_set is None or row["user_id"] in user_set) and (
            type_set is None or row["task_type"] in type_set
        )

    return select


def sharded(select: Select | None, shard: str | Shard | None) -> Select | None:
    """`select` narrowed to the dialogues of one shard ("i/n"); all judgments of a dialogue go together."""
    part = Shard.parse(shard)
    if part is None:
        return select
    return lambda dialogue: part.owns(dialogue.id) and (select is None or select(dialogue))


def judged_users(store: RunStore, select: Select | None = None, *, backend: str = "offline",
                 offline_dialogues: bool | None = None) -> list[int]:
    """User indices of the dialogues a judge on `backend` would judge: the profiles judging needs loaded."""
    skip = _skips_offline(backend, offline_dialogues)
    found = judgeable(store.read(Dialogue), select)
    return sorted({d.user_id for d in found if not (skip and d.made_offline)})


def skipped_offline_line(store: RunStore, select: Select | None = None, *, backend: str,
                         offline_dialogues: bool | None = None) -> str:
    """`skipped_offline_note` before any judging: how many offline-made dialogues a judge on `backend`
    leaves alone; empty when none."""
    if not _skips_offline(backend, offline_dialogues):
        return ""
    n = sum(d.made_offline for d in judgeable(store.read(Dialogue), select))
    return skipped_offline_note({"dialogues_skipped_offline": n, "judge_backend": backend})


def _skips_offline(backend: str, offline_dialogues: bool | None) -> bool:
    return not (backend not in REAL_BACKENDS if offline_dialogues is None else offline_dialogues)


def estimate_judging(store: RunStore, context_for: ContextFor, config: JudgingConfig | None = None, *,
                     backend: str = "", answer_tokens: int = ANSWER_TOKENS, sample: int = 300,
                     ) -> CostEstimate:
    """Calls, tokens and cost of the judgments `run_judging` with this configuration would still make
    (at batch prices when `config.batch`).

    `backend` is the judge's: it decides which judgments are already stored and prices the calls.
    The prompts are built for up to `sample` of the dialogues to judge and scaled up per dimension;
    answers are assumed to be `answer_tokens` long and format reminders are not counted.
    """
    config = config or JudgingConfig()
    planned = plan_judging(store, config, backend)
    work = [(item.payload, planned.todo(item.payload.id, item.ids)) for item in planned.plan.items]
    tally = Tally(backend, batch=config.batch)
    contexts: dict[str, Mapping[str, Any]] = {}
    for dim in planned.dimensions:
        wanted = [dialogue for dialogue, todo in work for d, _ in todo if d == dim]
        chosen = wanted[:: max(1, len(wanted) // sample)]
        for dialogue in chosen:
            if dialogue.id not in contexts:
                contexts[dialogue.id] = context_for(dialogue)
            context = contexts[dialogue.id]
            calls = dimension_requests(dim, context, config.judge_model, config.prompts)
            tally.add_requests("judging", calls, answer_tokens, weight=len(wanted) / len(chosen))
    return tally.estimate([
        f"{planned.judgments} judgments of {len(work)} dialogues to make; prompts built for {len(contexts)} "
        "of them",
        f"answers assumed {answer_tokens} tokens; the format reminder after an unreadable answer not counted",
        "turn-level personalization: one call per assistant turn",
        *filter(None, [skipped_offline_note(planned.details())]),
    ])
