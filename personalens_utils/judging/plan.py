"""What judging has left to do: which dialogues, which of their dimensions, and at what cost.

Both runners (online and batch) and the cost estimate plan with `plan_judging` (the stage engine's
planning: a work item is one dialogue, its record ids the judgments still to make), so an
estimate counts exactly the judgments a run with the same arguments would make. A judgment belongs
to its judge's backend: judging on another backend makes new records.

Planning reads the store's columnar copy (`columnar.Columnar`): one summary row per dialogue
(`DialogueSummary`, no texts) and the judgments' ids, so a resume at any size plans in seconds. A
dialogue is read in full (`JudgingPlan.dialogue`) when its judgments are about to be made.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from personalens_utils.data import MD, SD, Benchmark, UsersArg, resolve_users
from personalens_utils.judging.config import JudgingConfig, Select
from personalens_utils.judging.dimensions import Dimension, JudgingError, dimensions_from
from personalens_utils.judging.requests import ContextFor, dimension_requests
from personalens_utils.llm import Message
from personalens_utils.llm.budget import CostEstimate, Tally
from personalens_utils.llm.registry import KNOWN_BACKENDS
from personalens_utils.llm.role import Role, resolved_model, role_of
from personalens_utils.prompt_sets import KIT, PromptSet
from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS
from personalens_utils.prompt_templates.user_styles import COOPERATIVE
from personalens_utils.runstore import columnar, engine, run_card
from personalens_utils.runstore.engine import Item, Plan
from personalens_utils.runstore.identity import judgment_id_tail, judgment_ids, samples
from personalens_utils.runstore.records import Dialogue, DialogueSummary, Judgment
from personalens_utils.runstore.shards import Shard
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation.config import SimulationConfig
from personalens_utils.simulation.loop import TERMINATED, TURN_CAP, TURN_CAPS
from personalens_utils.simulation.runner import (
    PAPER_TOKENS_PER_TURN,
    PAPER_TURNS,
    USER_SHARE,
    PlannedDialogue,
    plan_dialogues,
)

JUDGEABLE_STATUSES = ("terminated", "turn_cap")
REAL_BACKENDS = tuple(b for b in KNOWN_BACKENDS if b != "offline")
"""Backends of language models; a judge on one skips offline-made dialogues by default."""
ANSWER_TOKENS = 300
"""Answer length assumed by `estimate_judging` (a score line and a few sentences of justification)."""

def judgeable(dialogues: Iterable[DialogueSummary], select: Select | None) -> list[DialogueSummary]:
    """The finished dialogues `select` keeps (all finished ones when it is None)."""
    return [d for d in dialogues if d.status in JUDGEABLE_STATUSES and (select is None or select(d))]


_SHARED = ("status", "task_id", "task_type", "domains", "user_model", "assistant_model", "assistant_setting",
           "prompt_version", "prompt_set", "sample", "backend", "user_backend", "user_model_id",
           "user_style", "assistant_backend", "assistant_model_id")
"""Summary fields that many dialogues share: fetched once per distinct combination."""
Where = tuple[int, int, int]
"""Where a dialogue's line sits: `columnar.Place`'s store, offset and length."""
_PLANNED = """
CREATE OR REPLACE TEMP TABLE _planned AS
SELECT d.*, f._first FROM dialogues_lines d
JOIN (SELECT id, _source, max(_offset) AS _offset, min(_offset) AS _first FROM dialogues_lines
      GROUP BY id, _source) f USING (id, _source, _offset)
"""
"""The current line of each dialogue (as the `dialogues` view, joined rather than windowed: faster) and
where its id first appears."""
_COMBINATIONS = f"""
CREATE OR REPLACE TEMP TABLE _shared AS
SELECT row_number() OVER () AS _shared, * FROM (SELECT DISTINCT {", ".join(_SHARED)} FROM _planned)
"""
_ROWS = f"""
SELECT p.id, p.scenario_id, p.user_id, p.n_turns, p._source, p._offset, p._length, s._shared
FROM _planned p JOIN _shared s
  ON {" AND ".join(f"p.{name} IS NOT DISTINCT FROM s.{name}" for name in _SHARED)}
ORDER BY p._source, p._first
"""


_KEPT: dict[tuple[tuple[str, int, str], ...], tuple[list[DialogueSummary], list[Where]]] = {}
"""The summaries of the store last read, by its dialogues' version: a notebook that lists the users to
judge and then plans reads them once."""


def dialogue_summaries(source: columnar.Columnar) -> tuple[list[DialogueSummary], list[Where]]:
    """Every dialogue of the store(s) as a summary, and where its line sits (to read it in full later),
    in the order `RunStore.read` gives them (where each id first appears). The fields many dialogues
    share are fetched once per combination, filled in as `Dialogue` fills them, and shared by its rows."""
    version = source.version(Dialogue)
    if version not in _KEPT:
        _KEPT.clear()
        _KEPT[version] = _read_summaries(source)
    summaries, places = _KEPT[version]
    return list(summaries), list(places)


def _read_summaries(source: columnar.Columnar) -> tuple[list[DialogueSummary], list[Where]]:
    con = source.connection()
    con.execute(_PLANNED)
    con.execute(_COMBINATIONS)
    shared = {key: _filled(dict(zip(_SHARED, values, strict=True)))
              for key, *values in con.execute("SELECT * FROM _shared").fetchall()}
    names = ("id", "scenario_id", "user_id", "n_turns", "_source", "_offset", "_length", "_shared")
    columns = con.execute(_ROWS).fetchnumpy()
    con.execute("DROP TABLE _planned; DROP TABLE _shared")
    summaries, places = [], []
    make = DialogueSummary._make
    for did, sid, user_id, n_turns, where, offset, length, key in zip(
            *(columns[name].tolist() for name in names), strict=True):
        status, rest = shared[key]
        summaries.append(make((did, status, sid, user_id, *rest, n_turns)))
        places.append((where, offset, length))
    return summaries, places


def _filled(row: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The status, and the shared fields after `user_id` in `DialogueSummary`'s order: an absent prompt
    set or sample read as the kit's first, no style as cooperative, empty backends and model ids filled
    as `Dialogue` fills them."""
    user_backend = row["user_backend"] or row["backend"]
    assistant_backend = row["assistant_backend"] or row["backend"]
    return row["status"], (
        row["task_id"], row["task_type"], tuple(row["domains"] or ()), row["user_model"],
        row["assistant_model"], row["assistant_setting"], row["prompt_version"],
        row["prompt_set"] or KIT_PROMPTS, row["sample"] or 0, row["backend"], user_backend,
        row["user_model_id"] or resolved_model(row["user_model"], user_backend),
        row["user_style"] or COOPERATIVE, assistant_backend,
        row["assistant_model_id"] or resolved_model(row["assistant_model"], assistant_backend))


@dataclass
class JudgingPlan:
    """How many dialogues the store holds, those to judge, and the engine's plan over them."""

    in_store: int
    unfinished: int
    """Dialogues in the store that did not finish (status "error"): nothing to judge."""
    to_judge: list[DialogueSummary]
    dimensions: list[Dimension]
    judge: Role
    """The judge as its records key it (`JudgingConfig.judge_as`)."""
    prompt_version: str
    plan: Plan[DialogueSummary]
    id_of: dict[tuple[str, int], Callable[[str], str]]
    """(dimension name, judge sample) -> a dialogue's judgment id from its id (`identity.judgment_ids`)."""
    source: columnar.Columnar
    """Where the planned dialogues are read in full (`dialogue`)."""
    places: dict[str, Where] = field(default_factory=dict)
    """Id of a dialogue to judge -> where its line sits."""
    prompts: PromptSet = KIT
    """Whose judge prompts (`PromptSet.judge_set` says which set scores each dimension)."""
    skipped_offline: int = 0
    """Finished dialogues made on the offline backend that a real judge left alone (`offline_dialogues`)."""
    judge_samples: int = 1
    """How many independent judgments each dialogue gets on each dimension (`JudgingConfig`)."""

    @property
    def model_key(self) -> str:
        """The judge's name in its records (the registry's name of the configured model)."""
        return self.judge.model

    def note_on_card(self, store: RunStore, report: engine.StageReport) -> None:
        """Add this judge, and what its run spent, to the store's run card (a store never written
        stays without one); re-judging with another judge adds a second judge."""
        if not store.root.is_dir():
            return
        entry = run_card.judge_entry(
            self.prompts, self.prompts.judge_version(self.prompt_version),
            judge=run_card.role_entry(self.judge),
            dimensions=[d.name for d in self.dimensions], judge_samples=self.judge_samples,
            calls=run_card.role_calls(report, run_card.JUDGE_CALLS))
        run_card.update_card(store, judge=entry, spent=run_card.stage_spent(report),
                             stage=f"judging ({self.model_key})")

    def judgment_id(self, dialogue_id: str, dimension: str, judge_sample: int) -> str:
        """The id of a dialogue's judgment on a dimension, as judge sample `judge_sample`."""
        return self.id_of[dimension, judge_sample](dialogue_id)

    def todo(self, dialogue_id: str, ids: Sequence[str]) -> list[tuple[Dimension, int]]:
        """The (dimension, judge sample) pairs of a dialogue whose judgment ids are among `ids`."""
        wanted = set(ids)
        return [(d, k) for k in range(self.judge_samples) for d in self.dimensions
                if self.judgment_id(dialogue_id, d.name, k) in wanted]

    def dialogue(self, summary: DialogueSummary) -> Dialogue:
        """A planned dialogue read in full (its turns), by where its line sits."""
        [dialogue] = self.source.records(Dialogue, [columnar.Place(*self.places[summary.id])])
        return dialogue  # type: ignore[return-value]

    @property
    def judgments(self) -> int:
        return sum(len(item.ids) for item in self.plan.items)

    def details(self) -> dict[str, Any]:
        """What a judging report shows beside the engine's counts."""
        return {
            "judge_model": self.model_key, "judge_backend": self.judge.backend,
            "prompt_version": self.prompt_version,
            **self.prompts.judge_details(self.dimensions),
            "dimensions": ", ".join(d.name for d in self.dimensions),
            "dialogues_in_store": self.in_store,
            "dialogues_judgeable": len(self.to_judge),
            "dialogues_skipped_error": self.unfinished,
            "dialogues_skipped_offline": self.skipped_offline,
            "judgments_done_before": (len(self.to_judge) * len(self.dimensions) * self.judge_samples
                                      - self.judgments),
            **({"judge_samples": self.judge_samples} if self.judge_samples > 1 else {}),
        }


def plan_judging(store: RunStore, config: JudgingConfig, judge: Role) -> JudgingPlan:
    """Every judgeable dialogue with a judgment by the configured judge (`judge`: the role that calls,
    `JudgingConfig.judge_as`) still to make on its dimensions (errored ones when asked), with the judge
    prompts of `config.prompts`.
    A judge on a real backend (`REAL_BACKENDS`) leaves the dialogues made on the offline backend alone
    (money spent on rule-based text) unless `offline_dialogues=True`; other judges (offline, test
    doubles) judge them (False: never). Reads summaries and ids only (the columnar copy), no texts."""
    dims = dimensions_from(config.dimensions)
    judge = config.judge_as(judge)
    judge_samples = samples(config.judge_samples, "judge_samples")
    variants = {(dim.name, k): config.prompts.judge_variant(dim, config.prompt_version, k)
                for k in judge_samples for dim in dims}  # judge sample by judge sample, dims in order
    id_of = {key: judgment_ids(key[0], judge=judge, variant=v) for key, v in variants.items()}
    source = columnar.Columnar(store)
    try:
        dialogues, where = dialogue_summaries(source)
        tails = [judgment_id_tail(name, judge=judge, variant=v) for (name, _), v in variants.items()]
        unfinished = _unfinished_judgments(source, tails)
        stored = source.stored(Judgment) if unfinished is None else None
    finally:
        source.close()
    places = dict(zip((d.id for d in dialogues), where, strict=True))
    del where
    to_judge = judgeable(dialogues, sharded(config.select, config.shard))
    skips = _skips_offline(judge, config.offline_dialogues)
    skipped = sum(d.made_offline for d in to_judge) if skips else 0
    if skipped:
        to_judge = [d for d in to_judge if not d.made_offline]
    if unfinished is None:  # every judgment id made here and looked up among every stored one
        makers = list(id_of.values())
        candidates: Iterable[tuple[list[str], DialogueSummary]] = (
            ([make(d.id) for make in makers], d) for d in to_judge)
    else:  # only the judgments not stored as finished, which decide the plan alone
        failed = {jid for ids in unfinished.values() for jid, errored in ids if errored}
        stored = failed, failed
        candidates = (([jid for jid, _ in unfinished.get(d.id, ())], d) for d in to_judge)
    planned = engine.plan(store, Judgment, candidates, retry_errors=config.retry_errors, stored=stored)
    not_finished = sum(d.status not in JUDGEABLE_STATUSES for d in dialogues)
    return JudgingPlan(len(dialogues), not_finished, to_judge, dims, judge, config.prompt_version, planned,
                       id_of, source, {d.id: places[d.id] for d in to_judge}, prompts=config.prompts,
                       skipped_offline=skipped, judge_samples=len(judge_samples))


_PLAIN_ID = "[0-9A-Za-z_.:-]+"
"""Dialogue ids that are their own JSON string (no escaping): their judgment ids can be made in SQL."""


def _unfinished_judgments(source: columnar.Columnar,
                          tails: Sequence[str]) -> dict[str, list[tuple[str, bool]]] | None:
    """Dialogue id -> its judgment ids (in the order of `tails`, one per dimension and judge sample) not
    stored as finished, each with whether it is stored as an error; dialogues with none are left out.
    The ids are made and looked up in DuckDB (`identity.judgment_id_tail` says how); None when a
    dialogue id would need JSON escaping, which is left to Python."""
    con = source.connection()
    if con.execute(f"SELECT count(*) FROM dialogues_lines WHERE NOT regexp_full_match(id, '{_PLAIN_ID}')"
                   ).fetchone()[0]:
        return None
    tail_rows = ", ".join("(?, ?)" for _ in tails)
    rows = con.execute(f"""
        WITH wanted AS (
            SELECT d.id AS dialogue_id, t.pos, left(sha256('["' || d.id || '"' || t.tail), 20) AS jid
            FROM (SELECT DISTINCT id FROM dialogues_lines) d CROSS JOIN (VALUES {tail_rows}) t(pos, tail)),
        errored AS (
            SELECT id FROM (SELECT id, status, row_number() OVER (PARTITION BY id, _source ORDER BY _offset
                            DESC) AS latest FROM judgments_lines
                            WHERE id IN (SELECT id FROM judgments_lines WHERE status = 'error'))
            WHERE latest = 1 AND status = 'error')
        SELECT dialogue_id, jid, jid IN (SELECT id FROM errored) FROM wanted
        WHERE jid NOT IN (SELECT id FROM judgments_lines) OR jid IN (SELECT id FROM errored)
        ORDER BY dialogue_id, pos""", [x for pos, tail in enumerate(tails) for x in (pos, tail)]).fetchall()
    out: dict[str, list[tuple[str, bool]]] = {}
    for dialogue_id, jid, errored in rows:
        out.setdefault(dialogue_id, []).append((jid, errored))
    return out


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


def judged_users(store: RunStore, select: Select | None = None, *, judge: Role | None = None,
                 offline_dialogues: bool | None = None) -> list[int]:
    """User indices of the dialogues `judge` would judge (None: every judgeable one), the profiles judging
    needs loaded."""
    skip = judge is not None and _skips_offline(judge, offline_dialogues)
    found = judgeable(_summaries(store), select)
    return sorted({d.user_id for d in found if not (skip and d.made_offline)})


def skipped_offline_line(store: RunStore, select: Select | None = None, *, judge: Role,
                         offline_dialogues: bool | None = None) -> str:
    """`skipped_offline_note` before any judging: how many offline-made dialogues `judge` leaves alone;
    empty when none."""
    if not _skips_offline(judge, offline_dialogues):
        return ""
    n = sum(d.made_offline for d in judgeable(_summaries(store), select))
    return skipped_offline_note({"dialogues_skipped_offline": n, "judge_backend": judge.backend})


def _summaries(store: RunStore) -> list[DialogueSummary]:
    with columnar.Columnar(store, tables=[Dialogue]) as source:
        return dialogue_summaries(source)[0]


def _skips_offline(judge: Role, offline_dialogues: bool | None) -> bool:
    return not (judge.backend not in REAL_BACKENDS if offline_dialogues is None else offline_dialogues)


def estimate_judging(store: RunStore, context_for: ContextFor, config: JudgingConfig | None = None, *,
                     judge: Role, answer_tokens: int = ANSWER_TOKENS, sample: int = 300) -> CostEstimate:
    """Calls, tokens and cost of the judgments `run_judging` with this configuration would still make
    (at batch prices when `config.batch`).

    `judge` (the role that will call) decides which judgments are already stored and prices the calls.
    The prompts are built for up to `sample` of the dialogues to judge and scaled up per dimension;
    answers are assumed to be `answer_tokens` long and format reminders are not counted.
    """
    config = config or JudgingConfig()
    planned = plan_judging(store, config, judge)
    work = [(item.payload, planned.todo(item.payload.id, item.ids)) for item in planned.plan.items]
    tally = Tally(judge.backend, batch=config.batch)
    contexts: dict[str, Mapping[str, Any]] = {}
    heads: set[str] = set()  # cacheable judge heads met so far, across dimensions
    for dim in planned.dimensions:
        wanted = [dialogue for dialogue, todo in work for d, _ in todo if d == dim]
        chosen = wanted[:: max(1, len(wanted) // sample)]
        for dialogue in chosen:
            if dialogue.id not in contexts:
                contexts[dialogue.id] = context_for(planned.dialogue(dialogue))
            context = contexts[dialogue.id]
            calls = dimension_requests(dim, context, config.judge_model, config.prompts)
            tally.add_requests("judging", calls, answer_tokens, weight=len(wanted) / len(chosen), seen=heads)
    return tally.estimate([
        f"{planned.judgments} judgments of {len(work)} dialogues to make; prompts built for {len(contexts)} "
        "of them",
        f"answers assumed {answer_tokens} tokens; the format reminder after an unreadable answer not counted",
        "turn-level personalization: one call per assistant turn",
        *filter(None, [skipped_offline_note(planned.details())]),
    ])


PLANNED_STAGE = "judging (dialogues not made yet)"
"""The stage of `estimate_judging_planned`'s rows, apart from the judging of stored dialogues."""
FILLER = "word"
"""The word a stand-in's messages repeat: the judge prompt's length is what is priced, not its text."""


@dataclass(frozen=True)
class PlannedSimulation:
    """The dialogues one simulation plan will make, and who will make them: what pricing their judging
    needs before they exist (`estimate_judging_planned`)."""

    plan: Plan[PlannedDialogue]
    config: SimulationConfig
    user: Role
    """The user agent, style included (`Role.of`)."""

    @classmethod
    def of(cls, benchmark: Benchmark, store: RunStore, config: SimulationConfig, *, user: Role,
           ) -> PlannedSimulation:
        """`plan_dialogues` with `user` as the user agent, as `estimate_simulation` plans it."""
        return cls(plan_dialogues(benchmark, store, config, user=user), config, user)

    def assistant(self) -> Role:
        """The assistant's identity, as `plan_dialogues` takes it (`SimulationConfig.assistant_for`)."""
        return role_of(self.config.assistant_for(self.user))

    def cap(self, task_type: str) -> int:
        """The turn cap its `task_type` dialogues run under (`max_turns`, else the paper's)."""
        return self.config.max_turns or TURN_CAPS[task_type]

    def turns(self, task_type: str) -> float:
        """A dialogue's turns as `estimate_simulation` assumes them: the paper's average, within the cap."""
        return min(PAPER_TURNS[task_type], self.cap(task_type))

    def stand_in(self, item: Item[PlannedDialogue]) -> Dialogue:
        """The record the planned dialogue will be, under its planned id, without turns (never stored)."""
        scenario, assistant = item.payload.ctx.scenario, self.assistant()
        return Dialogue(
            id=item.ids[0], scenario_id=scenario.scenario_id, user_id=scenario.user_id,
            task_id=scenario.task_id, task_type=scenario.task_type, domains=tuple(scenario.domains),
            user_model=self.user.model, assistant_model=assistant.model,
            assistant_setting=item.payload.setting.name,
            variant=self.config.prompts.variant(item.payload.sample),
            backend=assistant.backend or self.user.backend, user_backend=self.user.backend,
            user_model_id=self.user.model_id, user_style=self.user.style, assistant_backend=assistant.backend,
            assistant_model_id=assistant.model_id, status=TERMINATED)


def average_lengths(turns: float) -> list[tuple[int, float]]:
    """Whole turn counts, each with its share, whose mean is `turns`: a dialogue has whole turns, and
    turn-level scoring makes one call per assistant turn."""
    whole = math.floor(turns)
    share = turns - whole
    return [(n, w) for n, w in ((whole, 1.0 - share), (whole + 1, share)) if w > 0]


def filled(dialogue: Dialogue, turns: int, tokens_per_turn: float, cap: int) -> Dialogue:
    """`dialogue` with `turns` turns of filler text, each `tokens_per_turn` long by the kit's token rule,
    the user's message `USER_SHARE` of it; ended by the cap when it reaches it."""
    def words(tokens: float) -> str:
        return " ".join([FILLER] * max(1, round(tokens * 3 / 4)))

    user, reply = words(tokens_per_turn * USER_SHARE), words(tokens_per_turn * (1 - USER_SHARE))
    said = tuple(m for _ in range(turns) for m in (Message("user", user), Message("assistant", reply)))
    return replace(dialogue, turns=said, status=TURN_CAP if turns >= cap else TERMINATED)


def estimate_judging_planned(planned: Sequence[PlannedSimulation], context_for: ContextFor,
                             config: JudgingConfig | None = None, *, judge: Role,
                             answer_tokens: int = ANSWER_TOKENS, sample: int = 300) -> CostEstimate:
    """Calls, tokens and cost of judging the dialogues that simulation plans will make, before they exist
    (as `estimate_judging` prices stored ones; at batch prices when `config.batch`), by `judge`: none of
    them has a judgment yet, whoever judges.

    Each planned dialogue is its record to be (`PlannedSimulation.stand_in`: `select`, the shard and a
    real judge's skipping of offline-made dialogues read it as they will read the dialogue) with turns of
    filler text of the paper's Table 13 average length (`PAPER_TURNS`, within `max_turns`;
    `PAPER_TOKENS_PER_TURN`, the user's share `USER_SHARE`), a fractional average as two whole lengths in
    proportion, and judged through `context_for` like a stored dialogue. Prompts are built for up to
    `sample` dialogues per plan and task type and scaled up; answers are assumed `answer_tokens` long.
    """
    config = config or JudgingConfig()
    dims = dimensions_from(config.dimensions)
    judge_samples = len(samples(config.judge_samples, "judge_samples"))
    select = sharded(config.select, config.shard)
    skips = _skips_offline(judge, config.offline_dialogues)
    groups: dict[tuple[int, str], list[Dialogue]] = {}
    skipped = 0
    for position, made in enumerate(planned):
        for item in made.plan.items:
            dialogue = made.stand_in(item)
            if select is not None and not select(dialogue):
                continue
            if skips and dialogue.made_offline:
                skipped += 1
                continue
            groups.setdefault((position, dialogue.task_type), []).append(dialogue)
    tally = Tally(judge.backend, batch=config.batch)
    heads: set[str] = set()  # cacheable judge heads met so far, across dialogues and dimensions
    built = 0
    for (position, task_type), dialogues in groups.items():
        made = planned[position]
        chosen = dialogues[:: max(1, len(dialogues) // sample)]
        scale = judge_samples * len(dialogues) / len(chosen)
        for dialogue in chosen:
            for turns, share in average_lengths(made.turns(task_type)):
                stand_in = filled(dialogue, turns, PAPER_TOKENS_PER_TURN[task_type], made.cap(task_type))
                context = context_for(stand_in)
                built += 1
                for dim in dims:
                    calls = dimension_requests(dim, context, config.judge_model, config.prompts)
                    tally.add_requests(PLANNED_STAGE, calls, answer_tokens, weight=scale * share, seen=heads)
    n = sum(len(dialogues) for dialogues in groups.values())
    caps = sorted({m.config.max_turns for m in planned if m.config.max_turns})
    return tally.estimate([
        f"{n * len(dims) * judge_samples} judgments of {n} dialogues not made yet (the simulation plan's), "
        f"their prompts built on {built} stand-ins",
        f"a dialogue not made yet is taken to be of the paper's Table 13 average length: turns SD "
        f"{PAPER_TURNS[SD]}, MD {PAPER_TURNS[MD]}" + (f", capped at max_turns={caps}" if caps else "")
        + f"; tokens per turn SD {PAPER_TOKENS_PER_TURN[SD]}, MD {PAPER_TOKENS_PER_TURN[MD]}, the user's "
        f"message {USER_SHARE:.0%} of a turn; filler words stand in for its text",
        f"answers assumed {answer_tokens} tokens; the format reminder after an unreadable answer not counted",
        *(["turn-level personalization: one call per assistant turn of a stand-in (the average turns)"]
          if any(d.turn_level for d in dims) else []),
        *([f"{skipped} planned dialogue(s) will be made on the offline backend: the {judge.backend} judge "
           f"will leave them alone (set {OFFLINE_PARAMETER}=True to judge them)"] if skipped else []),
    ])
