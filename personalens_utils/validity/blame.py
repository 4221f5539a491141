"""Blame for each failure: which party caused a dialogue's poor result (docs/validity.md, "Blame").

A dialogue that failed its task or scored low on personalization (`BlameConfig.low_personalization`)
is shown to a reviewer: a role like the judge, on any backend (the notebook's `reviewer_model`,
resolved by the session), given the kit's reviewer prompt through the run's prompt set
(`PromptSet.review_request`) with the judge's verdicts and reasons. The reviewer names the assistant,
the user agent, the judge or nobody, the fault and the message that shows it. The reviewer is never
the judge under review: a reviewer that is the judge's model on the judge's backend is refused
(`ReviewerIsJudge`).

Each review is a `Blame` record in its own table of the run store (`blames.jsonl`), its id made from
the dialogue, the reviewer, the judge and the reviewer prompt's version (`identity.blame_id`), and
the reviews run on the stage engine: resumable, budgeted, an llm failure stored as an error record
and redone by the next run. On the offline backend the reviewer answers by the plain rules of
`validity.offline`; the planted-fault tests (tests/test_validity_blame.py) check that they find
the party that was made to fail.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from personalens_utils.analysis.tables import LeftOut, table3_beside
from personalens_utils.base.errors import KitError
from personalens_utils.data import Benchmark
from personalens_utils.judging import DIMENSIONS, JUDGEABLE_STATUSES
from personalens_utils.judging.dimensions import judge_model_key
from personalens_utils.judging.requests import ContextFor
from personalens_utils.llm import Request
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.measures.display import MAIN_SETTING, provenance_note
from personalens_utils.measures.scores import PERSONALIZATION, TASK_COMPLETION
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.prompt_sets import KIT, PromptSet
from personalens_utils.prompt_sets.review import reminder_request
from personalens_utils.prompt_templates.review import FAULTS, PARTIES
from personalens_utils.runstore import engine, run_card
from personalens_utils.runstore.engine import Asked, Item, StageReport, UnreadableAnswer
from personalens_utils.runstore.identity import blame_id
from personalens_utils.runstore.records import Blame, Dialogue, Judgment, Record
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation, with_assistant
from personalens_utils.simulation.settings import AssistantSetting

STAGE = "blame"
REVIEWED = (TASK_COMPLETION, PERSONALIZATION)
"""The judge's dimensions a review reads: a dialogue fails on either."""
PARTY_NAMES = {"assistant": "assistant", "user_agent": "user agent", "judge": "judge", "nobody": "nobody"}
"""Each party as a table names it."""
SELECTIONS = ("failed", "all")


class BlameError(KitError, ValueError):
    """A review that cannot be run or read as asked: no judgments to review, an unknown selection,
    several reviewers or judges in one table."""


class ReviewerIsJudge(BlameError):
    """The reviewer named is the judge under review (same model on the same backend)."""


@dataclass(frozen=True)
class BlameConfig:
    """What a review run does: which dialogues (`which`: "failed", those whose task-completion verdict
    is False or whose personalization is at most `low_personalization`; "all": every judged one), with
    which prompt set (the judge's verdicts of that set are read; the reviewer prompt is the kit's),
    asked how many times at most when an answer is unreadable, under which spending limit."""

    which: str = "failed"
    low_personalization: float = 2.0
    prompts: PromptSet = KIT
    attempts: int = 2
    retry_errors: bool = True
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        if self.which not in SELECTIONS:
            raise BlameError(f"BlameConfig.which must be one of {list(SELECTIONS)}, got {self.which!r}")


@dataclass(frozen=True)
class Review:
    """A reviewer's answer, read: the party, its fault, the message number (or None), and why."""

    party: str
    fault: str
    turn: int | None
    explanation: str


_LINE = re.compile(r"^[ \t*]*(PARTY|FAULT|TURN|EXPLANATION)[ \t*]*:[ \t*]*(.*?)[ \t*]*$",
                   re.IGNORECASE | re.MULTILINE)


def parse_review(text: str) -> Review:
    """The four labelled lines of a reviewer's answer; `UnreadableAnswer` naming what is wrong."""
    found: dict[str, str] = {}
    for label, value in _LINE.findall(text):
        found.setdefault(label.upper(), value)
    missing = [label for label in ("PARTY", "FAULT", "TURN", "EXPLANATION") if label not in found]
    if missing:
        raise UnreadableAnswer(f"no {', '.join(missing)} line")
    party = found["PARTY"].lower().strip(" .").replace(" ", "_")
    if party not in PARTIES:
        raise UnreadableAnswer(f"PARTY must be one of {list(PARTIES)}, got {found['PARTY']!r}")
    fault = found["FAULT"].lower().strip(" .").replace(" ", "_")
    if fault not in FAULTS[party]:
        raise UnreadableAnswer(f"FAULT of the {party} must be one of {list(FAULTS[party])}, "
                               f"got {found['FAULT']!r}")
    turn_text = found["TURN"].lower().strip(" .")
    if turn_text not in ("none", "n/a", "-") and not turn_text.isdigit():
        raise UnreadableAnswer(f"TURN must be a message number or none, got {found['TURN']!r}")
    turn = int(turn_text) if turn_text.isdigit() else None
    return Review(party, fault, turn, found["EXPLANATION"])


def check_reviewer(reviewer: Role, judge: Role) -> tuple[Role, Role]:
    """The reviewer's and the judge's identities; a reviewer that is the judge is refused."""
    mine = Role.of(judge_model_key(reviewer.model), reviewer.backend)
    theirs = Role.of(judge_model_key(judge.model), judge.backend)
    if mine == theirs:
        raise ReviewerIsJudge(f"reviewer_model={reviewer.spec} is the judge under review ({judge.spec}); "
                              "name another model (or backend) to review the judge's verdicts")
    return mine, theirs


def verdicts_of(store: RunStore, judge: Role, prompts: PromptSet = KIT) -> dict[str, dict[str, Judgment]]:
    """The judge's first-sample judgments of the reviewed dimensions, by dialogue and dimension, made
    with the judge prompts `prompt_templates` gives each dimension."""
    sets = {name: prompts.judge_set(DIMENSIONS[name]).name for name in REVIEWED}
    found: dict[str, dict[str, Judgment]] = {}
    for j in store.read(Judgment):
        mine = j.judge_model == judge.model and j.judge == (judge.backend, judge.model_id) and not j.is_error
        if mine and j.dimension in sets and j.sample == 0 and j.prompt_set == sets[j.dimension]:
            found.setdefault(j.dialogue_id, {})[j.dimension] = j
    return found


def failed(verdicts: Mapping[str, Judgment], low_personalization: float) -> bool:
    """Whether the judge found the task not completed or personalization at most `low_personalization`."""
    completion, personal = verdicts.get(TASK_COMPLETION), verdicts.get(PERSONALIZATION)
    low = personal is not None and personal.score is not None and personal.score <= low_personalization
    return bool((completion is not None and completion.score == 0) or low)


def review_context(context: Mapping[str, Any], verdicts: Mapping[str, Judgment]) -> dict[str, Any]:
    """A judge context with the judge's verdicts: what the reviewer is shown."""
    shown = {name: {"score": verdicts[name].score, "explanation": verdicts[name].explanation}
             for name in REVIEWED if name in verdicts}
    return {**context, "verdicts": shown}


def blame_record(dialogue_id: str, reviewer: Role, judge: Role, prompts: PromptSet,
                 asked: Asked[Review]) -> Blame:
    """One review as a record: "ok" with the party, "missing" when no answer was readable, "error" on an
    llm failure."""
    common: dict[str, Any] = {
        "dialogue_id": dialogue_id, "reviewer_model": reviewer.model, "variant": prompts.review_variant(),
        "backend": reviewer.backend, "reviewer_model_id": reviewer.model_id, "judge_model": judge.model,
        "judge_backend": judge.backend, "judge_model_id": judge.model_id,
        "raw": "\n---\n".join(asked.answers), "attempts": len(asked.answers)}
    if asked.error is not None:
        return Blame(**common, status="error", explanation=asked.error)
    if asked.value is None:
        return Blame(**common, status="missing", explanation="; ".join(asked.problems))
    found = asked.value
    return Blame(**common, status="ok", party=found.party, fault=found.fault, turn=found.turn,
                 explanation=found.explanation)


def run_blame(store: RunStore, reviewer: Role, judge: Role, context_for: ContextFor,
              config: BlameConfig | None = None) -> StageReport:
    """Review every judged dialogue `config.which` selects, storing one `Blame` each (docs/validity.md).

    `judge` is the judge whose verdicts are reviewed (the session's `judge_model` role), `reviewer` the
    one who reviews (`reviewer_model`); `context_for` gives a dialogue's judge context
    (`judging.benchmark_contexts`). A rerun skips what is stored and redoes errors.
    """
    config = config or BlameConfig()
    mine, theirs = check_reviewer(reviewer, judge)
    verdicts = verdicts_of(store, theirs, config.prompts)
    if not verdicts:
        raise BlameError(f"the run store {store.root} holds no judgments by {theirs.model} on "
                         f"{theirs.backend} ({theirs.model_id}) to review; run the judging stage first")
    dialogues = {d.id: d for d in store.read(Dialogue) if d.id in verdicts and d.status in JUDGEABLE_STATUSES}
    chosen = sorted(d for d in dialogues
                    if config.which == "all" or failed(verdicts[d], config.low_personalization))
    variant = config.prompts.review_variant()
    candidates = [([blame_id(d, reviewer=mine, judge=theirs, variant=variant)], d) for d in chosen]
    plan = engine.plan(store, Blame, candidates, retry_errors=config.retry_errors)

    async def work(llm: LLMClient, item: Item[str]) -> list[Record]:
        dialogue = dialogues[item.payload]
        context = review_context(context_for(dialogue), verdicts[item.payload])
        request = config.prompts.review_request(context, reviewer.model)

        def again(asked: Request, answer: str, problem: str, attempt: int) -> Request:
            return reminder_request(asked, answer, problem)

        asked = await engine.ask_parsed(llm, request, parse_review, again, attempts=config.attempts)
        return [blame_record(item.payload, mine, theirs, config.prompts, asked)]

    details = {"reviewer": f"{mine.model} ({mine.backend}: {mine.model_id})",
               "judge": f"{theirs.model} ({theirs.backend}: {theirs.model_id})", "which": config.which,
               "judged_dialogues": len(dialogues), "selected": len(chosen)}
    report = StageReport(STAGE, details=details)
    options = engine.StageOptions(max_cost_usd=config.max_cost_usd, desc=f"blame ({mine.model})")
    report = engine.run_stage(engine.Stage(STAGE, Blame, work), store, reviewer.client, plan, report=report,
                              options=options)
    run_card.note_stage(store, report, run_card.role_entry(mine),
                        prompt_version=variant.prompt_version,
                        reviewed_judges=[f"{theirs.model} ({theirs.model_id})"])
    return report


BLAME_COLUMNS = ["dialogue_id", "scenario_id", "sample", "user_id", "task_id", "task_type", "user_model",
                 "assistant_model", "assistant_setting", "reviewer_model", "reviewer_backend", "judge_model",
                 "status", "party", "fault", "turn"]


def blame_frame(store: RunStore, *, reviewer_model: str | None = None,
                judge_model: str | None = None) -> pd.DataFrame:
    """One row per stored review (errors left out), with its dialogue's models, setting and task. With
    several reviewers or judges in the store, name the one to read (`reviewer_model`, `judge_model`)."""
    blames = [b for b in store.read(Blame) if not b.is_error
              and (reviewer_model is None or b.reviewer_model == judge_model_key(reviewer_model))
              and (judge_model is None or b.judge_model == judge_model_key(judge_model))]
    pairs = sorted({(b.reviewer_model, b.backend, b.judge_model, b.judge_backend) for b in blames})
    if len(pairs) > 1:
        raise BlameError(f"the run store {store.root} holds reviews by several reviewers or of several "
                         f"judges {pairs}; name reviewer_model and judge_model")
    wanted = {b.dialogue_id for b in blames}
    dialogues = {d.id: d for d in store.read(Dialogue) if d.id in wanted}
    rows = []
    for b in blames:
        d = dialogues[b.dialogue_id]
        rows.append({"dialogue_id": b.dialogue_id, "scenario_id": d.scenario_id, "sample": d.sample,
                     "user_id": d.user_id, "task_id": d.task_id,
                     "task_type": d.task_type, "user_model": d.user_model,
                     "assistant_model": d.assistant_model,
                     "assistant_setting": d.assistant_setting, "reviewer_model": b.reviewer_model,
                     "reviewer_backend": b.backend, "judge_model": b.judge_model, "status": b.status,
                     "party": b.party, "fault": b.fault, "turn": b.turn})
    frame = pd.DataFrame(rows, columns=BLAME_COLUMNS).sort_values("dialogue_id", ignore_index=True)
    frame.attrs["origin"] = f"run store {store.root.name}/"
    frame.attrs["backends"] = ({b.backend for b in blames} | {b.judge_backend for b in blames}
                               | {d.assistant_backend for d in dialogues.values()}
                               | {d.user_backend for d in dialogues.values()})
    return frame


def blame_rates(frame: pd.DataFrame) -> TableResult:
    """Who caused the reviewed failures: each party's share (%) per assistant model and per user agent."""
    if frame.empty:
        raise BlameError("no reviews to count: run run_blame first (or the selection reviewed nothing)")
    rows = []
    for column, role in (("assistant_model", "Assistant"), ("user_model", "User agent")):
        for model, group in frame.groupby(column, sort=True):
            read = group[group["status"] == "ok"]
            row: dict[str, Any] = {"Role": role, "Model": model, "Reviewed": len(group),
                                   "Unread": len(group) - len(read)}
            for party in PARTIES:
                share = 100.0 * float((read["party"] == party).mean()) if len(read) else float("nan")
                row[f"{PARTY_NAMES[party].capitalize()} (%)"] = share
            rows.append(row)
    reviewers = ", ".join(sorted(set(frame["reviewer_model"])))
    caption = (f"Who caused each reviewed failure, as the reviewer ({reviewers}) read it: share (%) of the "
               "reviews blaming the assistant, the user agent, the judge or nobody, per assistant model and "
               "per user agent; Unread: reviews whose answer could not be read, left out of the shares. "
               "The reviewer is never the judge under review.")
    backends = frame.attrs.get("backends", set())
    caption += provenance_note(backends)
    source = Source.of(frame.attrs.get("origin", "a blame frame"), len(frame), "reviewed dialogues", backends,
                       sorted(set(frame["reviewer_model"])))
    return TableResult(pd.DataFrame(rows), caption, source, precision=1)


def table3_without_user_faults(tidy: pd.DataFrame, frame: pd.DataFrame, *, setting: str = MAIN_SETTING,
                               seed: int = 0) -> TableResult:
    """Table 3 on all judged dialogues beside Table 3 without the failures the reviewer blamed on the
    user agent: how much of each number the simulated user, not the assistant, caused."""
    users = set(frame.loc[(frame["status"] == "ok") & (frame["party"] == "user_agent"), "dialogue_id"])
    note = ("A dialogue is left out when the failure reviewer (docs/validity.md) blamed its poor result on "
            "the user agent; the reviewer's reading is a model's (or the offline rules'), not a proof.")
    left_out = LeftOut(users, "without the failures blamed on the user agent", "User faults out", note,
                       frame.attrs.get("backends", set()))
    return table3_beside(tidy, left_out, setting=setting, seed=seed)


def resimulate_user_faults(benchmark: Benchmark, store: RunStore, client: LLMClient, frame: pd.DataFrame,
                           config: SimulationConfig) -> StageReport:
    """Simulate again, as a new sample of the same run (`SimulationConfig.repeats`), the scenarios whose
    failure the reviewer blamed on the user agent, for the assistant and settings of `config`.

    A scenario gets the sample after the highest one blamed on the user agent, so a rerun with the same
    reviews makes nothing new. Judge the new dialogues as usual; `table3_without_user_faults` then counts
    the fresh dialogue of such a scenario in place of the one left out.
    """
    config = with_assistant(config, client)
    names = {AssistantSetting.parse(s).name for s in config.settings}
    blamed = frame[(frame["status"] == "ok") & (frame["party"] == "user_agent")
                   & (frame["assistant_model"] == config.assistant.model)
                   & frame["assistant_setting"].isin(names)]
    if blamed.empty:
        why = f"no failure blamed on the user agent for {config.assistant.model} under {sorted(names)}"
        return StageReport("simulation", details={"why": why})
    scenarios = benchmark.scenarios[benchmark.scenarios["scenario_id"].isin(set(blamed["scenario_id"]))]
    part = Benchmark(benchmark.users, benchmark.tasks, scenarios.reset_index(drop=True), benchmark.root)
    repeats = int(blamed["sample"].max()) + 2
    return run_simulation(part, store, client, replace(config, repeats=repeats))
