"""Your own assistant against the prompt-based one (notebook 05, Table 3): same user agent, same judge,
same scenarios and setting, and the session's prompt set throughout.

Both assistants talk to the user agent in one setting (stored dialogues are reused), the judge scores
task completion, personalization and the assistant's naturalness and coherence, and Table 3 compares
the two from the records made with that prompt set only, so a store that also holds the other prompt
set's dialogues and judgments of the same assistants reads the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from personalens_utils.analysis.ablation import ablation_filter
from personalens_utils.analysis.tables import table3
from personalens_utils.assistants import Assistant
from personalens_utils.data import MD, SD, Benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm.role import Role
from personalens_utils.measures.scores import load_scores
from personalens_utils.outputs.tables import TableResult
from personalens_utils.prompt_sets import KIT, PromptSet
from personalens_utils.runstore.engine import StageReport
from personalens_utils.runstore.identity import DIALOGUE_PROMPTS
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

DIMENSIONS = ("task_completion", "personalization", "naturalness_assistant", "coherence_assistant")
"""What the judge scores for the comparison: Table 3's columns."""


@dataclass(frozen=True)
class AssistantComparison:
    """Who takes part (the resolved roles), in which setting and task types, with whose prompts."""

    user: Role
    judge: Role
    baseline: Assistant
    """The prompt-based assistant (notebook 05's `assistant_model`)."""
    own: Assistant
    """Your assistant (`compare_assistant`)."""
    setting: str = "base+I"
    task_types: Sequence[str] = (SD, MD)
    prompts: PromptSet = KIT


@dataclass(frozen=True)
class ComparisonResult:
    simulated: tuple[StageReport, ...]
    judged: StageReport
    tidy: pd.DataFrame
    """The judgments Table 3 was made from (one prompt set)."""
    table: TableResult


def compare_assistants(benchmark: Benchmark, store: RunStore, comparison: AssistantComparison, *,
                       seed: int = 0) -> ComparisonResult:
    """Simulate, judge and tabulate the comparison on `benchmark`'s users (see the module doc)."""
    c = comparison
    both = (c.baseline, c.own)
    simulated = tuple(
        run_simulation(benchmark, store, c.user.client,
                       SimulationConfig(settings=[c.setting], task_types=list(c.task_types),
                                        user_model=c.user.model, assistant=assistant, prompts=c.prompts))
        for assistant in both)
    users = sorted(benchmark.users)
    keep = [ablation_filter(a.model, [c.setting], users, list(c.task_types)) for a in both]
    made_by = {(a.backend, a.model_id) for a in both}

    def chosen(d: Dialogue) -> bool:
        return d.variant.same_set(c.prompts.variant()) and d.assistant in made_by and any(k(d) for k in keep)

    judged = run_judging(store, c.judge.client, benchmark_contexts(benchmark),
                         JudgingConfig(judge_model=c.judge.model, dimensions=list(DIMENSIONS), select=chosen,
                                       prompts=c.prompts))
    tidy = load_scores(store, judge_model=c.judge.model, user_model=c.user.model,
                       judge_prompt_set=c.prompts.name)
    assistant = pd.Series(list(zip(tidy["assistant_backend"], tidy["assistant_model_id"], strict=True)),
                          index=tidy.index, dtype=object)
    tidy = tidy[tidy["user_id"].isin(users) & tidy["task_type"].isin(list(c.task_types))
                & (tidy[DIALOGUE_PROMPTS] == c.prompts.name) & assistant.isin(made_by)]
    table = table3(tidy, setting=c.setting, models=[a.model for a in both], seed=seed)
    return ComparisonResult(simulated, judged, tidy, table)
