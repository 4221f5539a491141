"""What a judging run is asked to do, as one typed value shared by the runners, the planner and the
cost estimate (so an estimate prices exactly what a run with the same configuration makes)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from personalens_utils.judging.dimensions import DEFAULT_JUDGE_MODEL, JudgingError, judge_model_key
from personalens_utils.llm import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.prompt_sets import KIT, PromptSet
from personalens_utils.prompt_templates import judge as prompts
from personalens_utils.runstore.identity import samples
from personalens_utils.runstore.shards import Shard

Select = Callable[[Any], bool]
"""Keeps a dialogue: planning calls it with a `records.DialogueSummary` (a stored dialogue's fields but its
texts), other readers with a `Dialogue`; both answer the same attributes."""


@dataclass(frozen=True)
class JudgingConfig:
    """A judging run: who judges what, with whose prompts, and the run's limits.

    `select` keeps the dialogues to judge (`dialogue_filter`); `shard="i/n"` one machine's share;
    `retry_errors` redoes error records; a judge on a real backend leaves offline-made dialogues alone
    unless `offline_dialogues=True` (False: never; None: judge them on other backends); `batch` sends
    the calls through Message Batches, polled every `poll_interval_s`, resubmitting failed entries up
    to `max_rounds` times and returning after `max_wait_s`; `max_cost_usd` stops new online calls;
    `judge_samples=m` judges each dialogue m times, independently (judge samples 0..m-1, each its own
    record and its own calls)."""

    judge_model: str = DEFAULT_JUDGE_MODEL
    dimensions: Iterable[str] | None = None
    prompt_version: str = prompts.JUDGE_PROMPT_VERSION
    """The kit's judge prompt version (a set with its own judge prompts versions them itself)."""
    prompts: PromptSet = KIT
    select: Select | None = None
    shard: str | Shard | None = None
    retry_errors: bool = True
    offline_dialogues: bool | None = None
    batch: bool = False
    max_cost_usd: float | None = None
    poll_interval_s: float = 60.0
    max_rounds: int = 3
    max_wait_s: float | None = None
    judge_samples: int = 1

    def __post_init__(self) -> None:
        samples(self.judge_samples, "judge_samples")

    def judge_as(self, judge: Role) -> Role:
        """The judge as its records key it: `judge` (the role that calls, on its backend and endpoint) under
        the registry's name of `judge_model`, so aliases share records; its id too is the one that name
        resolves to (on a backend the registry does not know, an alias would keep its own). A role of another
        model is refused."""
        key = judge_model_key(self.judge_model)
        if judge_model_key(judge.model) != key:
            raise JudgingError(f"the judge {judge} is not the configured judge_model {self.judge_model!r}")
        return replace(judge, model=key, model_id=Role.of(key, judge.backend, judge.endpoint).model_id)

    def judge_on(self, client: LLMClient) -> Role:
        """The configured judge called through `client`, as its records key it."""
        return Role.on(client, judge_model_key(self.judge_model))
