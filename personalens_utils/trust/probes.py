"""Judge probes: the ordinary judging stage run on transformed judge contexts, to see what moves a score.

A probe takes a dialogue's judge context (`judging.requests.judge_context`) and changes one thing:
`ProfileSwap` shows the judge another user's profile (demographics, preferences, past interactions and
user id) for the same dialogue; `Padding` lengthens every assistant turn with neutral text that says
nothing. The judge's calls are then built by the run's prompt set from the changed context, so a probe
runs on every backend (a real model reads the changed prompt, the offline backend the changed context),
through the stage engine (resumable, bounded, budgeted), and with the judging stage's own asking,
parsing and error policy (`judging.runner.judge_dialogue`).

Probe records never mix with ordinary judgments: they are `ProbeJudgment`s, kept in their own table of
the run store (`probe_judgments.jsonl`), which no reader of judgments opens, and their id adds the
probe's variant (probe, version and its parameters for this dialogue, e.g. the donor user) to the id
the ordinary judgment of the same dialogue, dimension and judge has. A rerun skips what is stored; a
changed probe (another donor, another padding) makes new records.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from personalens_utils.base.errors import KitError
from personalens_utils.data import Benchmark
from personalens_utils.judging import JudgingConfig, judge_dialogue
from personalens_utils.judging.plan import plan_judging
from personalens_utils.judging.requests import ContextFor
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures.display import ASSISTANT_DIMENSIONS
from personalens_utils.measures.scores import PERSONALIZATION, TASK_COMPLETION
from personalens_utils.runstore import engine, run_card
from personalens_utils.runstore.engine import Item, StageReport
from personalens_utils.runstore.identity import stable_id
from personalens_utils.runstore.records import Dialogue, DialogueSummary, ProbeJudgment, Record
from personalens_utils.runstore.store import RunStore


class ProbeError(KitError, ValueError):
    """A probe cannot be made as asked (e.g. a profile swap on a benchmark of one user)."""


class Probe(ABC):
    """One change to the judge's context. `variant` names the change made for a dialogue; it is part
    of the probe record's id, so records of another change are other records."""

    name: ClassVar[str]
    version: ClassVar[str] = "v1"
    dimensions: ClassVar[tuple[str, ...]]
    """The dimensions the probe re-judges unless the run names others."""

    @abstractmethod
    def variant(self, dialogue: Dialogue | DialogueSummary) -> str:
        """The probe, its version and its parameters for `dialogue`, as one string."""

    @abstractmethod
    def context(self, original: Mapping[str, Any], dialogue: Dialogue) -> dict[str, Any]:
        """The judge context the probe shows instead of `original`."""


class ProfileSwap(Probe):
    """Another user's profile in the judge's context, the dialogue unchanged.

    The donor is one of the benchmark's other users, chosen per scenario by a seeded hash among those
    whose values for the task's relevant preference types differ from the user's (any other user when
    none differ). The situation stays: it belongs to the task, not to the profile. The user's own
    preferences travel under `oracle`, which only the offline backend reads (as in an assistant's
    context): its task-completion verdict asks whether this user's wishes were met, which a real judge
    reads off the conversation (the kit's task-completion prompt shows no profile).
    """

    name = "profile_swap"
    dimensions = (TASK_COMPLETION, PERSONALIZATION)

    def __init__(self, benchmark: Benchmark, seed: int = 0):
        if len(benchmark.users) < 2:
            raise ProbeError(f"a profile swap needs a benchmark of two or more users; the one at "
                             f"{benchmark.root} holds {len(benchmark.users)}")
        self.benchmark, self.seed = benchmark, seed

    def donor(self, dialogue: Dialogue | DialogueSummary) -> int:
        """The user whose profile the judge is shown for `dialogue`."""
        scenario = self.benchmark.scenario(dialogue.scenario_id)
        own = self.benchmark.user(dialogue.user_id).preferences_for(list(scenario.domains))
        others = sorted(u for u in self.benchmark.users if u != dialogue.user_id)
        differ = [u for u in others
                  if _relevant(self.benchmark.user(u).preferences_for(list(scenario.domains)), scenario)
                  != _relevant(own, scenario)]
        pool = differ or others
        digest = hashlib.sha256(f"{self.seed}:{dialogue.scenario_id}".encode()).digest()
        return pool[int.from_bytes(digest[:8], "big") % len(pool)]

    def variant(self, dialogue: Dialogue | DialogueSummary) -> str:
        return f"{self.name}/{self.version}/donor={self.donor(dialogue)}"

    def context(self, original: Mapping[str, Any], dialogue: Dialogue) -> dict[str, Any]:
        scenario = self.benchmark.scenario(dialogue.scenario_id)
        donor = self.benchmark.user(self.donor(dialogue))
        return {**original, "user_id": donor.user_id, "demographics": dict(donor.demographics),
                "preferences": donor.preferences_for(list(scenario.domains)),
                "interactions": donor.interactions_for(list(scenario.domains)),
                "oracle": {"preferences": original.get("preferences") or {}}}


def _relevant(preferences: Mapping[str, Mapping[str, Any]], scenario: Any) -> list[tuple[str, str, str]]:
    """The values of the task's relevant preference types, comparable across users."""
    wanted = set(scenario.relevant_preferences)
    return sorted((domain, name, str(value)) for domain, by_type in preferences.items()
                  for name, value in by_type.items() if name in wanted)


PADDING = (
    "I hope this reads clearly. Glance at it at your leisure, and revisit it whenever it suits you. "
    "Everything here stays exactly as written; this simply rounds it out in the customary manner."
)
"""The default padding, appended to every assistant turn as its own paragraph: polite words with no
content. Each word is a stop word or courtesy filler of the offline judge (`judging.offline.FILLER`),
so it answers no question there, and none is an option value of the official profiles (e.g. not "free"),
so it applies no preference: neutral to the offline rules (tests/test_offline_judge_padding.py)."""


class Padding(Probe):
    """Every assistant turn lengthened by `times` copies of neutral text; the user's turns unchanged."""

    name = "padding"
    dimensions = ASSISTANT_DIMENSIONS

    def __init__(self, text: str = PADDING, times: int = 1):
        if not text.strip() or times < 1:
            raise ProbeError(f"padding needs some text and times >= 1, got {text!r:.40} x {times}")
        self.text, self.times = text.strip(), times

    def variant(self, dialogue: Dialogue | DialogueSummary) -> str:
        digest = hashlib.sha256(self.text.encode()).hexdigest()[:12]
        return f"{self.name}/{self.version}/text={digest}/times={self.times}"

    def context(self, original: Mapping[str, Any], dialogue: Dialogue) -> dict[str, Any]:
        pad = " ".join([self.text] * self.times)
        turns = [{**t, "content": f"{t['content']}\n\n{pad}"} if t["role"] == "assistant" else dict(t)
                 for t in original["dialogue"]]
        return {**original, "dialogue": turns}


def run_probe(store: RunStore, client: LLMClient, context_for: ContextFor, probe: Probe,
              config: JudgingConfig | None = None) -> StageReport:
    """Judge every dialogue the ordinary run with `config` would judge, on the probe's context, storing
    `ProbeJudgment`s; the dimensions are the probe's unless `config.dimensions` names others.

    The same policy as `run_judging` (docs/judging.md): resumable, an llm failure stored as an error
    record and redone by the next run, `max_cost_usd` a limit on new calls; batches are not offered.
    """
    config = config or JudgingConfig()
    if config.batch:
        raise ProbeError("probes are judged online; run them with JudgingConfig(batch=False)")
    if config.dimensions is None:
        config = replace(config, dimensions=probe.dimensions)
    planned = plan_judging(store, config, config.judge_on(client))
    variants = {d.id: probe.variant(d) for d in planned.to_judge}
    dims = planned.dimensions
    ids = {(d.id, dim.name): stable_id(planned.judgment_id(d.id, dim.name, 0), "probe", variants[d.id])
           for d in planned.to_judge for dim in dims}  # a probe re-judges sample 0
    candidates = [([ids[d.id, dim.name] for dim in dims], d) for d in planned.to_judge]
    plan = engine.plan(store, ProbeJudgment, candidates, retry_errors=config.retry_errors)

    async def work(llm: LLMClient, item: Item[DialogueSummary]) -> list[Record]:
        dialogue = planned.dialogue(item.payload)
        wanted = set(item.ids)
        todo = [dim for dim in dims if ids[item.payload.id, dim.name] in wanted]
        made = await judge_dialogue(llm, dialogue, probe.context(context_for(dialogue), dialogue), todo,
                                    config.judge_model, config.prompt_version, config.prompts)
        return [ProbeJudgment.of(j, probe.name, variants[item.payload.id]) for j in made]

    stage_name = f"probe_{probe.name}"
    details = {**planned.details(), "probe": probe.name, "probe_version": probe.version}
    details.pop("judgments_done_before", None)
    report = StageReport(stage_name, details=details)
    stage = engine.Stage(stage_name, ProbeJudgment, work)
    options = engine.StageOptions(max_cost_usd=config.max_cost_usd,
                                  desc=f"{probe.name} probe ({planned.model_key})")
    report = engine.run_stage(stage, store, client, plan, report=report, options=options)
    run_card.note_stage(store, report, run_card.role_entry(planned.judge),
                        prompt_version=f"{probe.name} {probe.version}", dimensions=[d.name for d in dims])
    return report

