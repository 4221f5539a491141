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
judge reads them (`llm.offline.judge.words_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

from personalens_utils.analysis.scores import columnar, load_dialogues
from personalens_utils.analysis.tables import (
    ASSISTANT_DIMENSIONS,
    MAIN_SETTING,
    LeftOut,
    provenance_note,
    table3_beside,
)
from personalens_utils.assistants.python import row_label
from personalens_utils.data import Benchmark
from personalens_utils.judging import JUDGEABLE_STATUSES, benchmark_contexts
from personalens_utils.judging.config import Select
from personalens_utils.llm.offline.judge import mentions, words_of
from personalens_utils.outputs.latex import Block, Printed
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.reference.schema import load_schema
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore

REPEAT_OVERLAP = 0.8
ASSISTANT_MARKERS = (
    "assistant:", "as an ai", "as your assistant", "how can i help you", "how may i help you",
    "how can i assist you", "how may i assist you", "i'd be happy to help you",
    "i would be happy to help you",
    "is there anything else i can help", "here are some options for you",
)
"""Phrases of an assistant, not of a user asking for help (lower case)."""
NOT_VALUES = {"no preference", "none", "n a", "any", "not applicable"}

Flag = Callable[[Dialogue, Mapping[str, Any]], bool]


def _user_messages(dialogue: Dialogue) -> list[str]:
    return [t.content for t in dialogue.turns if t.role == "user" and t.content.strip()]


def states_preferences(dialogue: Dialogue, context: Mapping[str, Any]) -> bool:
    """The opening user message holds a value of a relevant preference type of the task."""
    return any(m.index == 0 and m.role == "user" for m in mentions(context))


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


def audit_dialogues(store: RunStore, benchmark: Benchmark, flags: Mapping[str, Flag] = FLAGS,
                    select: Select | None = None) -> pd.DataFrame:
    """One row per finished dialogue of `store` (those `select` keeps, when given): its models, setting
    and task type, and each flag."""
    context_for = benchmark_contexts(benchmark)
    rows = []
    for dialogue in _finished(store):
        if select is not None and not select(dialogue):
            continue
        context = context_for(dialogue)
        rows.append({"dialogue_id": dialogue.id, "user_model": dialogue.user_model,
                     "assistant_model": dialogue.assistant_model,
                     "assistant_setting": dialogue.assistant_setting,
                     "task_type": dialogue.task_type,
                     **{name: bool(flag(dialogue, context)) for name, flag in flags.items()}})
    columns = ["dialogue_id", "user_model", "assistant_model", "assistant_setting", "task_type", *flags]
    frame = pd.DataFrame(rows, columns=columns)
    frame["any_flag"] = frame[list(flags)].any(axis=1) if len(frame) else pd.Series(dtype=bool)
    frame.attrs["origin"] = f"run store {store.root.name}/"
    frame.attrs["backends"] = _backends(store)
    return frame


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
