"""The user-agent audit: flags on each simulated dialogue where the simulated user may have failed its
part, their rates per model, and Table 3 again without the flagged dialogues.

Every flag is a heuristic, a plain rule over the dialogue's text and the user's profile; a flagged
dialogue is worth reading, not proven bad, and an unflagged one is not proven good:

- `states_preferences`: the opening user message already holds one of the user's values for a
  preference type the task is about (the user agent is asked to let them come out in the conversation);
- `contradicts_profile`: a user message names an option of a categorical preference type of the task
  that the user's profile does not hold for that type (a "not X" counts too: a false alarm);
- `turn_cap`: the dialogue hit the turn cap without the user's TERMINATE;
- `repetition_loop`: two or more user messages repeat an earlier user message (their word sets
  overlap by `REPEAT_OVERLAP` or more);
- `answers_as_assistant`: a user message speaks as the assistant (`ASSISTANT_MARKERS`).

Values are matched as whole words after lower-casing and dropping punctuation, the way the offline
judge reads them (`base.words.words_of`).

`style_checks` asks whether each user-agent style other than `cooperative` (`prompt_templates.user_styles`)
took effect, pass, fail or not measured, from measures `audit_dialogues` keeps per dialogue: a `reticent`
user opens without a preference value beyond what its task's own wording carries (the request is not a
disclosure) and states one later only when the assistant's message before names
that preference or gives it another value; a `terse` user writes clearly fewer words a message than the
cooperative user of the same store; an `impatient` user leaves right after two assistant turns in a row
that apply no value of the user's not applied before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

from personalens_utils.analysis.tables import LeftOut, table3_beside
from personalens_utils.assistants.python import row_label
from personalens_utils.base.words import words_of
from personalens_utils.data import Benchmark
from personalens_utils.judging import JUDGEABLE_STATUSES, benchmark_contexts
from personalens_utils.judging.config import Select
from personalens_utils.judging.offline import Mention, mentions
from personalens_utils.measures.display import ASSISTANT_DIMENSIONS, MAIN_SETTING, provenance_note
from personalens_utils.measures.scores import columnar, load_dialogues
from personalens_utils.outputs.latex import Block, Printed
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, USER_STYLES
from personalens_utils.reference.schema import load_schema
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation.offline import preferences_named
from personalens_utils.trust.report_card import FAIL, NOT_MEASURED, PASS

REPEAT_OVERLAP = 0.8
ASSISTANT_MARKERS = (
    "assistant:", "as an ai", "as your assistant", "how can i help you", "how may i help you",
    "how can i assist you", "how may i assist you", "i'd be happy to help you",
    "i would be happy to help you",
    "is there anything else i can help", "here are some options for you",
)
"""Phrases of an assistant, not of a user asking for help (lower case)."""
NOT_VALUES = {"no preference", "none", "n a", "any", "not applicable"}
RETICENT_MAX = 0.05
"""A reticent user passes when at most this share of its openings, and of its later messages, states a
preference value unprompted: a style that took effect leaves almost none."""
TERSE_RATIO = 0.75
"""A terse user passes when its mean words per message are at most this fraction of the cooperative
user's in the same store: clearly shorter, not merely shorter by chance."""
IMPATIENT_MAX = 0.05
"""An impatient user passes when it stays on after a two-turn stall in at most this share of the
dialogues where the assistant stalled."""
STALL = 2
"""Assistant turns in a row applying no new value of the user's after which an impatient user leaves."""

Flag = Callable[[Dialogue, Mapping[str, Any]], bool]


def _user_messages(dialogue: Dialogue) -> list[str]:
    return [t.content for t in dialogue.turns if t.role == "user" and t.content.strip()]


def states_preferences(dialogue: Dialogue, context: Mapping[str, Any]) -> bool:
    """The opening user message holds a value of a relevant preference type of the task."""
    return any(m.index == 0 and m.role == "user" for m in mentions(context))


def volunteered_opening(dialogue: Dialogue, context: Mapping[str, Any]) -> bool:
    """The opening user message holds a relevant value that the task's own wording (its intent and
    description) does not: a preference the user disclosed, not the request it was given to make."""
    task = context["task"]
    given = words_of(" ".join(str(task.get(field) or "") for field in ("user_intent", "task_description")))
    return any(m.index == 0 and m.role == "user" and words_of(m.value) not in given
               for m in mentions(context))


def _atoms(value: Any) -> set[str]:
    items = value if isinstance(value, list | tuple) else [value]
    return {words_of(str(v)) for v in items if isinstance(v, str) and words_of(v).strip() not in NOT_VALUES}


def contradicts_profile(dialogue: Dialogue, context: Mapping[str, Any]) -> bool:
    """A user message names an option of a categorical relevant type that the profile does not hold."""
    schema = load_schema()
    task = context["task"]
    said = [words_of(text) for text in _user_messages(dialogue)]
    for name in task.get("relevant_preferences") or ():
        for kind in schema.resolve_preference(name, list(task["domains"])):
            if not kind.categorical:
                continue
            held = _atoms((context.get("preferences") or {}).get(kind.domain, {}).get(kind.name))
            others = _atoms(list(kind.options)) - held
            others = {o for o in others if not any(o.strip() in h for h in held)}
            if any(o in text for o in others for text in said):
                return True
    return False


def turn_cap(dialogue: Dialogue, context: Mapping[str, Any]) -> bool:
    """The dialogue stopped at the turn cap, without the user's TERMINATE."""
    return dialogue.status == "turn_cap"


def repetition_loop(dialogue: Dialogue, context: Mapping[str, Any]) -> bool:
    """Two or more user messages nearly repeat an earlier user message."""
    seen: list[set[str]] = []
    repeats = 0
    for text in _user_messages(dialogue):
        words = set(words_of(text).split())
        if any(len(words & s) / len(words | s) >= REPEAT_OVERLAP for s in seen):
            repeats += 1
        seen.append(words)
    return repeats >= 2


def answers_as_assistant(dialogue: Dialogue, context: Mapping[str, Any]) -> bool:
    """A user message speaks as the assistant."""
    return any(marker in text.lower() for text in _user_messages(dialogue) for marker in ASSISTANT_MARKERS)


FLAGS: dict[str, Flag] = {
    "states_preferences": states_preferences,
    "contradicts_profile": contradicts_profile,
    "turn_cap": turn_cap,
    "repetition_loop": repetition_loop,
    "answers_as_assistant": answers_as_assistant,
}
FLAG_NAMES = {
    "states_preferences": "opening states preferences",
    "contradicts_profile": "contradicts profile",
    "turn_cap": "turn cap, no TERMINATE",
    "repetition_loop": "repetition loop",
    "answers_as_assistant": "answers as assistant",
}
HEURISTIC_NOTE = ("Flags are heuristics (plain rules over the text and the profile, docs/trust.md): a "
                  "flagged dialogue is worth reading, not proven faulty.")


def _kinds(mention: Mention) -> set[tuple[str, str]]:
    kinds = load_schema().resolve_preference(mention.preference, [mention.domain])
    return {(k.domain, k.name) for k in kinds}


def unprompted_statements(dialogue: Dialogue, context: Mapping[str, Any]) -> int:
    """User messages after the opening that state a value of a relevant type the assistant's message
    before neither named (`preferences_named`, as the offline user reads a question) nor gave another
    option of: what a reticent user should never write."""
    turns = [(t.role, t.content) for t in dialogue.turns]
    domains = tuple(context["task"]["domains"])
    schema = load_schema()
    unprompted = set()
    for mention in mentions(context):
        if mention.role != "user" or mention.index == 0 or turns[mention.index - 1][0] != "assistant":
            continue
        before = turns[mention.index - 1][1]
        named = {(k.domain, k.name) for k in preferences_named(before, domains)}
        options = {o for d, n in _kinds(mention) for o in schema.preference(d, n).options
                   if words_of(o) != words_of(mention.value)}
        if not (named & _kinds(mention) or any(words_of(o) in words_of(before) for o in options)):
            unprompted.add(mention.index)
    return len(unprompted)


def stayed_after_stall(dialogue: Dialogue, context: Mapping[str, Any]) -> float:
    """1 when the user wrote again after answering `STALL` assistant turns in a row that applied no
    value of the user's not applied before, 0 when it left then, NaN when the assistant never stalled so
    with a user message after (nothing to measure)."""
    applied: dict[int, set[tuple[str, str, str]]] = {}
    for m in mentions(context):
        if m.role == "assistant":
            applied.setdefault(m.index, set()).add((m.preference, m.domain, m.value))
    seen: set[tuple[str, str, str]] = set()
    stalled = 0
    roles = [t.role for t in dialogue.turns]
    for index, role in enumerate(roles):
        if role != "assistant":
            continue
        new = applied.get(index, set()) - seen
        seen |= new
        stalled = 0 if new else stalled + 1
        if stalled >= STALL and "user" in roles[index + 1:]:
            return float(roles[index + 1:].count("user") > 1)
    return float("nan")


def audit_dialogues(store: RunStore, benchmark: Benchmark, flags: Mapping[str, Flag] = FLAGS,
                    select: Select | None = None) -> pd.DataFrame:
    """One row per finished dialogue of `store` (those `select` keeps, when given): its models, setting,
    task type and user-agent style, each flag, and the measures `style_checks` reads."""
    context_for = benchmark_contexts(benchmark)
    rows = []
    for dialogue in _finished(store):
        if select is not None and not select(dialogue):
            continue
        context = context_for(dialogue)
        said = _user_messages(dialogue)
        rows.append({"dialogue_id": dialogue.id, "user_model": dialogue.user_model,
                     "assistant_model": dialogue.assistant_model,
                     "assistant_setting": dialogue.assistant_setting,
                     "task_type": dialogue.task_type, "user_style": dialogue.user_style,
                     **{name: bool(flag(dialogue, context)) for name, flag in flags.items()},
                     "user_messages": len(said), "user_words": sum(len(text.split()) for text in said),
                     "volunteered_opening": volunteered_opening(dialogue, context),
                     "unprompted_statements": unprompted_statements(dialogue, context),
                     "stayed_after_stall": stayed_after_stall(dialogue, context)})
    columns = ["dialogue_id", "user_model", "assistant_model", "assistant_setting", "task_type", "user_style",
               *flags, *MEASURES]
    frame = pd.DataFrame(rows, columns=columns)
    frame["any_flag"] = frame[list(flags)].any(axis=1) if len(frame) else pd.Series(dtype=bool)
    frame.attrs["origin"] = f"run store {store.root.name}/"
    frame.attrs["backends"] = _backends(store)
    return frame


MEASURES = ("user_messages", "user_words", "volunteered_opening", "unprompted_statements",
            "stayed_after_stall")
"""The per-dialogue measures of the style checks, after the flags in `audit_dialogues`'s frame."""


def _verdict(style: str, check: str, estimate: float, limit: float, n: int, compared: str) -> dict[str, Any]:
    return {"Style": style, "Check": check, "Verdict": PASS if estimate <= limit else FAIL,
            "Estimate": estimate, "Pass at or below": limit, "n": n, "Note": compared}


def _unmeasured(style: str, check: str, why: str) -> dict[str, Any]:
    return {"Style": style, "Check": check, "Verdict": NOT_MEASURED, "Estimate": float("nan"),
            "Pass at or below": float("nan"), "n": 0, "Note": why}


OPENING_CHECK = "opening states a preference beyond the task's wording (share)"


def _style_rows(style: str, mine: pd.DataFrame, cooperative: pd.DataFrame) -> list[dict[str, Any]]:
    """The checks of one style on its dialogues (`mine`), the terse one against `cooperative`'s."""
    absent = f"no {style} dialogues in the store"
    if style == "reticent":
        later = int((mine["user_messages"] - 1).clip(lower=0).sum())
        return [
            _verdict(style, OPENING_CHECK, float(mine["volunteered_opening"].mean()), RETICENT_MAX, len(mine),
                     "of dialogues; a value the task's own wording carries is the request, not a disclosure")
            if len(mine) else _unmeasured(style, OPENING_CHECK, absent),
            _verdict(style, "unprompted preference (share of later messages)",
                     float(mine["unprompted_statements"].sum()) / later, RETICENT_MAX, later,
                     "the assistant's message before neither named the preference nor gave it another value")
            if later else _unmeasured(style, "unprompted preference (share of later messages)",
                                      absent if not len(mine) else "no user message after the opening"),
        ]
    if style == "terse":
        check = "words per message, over cooperative's"
        if not len(mine) or not cooperative["user_messages"].sum():
            return [_unmeasured(style, check, absent if not len(mine) else "no cooperative dialogues in the "
                                "store to compare with")]
        ratio = (mine["user_words"].sum() / mine["user_messages"].sum()) / (
            cooperative["user_words"].sum() / cooperative["user_messages"].sum())
        return [_verdict(style, check, float(ratio), TERSE_RATIO, len(mine),
                         f"against {len(cooperative)} cooperative dialogues")]
    if style == "impatient":
        check = f"stays after {STALL} stalled assistant turns (share)"
        stalled = mine["stayed_after_stall"].dropna()
        if not len(stalled):
            return [_unmeasured(style, check, absent if not len(mine) else
                                f"the assistant never stalled {STALL} turns in a row before a user message")]
        return [_verdict(style, check, float(stalled.mean()), IMPATIENT_MAX, len(stalled),
                         "of dialogues where the assistant stalled")]
    return [_unmeasured(style, "style took effect", "the audit has no check for this style yet")]


def style_checks(audit: pd.DataFrame) -> TableResult:
    """Whether each user-agent style other than cooperative took effect, per style whether or not the
    audited dialogues hold it (an absent one is not measured, never a pass)."""
    cooperative = audit[audit["user_style"] == COOPERATIVE]
    rows = [row for style in USER_STYLES if style != COOPERATIVE
            for row in _style_rows(style, audit[audit["user_style"] == style], cooperative)]
    caption = (f"User-agent styles: whether each style took effect, pass, fail or not measured. Reticent: "
               f"the share of openings stating a preference value the task's own wording does not carry, and "
               f"of later user messages stating one "
               f"the assistant's message before neither named nor gave another value, each at most "
               f"{RETICENT_MAX:g}. Terse: mean words per user message over the cooperative user's in the "
               f"same store, at most {TERSE_RATIO:g}. Impatient: among dialogues where {STALL} assistant "
               f"turns in a row applied nothing new, the share where the user stayed on, at most "
               f"{IMPATIENT_MAX:g}. "
               + HEURISTIC_NOTE + provenance_note(audit.attrs.get("backends", set())))
    source = Source.of(audit.attrs.get("origin", "an audit frame"), len(audit), "finished dialogues",
                       audit.attrs.get("backends", set()), sorted(set(audit["user_model"])))
    return TableResult(pd.DataFrame(rows), caption, source, precision=2)


AUDIT_BATCH = 2048
"""Dialogues read in full at once by the audit: the texts of a whole run are never held together."""


def _finished(store: RunStore) -> Iterator[Dialogue]:
    """The store's finished dialogues in id order, read in batches from where the columnar copy says
    their lines are."""
    source = columnar(store)
    where = source.sql("SELECT _source, _offset, _length FROM dialogues WHERE list_contains(?, status) "
                       "ORDER BY id", [list(JUDGEABLE_STATUSES)])
    for start in range(0, len(where), AUDIT_BATCH):
        yield from source.records(Dialogue, where.iloc[start:start + AUDIT_BATCH])  # type: ignore[misc]


def _backends(store: RunStore) -> set[str]:
    dialogues = load_dialogues(store)
    return {*dialogues["user_backend"].dropna().unique(), *dialogues["assistant_backend"].dropna().unique()}


def audit_rates(audit: pd.DataFrame) -> TableResult:
    """Each flag's rate (% of dialogues) per user agent and assistant model."""
    flags = [c for c in audit.columns if c in FLAGS] + ["any_flag"]
    rows = []
    for (user, assistant), group in audit.groupby(["user_model", "assistant_model"], sort=True):
        row: dict[str, Any] = {"User agent": user, "Assistant model": row_label(assistant),
                               "Dialogues": len(group)}
        row.update({f"{FLAG_NAMES.get(f, 'any flag')} (%)": 100.0 * group[f].mean() for f in flags})
        rows.append(row)
    caption = ("User-agent audit: share of finished dialogues (%) with each flag, per user agent and "
               "assistant model. Opening states preferences: the first user message holds a value of a "
               "preference type of the task; contradicts profile: a user message names an option of such a "
               "type that the profile does not hold; turn cap: the dialogue stopped at the cap without "
               f"TERMINATE; repetition loop: two or more user messages repeat an earlier one (word overlap "
               f"{REPEAT_OVERLAP:g} or more); answers as assistant: a user message speaks as the assistant. "
               + HEURISTIC_NOTE + provenance_note(audit.attrs.get("backends", set())))
    source = Source.of(audit.attrs.get("origin", "an audit frame"), len(audit), "finished dialogues",
                       audit.attrs.get("backends", set()), sorted(set(audit["user_model"])))
    return TableResult(pd.DataFrame(rows), caption, source, precision=1, printed=printed_audit_rates)


def printed_audit_rates(shown: pd.DataFrame) -> Printed:
    """Table T2 for a paper: a heading per user agent above its assistants' rows, so its seven rates fit
    across ACL's page at `\\small` rather than in two blocks."""
    frame = shown.assign(**{"User agent": "User agent: " + shown["User agent"].astype(str)})
    return Printed((Block(frame.reset_index(drop=True), group="User agent"),))


def table3_without_flagged(tidy: pd.DataFrame, audit: pd.DataFrame, *, setting: str = MAIN_SETTING,
                           dimensions: Sequence[str] = ASSISTANT_DIMENSIONS, seed: int = 0) -> TableResult:
    """Table 3's cells on all judged dialogues and on the unflagged ones only, with the difference."""
    flagged = set(audit.loc[audit["any_flag"], "dialogue_id"])
    left_out = LeftOut(flagged, "without the dialogues the user-agent audit flagged", "Unflagged",
                       HEURISTIC_NOTE, audit.attrs.get("backends", set()))
    return table3_beside(tidy, left_out, setting=setting, dimensions=dimensions, seed=seed, cluster=None)
