"""A person as the user: another implementation of the user role, driven by the simulation loop.

The loop (`simulation.loop.simulate_dialogue`) asks its user role for each message through
`acomplete(request)` and reads `backend_name`; it does not know who types. `Person` answers those
calls with what a person typed: each call hands the request (what the user agent would see) to the
person's side and waits for their message. The loop's own rules then apply: the turn cap, the opening
message that cannot end the dialogue, the assistant answering the closing message once. Only the end
differs: a person ends with the "end" button (`end`), never with a word, so each message comes back as
an `EndFlagged` response carrying that choice, and the text is stored as typed (a TERMINATE in it is
a plain word). Text that cannot be stored as UTF-8 (a lone surrogate a browser may hand over) is
refused before it reaches the loop, and the dialogue waits for a corrected message.

`PersonDialogue` runs one such dialogue on a thread of its own and is fed from the caller's thread
(the widget, `explore.play`, or a test): `say(text)` and `end(text)` return once the assistant has
answered. The finished record is an ordinary `Dialogue` whose user role is `human:<name>` on the
`human` backend; it is stored in the run store like any simulated dialogue, judged by notebook 04 and
shown by the explorer. Dialogues of people on one scenario, assistant and setting are numbered as
samples of one run (0, 1, ...), so two people on the same scenario are two samples, not a clash.

`fidelity_table` compares people's dialogues with the simulator's on the scenarios both cover, one row
group per user-agent style the simulator played, so a researcher can pick the style closest to people.
"""

from __future__ import annotations

import asyncio
import queue
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from personalens_utils.assistants import Assistant
from personalens_utils.base.errors import KitError
from personalens_utils.base.words import words_of
from personalens_utils.data import Benchmark
from personalens_utils.judging import JUDGEABLE_STATUSES, benchmark_contexts
from personalens_utils.judging.offline import mentions
from personalens_utils.llm import Request, Response, Usage
from personalens_utils.llm.loop_thread import LoopThread
from personalens_utils.llm.role import Role
from personalens_utils.measures.bootstrap import cluster_ci, method_note, paired_difference
from personalens_utils.measures.design import ARM, SCORE, TASK, USER
from personalens_utils.measures.display import provenance_note
from personalens_utils.measures.scores import (
    PERSONALIZATION,
    TASK_COMPLETION,
    Stores,
    load_dialogues,
    load_scores,
    reading,
)
from personalens_utils.measures.stats import DEFAULT_RESAMPLES, MIN_CLUSTERS, Interval
from personalens_utils.outputs.latex import Block, Printed
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.prompt_sets import KIT, PromptSet, ScenarioContext
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, USER_STYLES
from personalens_utils.runstore import run_card
from personalens_utils.runstore.columnar import Columnar
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import AssistantSetting, simulate_dialogue
from personalens_utils.simulation.loop import EndFlagged
from personalens_utils.trust.audit import FLAG_NAMES, FLAGS

HUMAN = "human"
"""The backend of a person playing the user; their model name is `human:<name>`."""
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
REPLY_WAIT_S = 900.0
"""How long `say` and `end` wait for the assistant's reply before giving up (beyond any call's own
deadline, `llm.options`)."""


class PersonError(KitError, ValueError):
    """A person's dialogue cannot go on as asked: an empty message or one that cannot be stored, an
    ending before the opening, a dialogue already over, a name or scenario that does not fit."""

    says_all = True


def person_model(name: str) -> str:
    """The user model a person's dialogues carry: `human:<name>` (a checked name)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise PersonError(f"person={name!r}: give a short name of letters, digits, '.', '_' or '-' "
                          "(at most 40, starting with a letter or digit), e.g. 'alice'")
    return f"{HUMAN}:{name}"


class Person:
    """The user role played by a person: what the loop calls in place of the user agent's client.

    Each `acomplete` puts the request on `asked` (read by the other thread) and waits until `give`
    hands it the person's message and whether it ends the dialogue; `give` may be called from any
    thread."""

    backend_name = HUMAN

    def __init__(self, name: str):
        self.model = person_model(name)
        self.name = name
        self.asked: queue.Queue[Request] = queue.Queue()
        self._waiting: tuple[asyncio.AbstractEventLoop, asyncio.Future[tuple[str, bool]]] | None = None
        self._lock = threading.Lock()

    async def acomplete(self, request: Request, **_: Any) -> Response:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[str, bool]] = loop.create_future()
        with self._lock:
            self._waiting = (loop, future)
        self.asked.put(request)
        started = time.perf_counter()
        text, ends = await future
        return EndFlagged(text=text, usage=Usage(), backend=HUMAN, model=self.model,
                          latency_s=time.perf_counter() - started, ends=ends)

    def give(self, text: str, *, ends: bool = False) -> None:
        """The person's next message, to the call waiting for it; `ends` when they chose to end with it
        (their text is never read for an end marker)."""
        with self._lock:
            waiting, self._waiting = self._waiting, None
        if waiting is None:
            raise PersonError("the dialogue is not waiting for a message of yours")
        loop, future = waiting
        loop.call_soon_threadsafe(future.set_result, (text, ends))


def next_sample(store: RunStore, scenario_id: str, setting: str, assistant: Assistant,
                prompts: PromptSet) -> int:
    """The sample number of a new person's dialogue: one past every people's dialogue stored for this
    scenario, assistant, setting and prompt set (so people on one scenario are samples of one run)."""
    if not store.path(Dialogue).is_file():
        return 0
    frame = load_dialogues(store)
    same = frame[(frame["user_backend"] == HUMAN) & (frame["scenario_id"] == scenario_id)
                 & (frame["assistant_setting"] == setting) & (frame["assistant_backend"] == assistant.backend)
                 & (frame["assistant_model_id"] == assistant.model_id)
                 & (frame["dialogue_prompt_set"] == prompts.name)]
    return int(same["sample"].max()) + 1 if len(same) else 0


def _runner(assistant: Assistant) -> Callable[[Awaitable[Any]], Any]:
    """Where the dialogue's coroutine runs: the loop thread of the assistant's client (its connections
    live there), or a loop thread of its own for an assistant that calls no model."""
    clients = assistant.clients()
    if clients:
        return clients[0].run_sync
    loop = LoopThread("person-dialogue")
    return lambda coro: loop.run(coro, misuse="a person's dialogue started from its own loop")


@dataclass(frozen=True)
class _Ended:
    record: Dialogue | None
    failure: BaseException | None = None


class PersonDialogue:
    """One dialogue a person plays as the user, run by the simulation loop on a thread, fed message by
    message from the caller's thread. `request` is what the user agent would be sent now (its
    `context` holds the profile, preferences, situation and task); `record` the stored dialogue once
    it ended."""

    def __init__(self, store: RunStore, ctx: ScenarioContext, person: Person, assistant: Assistant, *,
                 setting: str | AssistantSetting = "base", prompts: PromptSet = KIT,
                 max_turns: int | None = None, wait_s: float = REPLY_WAIT_S):
        self.store, self.ctx, self.person, self.assistant = store, ctx, person, assistant
        self.setting = setting if isinstance(setting, AssistantSetting) else AssistantSetting.parse(setting)
        prompts.check_setting(self.setting.name, assistant.model)
        self.prompts, self.wait_s = prompts, wait_s
        self.sample = next_sample(store, ctx.scenario.scenario_id, self.setting.name, assistant, prompts)
        self.record: Dialogue | None = None
        self.request: Request | None = None
        self.failure: BaseException | None = None
        """What stopped the loop when it raised instead of returning a record (nothing is stored)."""
        self._ended: queue.Queue[_Ended] = queue.Queue()
        coro = simulate_dialogue(person, ctx, self.setting, user_model=person.model, assistant=assistant,
                                 max_turns=max_turns, prompts=prompts, sample=self.sample)
        run = _runner(assistant)
        self._thread = threading.Thread(target=self._run, args=(run, coro), name="person-dialogue",
                                        daemon=True)
        self._thread.start()
        self._next()

    def _run(self, run: Callable[[Awaitable[Any]], Any], coro: Awaitable[Dialogue]) -> None:
        try:
            self._ended.put(_Ended(run(coro)))
        except BaseException as exc:  # handed to the caller's thread, raised there
            self._ended.put(_Ended(None, exc))

    @property
    def done(self) -> bool:
        return self.record is not None

    @property
    def opening(self) -> bool:
        """Whether the next message is the opening one (which cannot end the dialogue)."""
        return not self.turns

    @property
    def turns(self) -> list[dict[str, str]]:
        """The dialogue so far, as the user agent is shown it."""
        if self.record is not None:
            return [t.as_dict() for t in self.record.turns]
        return [dict(t) for t in (self.request.context.get("dialogue") or [])] if self.request else []

    def say(self, text: str) -> None:
        """Send one message, kept as typed (TERMINATE in it ends nothing); returns once the assistant
        has answered (or the dialogue reached its turn cap)."""
        _storable(text)
        if not text.strip():
            raise PersonError("the message is empty: type what you would say to the assistant")
        self._send(text.strip(), ends=False)

    def end(self, text: str = "") -> None:
        """End the dialogue with this last message (may be empty): the person's end is this call, not a
        word in their text. The assistant answers it once, then the dialogue is stored."""
        _storable(text)
        if self.opening:
            raise PersonError("the opening message cannot end the dialogue: first say what you need")
        self._send(text.strip(), ends=True)

    def _send(self, text: str, *, ends: bool) -> None:
        if self.done:
            raise PersonError(f"this dialogue has ended ({self.record.status}): start another one")
        if self.failure is not None:
            raise PersonError(f"this dialogue stopped ({self.failure}): start another one")
        self.person.give(text, ends=ends)
        self._next()

    def _next(self) -> None:
        """Wait until the loop asks the person again or the dialogue ends (then store it)."""
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            try:
                self.request = self.person.asked.get(timeout=0.05)
                return
            except queue.Empty:
                pass
            try:
                ended = self._ended.get_nowait()
            except queue.Empty:
                continue
            if ended.failure is not None:
                self.failure = ended.failure
                raise ended.failure
            self._store(ended.record)
            return
        raise PersonError(f"no reply from the assistant {self.assistant.model} within {self.wait_s:.0f} s")

    def _store(self, record: Dialogue | None) -> None:
        """Append the record, numbered past the people's dialogues of its scenario stored meanwhile (two
        people may play one scenario at once)."""
        if record is None:
            raise PersonError("the dialogue ended without a record")
        sample = next_sample(self.store, record.scenario_id, self.setting.name, self.assistant, self.prompts)
        if sample != record.sample:
            record = replace(record, id="", variant=self.prompts.variant(sample))
        self.store.append(record)
        self.record = record
        run_card.note_records(self.store, "people", run_card.role_entry(
            Role(record.user_model, record.user_backend, record.user_model_id)),
            prompt_version=record.prompt_version, assistants=[record.assistant_model],
            settings=[record.assistant_setting])


def _storable(text: str) -> None:
    """Refuse, before the loop sees it, text the run store cannot write as UTF-8 (a lone surrogate from
    a browser): the loop would fail on it and lose the dialogue, while the person can simply retype."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PersonError(f"the message cannot be stored: character {exc.start + 1} "
                          f"({text[exc.start]!a}) is a lone surrogate, not valid UTF-8; "
                          "retype that part and send it again") from None


def start_dialogue(benchmark: Benchmark, store: RunStore, scenario_id: str, person: str | Person,
                   assistant: Assistant, *, setting: str | AssistantSetting = "base",
                   prompts: PromptSet = KIT, max_turns: int | None = None) -> PersonDialogue:
    """A person's dialogue on one scenario of `benchmark` with `assistant`, stored in `store` when it
    ends; it is waiting for the opening message when returned."""
    try:
        scenario = benchmark.scenario(scenario_id)
    except KeyError:
        raise PersonError(f"scenario {scenario_id!r} is not in the benchmark at {benchmark.root}; "
                          "pick one of its scenario ids (e.g. benchmark.scenarios['scenario_id'])") from None
    player = person if isinstance(person, Person) else Person(person)
    ctx = ScenarioContext.of(scenario, benchmark.user(scenario.user_id))
    return PersonDialogue(store, ctx, player, assistant, setting=setting, prompts=prompts,
                          max_turns=max_turns)


# -- fidelity: people against the simulator ----------------------------------------------------------

PEOPLE = "people"
SIMULATOR = "simulator"
CELL = ("scenario_id", "assistant_setting", "assistant_backend", "assistant_model_id",
        "dialogue_prompt_set")
"""What makes a person's and a simulated dialogue comparable: same scenario, assistant, setting,
prompts."""
MEASURES: tuple[tuple[str, str], ...] = (
    ("turns", "Turns"),
    ("words_per_turn", "Words per user turn"),
    ("stated_first", "Preferences stated in first message"),
    ("disclosed", "Preferences disclosed overall"),
    *((name, f"{label[0].upper()}{label[1:]} (%)") for name, label in FLAG_NAMES.items()),
    (TASK_COMPLETION, "TC (%)"),
    (PERSONALIZATION, "P (1-4)"),
)
"""The fidelity table's rows: the per-dialogue measure and how the table names it."""
PERCENT = (*FLAGS, TASK_COMPLETION)


class FidelityError(KitError, ValueError):
    """No comparison can be made: no people's dialogues, no scenario both cover, or several simulators
    to choose between."""


def _text_measures(dialogue: Dialogue, context: Mapping[str, Any]) -> dict[str, float]:
    said = [t.content for t in dialogue.turns if t.role == "user"]
    found = [m for m in mentions(context) if m.role == "user"]
    return {
        "turns": float(len(said)),
        "words_per_turn": float(np.mean([len(words_of(s).split()) for s in said])) if said else np.nan,
        "stated_first": float(len({m.preference for m in found if m.index == 0})),
        "disclosed": float(len({m.preference for m in found})),
        **{name: 100.0 * bool(flag(dialogue, context)) for name, flag in FLAGS.items()},
    }


def fidelity_frame(stores: Stores, benchmark: Benchmark, *, simulator: str | None = None,
                   judge_model: str | None = None) -> pd.DataFrame:
    """One row per finished dialogue of the scenarios people and the simulator both cover (same
    assistant, setting and prompts): `arm` (people or simulator), the scenario's `user_id`, the `cell`
    compared, the `user_style` the simulator played (people's rows: cooperative), and each measure of
    `MEASURES` (TC and P: the judge's mean over its samples; missing when not judged). `stores` is one
    run store or folder, or several read together (people's run folder and the simulator's);
    `simulator` names the simulated user model when they hold several."""
    with reading(stores) as source:
        frame = _covered(source, simulator)
        read = _read(source, frame["dialogue_id"].tolist())
        # one read per style: two styles on one scenario are not a clash here; several judges still are
        tidy = pd.concat([load_scores(source, judge_model=judge_model, dialogue_ids=list(ids))
                          for _, ids in frame.groupby("user_style", observed=True)["dialogue_id"]])
        origin = f"run store {source.name}/"
    context_for = benchmark_contexts(benchmark)
    rows = []
    for row in frame.sort_values("dialogue_id").itertuples(index=False):
        dialogue = read[row.dialogue_id]
        rows.append({"dialogue_id": row.dialogue_id, "arm": row.arm, "user_id": int(row.user_id),
                     "cell": row.cell, "user_model": str(row.user_model), "user_style": str(row.user_style),
                     **_text_measures(dialogue, context_for(dialogue))})
    out = pd.DataFrame(rows)
    judged = tidy[tidy["dimension"].isin([TASK_COMPLETION, PERSONALIZATION])]
    means = judged.groupby(["dialogue_id", "dimension"], observed=True)["score"].mean().unstack()
    for name in (TASK_COMPLETION, PERSONALIZATION):
        factor = 100.0 if name == TASK_COMPLETION else 1.0
        found = means[name] if name in means.columns else pd.Series(dtype=float)
        out[name] = out["dialogue_id"].map(found).astype(float) * factor
    out.attrs["origin"] = origin
    out.attrs["backends"] = {*frame["user_backend"].astype(str), *frame["assistant_backend"].astype(str)}
    return out


def _covered(source: Columnar, simulator: str | None) -> pd.DataFrame:
    """The finished dialogues (summaries) of the cells both people and the simulator played, with
    their `arm` and `cell`."""
    frame = load_dialogues(source)
    frame = frame[frame["dialogue_status"].isin(list(JUDGEABLE_STATUSES))]
    frame = frame.assign(arm=np.where(frame["user_backend"].astype(str) == HUMAN, PEOPLE, SIMULATOR),
                         cell=frame[list(CELL)].astype(str).agg(" | ".join, axis=1))
    people = frame[frame["arm"] == PEOPLE]
    if people.empty:
        raise FidelityError(f"the run store {source.name}/ holds no finished dialogues played by people "
                            "(user backend 'human'): play some with explore.play_user first")
    covered = set(people["cell"]) & set(frame.loc[frame["arm"] == SIMULATOR, "cell"])
    frame = frame[frame["cell"].isin(covered)]
    models = sorted(set(frame.loc[frame["arm"] == SIMULATOR, "user_model"].astype(str)))
    if simulator is not None:
        if simulator not in models:
            raise FidelityError(f"simulator={simulator!r} played none of the scenarios people played; "
                                f"simulated user models there: {models}")
        frame = frame[(frame["arm"] == PEOPLE) | (frame["user_model"].astype(str) == simulator)]
    elif len(models) > 1:
        raise FidelityError(f"several simulated user models cover the people's scenarios ({models}): "
                            "name one with simulator=")
    if frame.empty:
        raise FidelityError(f"no scenario of the run store {source.name}/ was played by a person and by "
                            "the simulator with the same assistant, setting and prompts: simulate those "
                            "scenarios (notebook 03) or play scenarios the simulator ran")
    return frame


def _read(source: Columnar, ids: Sequence[str]) -> dict[str, Dialogue]:
    """The dialogues `ids` in full, read from where the columnar copy says their lines are (not the
    whole store: the simulator's part may be large)."""
    where = source.sql("SELECT _source, _offset, _length FROM dialogues WHERE id IN "
                       "(SELECT unnest(?::VARCHAR[])) ORDER BY id", [sorted(ids)])
    return {d.id: d for d in source.records(Dialogue, where)}  # type: ignore[misc]


def _cells(frame: pd.DataFrame, measure: str) -> pd.DataFrame:
    """Per scenario cell both arms scored on `measure`: the design frame of `measures.bootstrap` (user,
    task = cell, arm, score), one row per dialogue."""
    part = frame[frame[measure].notna()]
    both = part.groupby("cell")["arm"].nunique()
    part = part[part["cell"].isin(both[both == 2].index)]
    return pd.DataFrame({USER: part["user_id"].to_numpy(), TASK: part["cell"].to_numpy(),
                         ARM: part["arm"].to_numpy(), SCORE: part[measure].to_numpy(dtype=float)})


def _fmt(interval: Interval, digits: int) -> str:
    """A mean with its interval in brackets, or the mean alone where the interval is withheld."""
    if np.isnan(interval.estimate):
        return "n/a"
    if interval.withheld or np.isnan(interval.low):
        return f"{interval.estimate:.{digits}f}"
    return f"{interval.estimate:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def _compare(frame: pd.DataFrame, *, seed: int,
             n_resamples: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """People against the simulated dialogues of `frame`, measure by measure: the shown rows, their
    numbers, and whether some cell's interval was withheld as resting on too few users."""
    rows, data, thin = [], [], False
    for measure, label in MEASURES:
        design = _cells(frame, measure)
        users = design[USER].nunique()
        digits = 1 if measure in PERCENT else 2
        if design.empty:
            rows.append({"Measure": label, "People": "n/a", "Simulator": "n/a", "People - simulator": "n/a",
                         "Scenarios": 0, "Users": 0})
            continue
        scenario_means = design.groupby([USER, TASK, ARM], sort=True)[SCORE].mean().reset_index()
        arms = {arm: scenario_means[scenario_means[ARM] == arm] for arm in (PEOPLE, SIMULATOR)}
        intervals = {arm: cluster_ci(part[SCORE], part[USER], n_resamples=n_resamples, seed=seed)
                     for arm, part in arms.items()}
        diff = paired_difference(design, PEOPLE, SIMULATOR, n_resamples=n_resamples, seed=seed).difference
        thin |= any(i.withheld for i in (*intervals.values(), diff))
        rows.append({"Measure": label, "People": _fmt(intervals[PEOPLE], digits),
                     "Simulator": _fmt(intervals[SIMULATOR], digits),
                     "People - simulator": _fmt(diff, digits), "Scenarios": int(diff.n),
                     "Users": int(users)})
        data.append({"measure": measure, "people": intervals[PEOPLE].estimate,
                     "simulator": intervals[SIMULATOR].estimate, "difference": diff.estimate,
                     "ci_low": diff.low, "ci_high": diff.high,
                     "scenarios": int(diff.n), "users": int(users)})
    return rows, data, thin


def _closest(data: pd.DataFrame) -> str:
    """The caption's sentence naming, per measure, the style closest to people, only where the margin
    is clear: the far end of its distance interval (|people - style|) lies below the near end of every
    other style's. A withheld interval (too few users) names nothing, and the sentence says so."""
    named, unclear = [], False
    for measure, label in MEASURES:
        rows = data[data["measure"] == measure]
        if len(rows) < 2:
            continue
        if rows[["ci_low", "ci_high"]].isna().any().any():
            unclear = True
            continue
        far = rows[["ci_low", "ci_high"]].abs().max(axis=1)
        near = rows[["ci_low", "ci_high"]].abs().min(axis=1).where(rows["ci_low"] * rows["ci_high"] > 0, 0.0)
        best = rows["difference"].abs().idxmin()
        if (far[best] < near.drop(best)).all():
            named.append(f"{rows.at[best, 'style']} on {label[0].lower()}{label[1:]}")
    if named:
        return ("Closest to people by a clear margin (its interval of |people - style| below every other "
                f"style's): {'; '.join(named)}. ")
    if unclear:
        return (f"The sample is too small to name the style closest to people (fewer than {MIN_CLUSTERS} "
                "benchmark users, or resamples that all agree). ")
    return "No style is closer to people than the others by a clear margin on any measure. "


def fidelity_table(frame: pd.DataFrame, *, seed: int = 0,
                   n_resamples: int = DEFAULT_RESAMPLES) -> TableResult:
    """People against the simulator on the scenarios both cover (`fidelity_frame`): each measure's
    mean per arm and the difference (people minus simulator, per scenario, averaged), with cluster
    bootstrap intervals over users where the kit's thin-data rule allows one (`MIN_CLUSTERS` users, a
    non-zero width); means only elsewhere (the caption says why). Where the simulator played another
    style than cooperative, one row group per style (`Style`), compared on the scenarios that style
    shares with people, so that the caption can name the style closest to people; a cooperative-only
    frame gives the table it always gave."""
    simulated = frame["arm"] == SIMULATOR
    styles = [s for s in USER_STYLES if s in set(frame.loc[simulated, "user_style"])]
    if styles == [COOPERATIVE]:
        rows, data, thin = _compare(frame, seed=seed, n_resamples=n_resamples)
        table, numbers, counted, closest = pd.DataFrame(rows), pd.DataFrame(data), "", ""
    else:
        parts = [(style, _compare(frame[~simulated | (frame["user_style"] == style)], seed=seed,
                                  n_resamples=n_resamples)) for style in styles]
        thin = any(part[2] for _, part in parts)
        table = pd.DataFrame([{"Style": style, **row} for style, part in parts for row in part[0]])
        numbers = pd.DataFrame([{"style": style, **row} for style, part in parts for row in part[1]])
        per_style = frame.loc[simulated, "user_style"].value_counts()
        counted = f" ({', '.join(f'{style} {per_style[style]}' for style in styles)})"
        closest = _closest(numbers) if len(styles) > 1 else ""
    people = frame.loc[~simulated]
    backends = frame.attrs.get("backends", set())
    intervals = (f"{method_note(n_resamples=n_resamples)}; people minus simulator is paired by scenario. "
                 if not thin else "")
    why = (f"Cells resting on fewer than {MIN_CLUSTERS} benchmark users (or whose resamples all agree) show "
           "means only: a bootstrap over so few users does not hold its stated coverage. " if thin else "")
    caption = (
        "People as the user against the simulated user on the scenarios both played with the same "
        "assistant, setting and prompts: means per arm, each scenario's dialogues averaged first. "
        f"{len(people)} dialogues by {people['user_model'].nunique()} people, "
        f"{int(simulated.sum())} simulated{counted}; preferences stated or disclosed count the "
        "task's relevant preference types whose values the user wrote; flags are the user-agent audit's "
        "(heuristics); TC and P are the judge's (a row's scenarios are those judged in both arms). "
        + intervals + why + closest
    ).strip() + provenance_note(backends)
    source = Source.of(frame.attrs.get("origin", "a fidelity frame"), len(frame), Dialogue.table, backends,
                       sorted(set(frame["user_model"])))
    printed = printed_by_style if "Style" in table.columns else None
    return TableResult(table, caption, source, numbers, precision=2, printed=printed)


def printed_by_style(shown: pd.DataFrame) -> Printed:
    """The fidelity table with several styles for a paper: a heading per style above its measures, so the
    style is not repeated on every row."""
    frame = shown.assign(Style="User style: " + shown["Style"].astype(str))
    return Printed((Block(frame.reset_index(drop=True), group="Style"),))
