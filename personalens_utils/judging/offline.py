"""Offline judge: scores a dialogue from evidence in its text, in the format a real judge writes.

The evidence is deliberately simple and inspectable. Personalization: for each relevant
preference type of the task, did the assistant mention one of the user's values for it before
the user did (proactive), only after the user did (reactive), or never? Task completion: did the
user end the dialogue (rather than the turn cap) after the assistant had applied a value for
every relevant preference type of the task (the user's own values: `oracle` when the context carries
them beside a profile shown to the judge)? Naturalness and coherence: surface signs such as
repeated or overlong turns and questions left unanswered. The answers go through the same parser
as a language model's.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from personalens_utils.base.words import words_of
from personalens_utils.llm.types import FatalError, Request

_NON_VALUES = {"no preference", "none", "n a", "any", "not applicable"}
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "the a an and or but to of in on for with at by from is are was were be been it this that these "
        "those i you we they he she me my your our their can could would should will do does did have has "
        "had what which who when where how why not no yes so if then there here just also please thanks "
        "thank about like get let sure okay ok any some all more most very really",
    )
)
FILLER = frozenset(
    re.findall(
        r"\w+",
        "hope reads clearly glance leisure revisit whenever suits everything stays exactly written simply "
        "rounds out customary manner",
    )
)
"""Courtesy words that carry no content (a closing such as "I hope this reads clearly"): never evidence
that a turn answers a question. The length-sensitivity probe's padding (`trust.probes.PADDING`) is made
of these and stop words only, so padding a turn cannot make it answer anything."""
_CONFIRMATIONS = re.compile(r"\b(yes|yeah|yep|no|nope|sure|sounds good|perfect|great|okay|ok|that works)\b")
_ROBOTIC = ("as an ai", "language model", "i am an assistant", "terminate", "user:", "assistant:")


def _atoms(value: Any) -> list[str]:
    """The normalized single values of one preference (a string or a list of strings)."""
    values = tuple(value) if isinstance(value, list | tuple) else (value,)
    return list(_atoms_of(tuple(v for v in values if isinstance(v, str))))


@lru_cache(maxsize=65536)
def _atoms_of(values: tuple[str, ...]) -> tuple[str, ...]:
    atoms = (words_of(item) for item in values)
    return tuple(a for a in atoms if a.strip() and a.strip() not in _NON_VALUES)


def _first_mention(turns: Sequence[tuple[str, str]], role: str, atoms: Iterable[str]) -> int | None:
    atoms = list(atoms)
    for index, (who, text) in enumerate(turns):
        if who == role and any(a in text for a in atoms):
            return index
    return None


@dataclass(frozen=True)
class PreferenceUse:
    """How the assistant used the task's relevant preferences over the dialogue."""

    proactive: tuple[str, ...]
    reactive: tuple[str, ...]
    ignored: tuple[str, ...]  # the user voiced it, the assistant never took it up
    unused: tuple[str, ...]  # nobody mentioned it
    context_aware: bool

    @property
    def total(self) -> int:
        return len(self.proactive) + len(self.reactive) + len(self.ignored) + len(self.unused)


def _dialogue(context: Mapping[str, Any]) -> list[tuple[str, str]]:
    dialogue = context.get("dialogue")
    if not isinstance(dialogue, list):
        raise FatalError("offline judge: request.context['dialogue'] must be a list of {role, content}")
    return [(str(t.get("role")), words_of(str(t.get("content", "")))) for t in dialogue]


def preference_use(context: Mapping[str, Any]) -> PreferenceUse:
    """Sort the task's relevant preference types by when the assistant first applied a value."""
    turns = _dialogue(context)
    task = context.get("task") or {}
    preferences = context.get("preferences") or {}
    groups: dict[str, list[str]] = {"proactive": [], "reactive": [], "ignored": [], "unused": []}
    for pref_type in task.get("relevant_preferences") or ():
        atoms = [a for by_type in preferences.values() for a in _atoms(by_type.get(pref_type))]
        if not atoms:
            continue
        if _led_by_assistant(turns, atoms):
            groups["proactive"].append(pref_type)
        elif _first_mention(turns, "assistant", atoms) is not None:
            groups["reactive"].append(pref_type)
        elif _first_mention(turns, "user", atoms) is not None:
            groups["ignored"].append(pref_type)
        else:
            groups["unused"].append(pref_type)
    situation_atoms = [
        a
        for value in (context.get("situation") or {}).values()
        if isinstance(value, str)
        for a in _atoms(value.split(","))
        if len(a.strip()) >= 4
    ]
    return PreferenceUse(
        *(tuple(groups[k]) for k in ("proactive", "reactive", "ignored", "unused")),
        context_aware=any(_led_by_assistant(turns, [atom]) for atom in situation_atoms),
    )


def _led_by_assistant(turns: Sequence[tuple[str, str]], atoms: Sequence[str]) -> bool:
    """The assistant mentioned one of `atoms` before the user did (or the user never did)."""
    by_assistant = _first_mention(turns, "assistant", atoms)
    by_user = _first_mention(turns, "user", atoms)
    return by_assistant is not None and (by_user is None or by_assistant < by_user)


@dataclass(frozen=True)
class Mention:
    """One message that holds a user's value for one of the task's relevant preference types."""

    preference: str
    domain: str
    value: str
    index: int
    """The message's index in the dialogue."""
    role: str


def mentions(context: Mapping[str, Any]) -> list[Mention]:
    """Every message holding, as whole words, a value of a relevant preference type of the task: the
    evidence `preference_use` weighs, listed for people to read (the dialogue explorer)."""
    turns = _dialogue(context)
    task = context.get("task") or {}
    found = []
    for pref_type in task.get("relevant_preferences") or ():
        for domain, by_type in (context.get("preferences") or {}).items():
            value = by_type.get(pref_type)
            for item in value if isinstance(value, list | tuple) else (value,):
                atoms = _atoms(item)
                if not atoms:
                    continue
                found += [Mention(pref_type, domain, str(item), index, who)
                          for index, (who, text) in enumerate(turns) if atoms[0] in text]
    # a task naming a preference type twice, or a value listed twice, is still one mention
    return sorted(set(found), key=lambda m: (m.index, m.preference, m.domain, m.value))


def personalization_score(use: PreferenceUse) -> int:
    """Figure 18's levels read off the evidence: share of preferences applied unprompted."""
    if use.total == 0:
        return 3 if use.context_aware else 2
    proactive = len(use.proactive) / use.total
    applied = (len(use.proactive) + len(use.reactive)) / use.total
    if proactive >= 0.75 and use.context_aware:
        return 4
    if proactive >= 0.4:
        return 3
    if proactive > 0 or applied >= 0.5:
        return 2
    return 1


def _names(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "none"


def _personalization_answer(context: Mapping[str, Any], *, turn_level: bool) -> str:
    use = preference_use(context)
    score = personalization_score(use)
    observations = (
        f"Applied before the user said them: {_names(use.proactive)}. "
        f"Applied only after the user said them: {_names(use.reactive)}. "
        f"Voiced by the user but not taken up: {_names(use.ignored)}. "
        f"Never raised: {_names(use.unused)}. "
        f"Situation referenced unprompted: {'yes' if use.context_aware else 'no'}."
    )
    justification = (
        f"{len(use.proactive)} of {use.total} relevant preference types were applied proactively, "
        f"which matches level {score} of the rubric."
    )
    if turn_level:
        return (
            f"<response>\nPersonalization Score: {score}\n"
            f"Justification: {observations} {justification}\n</response>"
        )
    missing = [*use.reactive, *use.ignored, *use.unused]
    suggestion = (
        f"Use the known values for {_names(missing)} without waiting to be told."
        if missing
        else "Keep anticipating the user's needs from the situation."
    )
    return (
        f"<response>\nPersonalization Score: {score}\nKey Observations: {observations}\n"
        f"Justification: {justification}\nImprovement Suggestions: {suggestion}\n</response>"
    )


def _task_completion_answer(context: Mapping[str, Any]) -> str:
    """The verdict on this user's own wishes: under `oracle` when the context shows the judge another
    profile (`trust.probes.ProfileSwap`), since the kit's task-completion prompt shows no profile."""
    ended = context.get("ended")
    own = (context.get("oracle") or {}).get("preferences")
    use = preference_use(context if own is None else {**context, "preferences": own})
    turns = _dialogue(context)
    last_is_assistant = bool(turns) and turns[-1][0] == "assistant"
    if ended != "terminated":
        verdict, reason = False, f"the user did not close the conversation as satisfied (it ended by {ended})"
    elif not last_is_assistant:
        verdict, reason = False, "the user's last request was never answered"
    elif use.ignored or use.unused:
        unsettled = _names([*use.ignored, *use.unused])
        verdict, reason = False, f"the goal's preferences were never settled: {unsettled}"
    else:
        verdict, reason = True, "the user closed the conversation with every preference of the goal applied"
    return f"VERDICT: {verdict}\nEXPLANATION: The goal is {'met' if verdict else 'not met'}: {reason}."


def _turns(context: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of the dialogue, without an empty closing message from a user who ended it."""
    turns = [(str(t.get("role")), str(t.get("content", ""))) for t in context["dialogue"]]
    if context.get("ended") == "terminated":
        closing = [i for i, (who, _) in enumerate(turns) if who == "user"][-1:]
        if closing and not turns[closing[0]][1].strip():
            del turns[closing[0]]
    return turns


def _utterances(context: Mapping[str, Any], role: str) -> list[str]:
    return [text for who, text in _turns(context) if who == role]


def content_words(text: str) -> set[str]:
    """The words of `text` that can carry content: not stop words, courtesy filler or short."""
    return {w for w in words_of(text).split() if len(w) >= 3 and w not in _STOPWORDS and w not in FILLER}


def _repeats(utterances: Sequence[str]) -> int:
    """Utterances that say nearly the same as an earlier one (word-set overlap of 80% or more)."""
    seen: list[set[str]] = []
    count = 0
    for text in utterances:
        words = set(words_of(text).split())
        if words and any(len(words & s) / len(words | s) >= 0.8 for s in seen):
            count += 1
        seen.append(words)
    return count


def _sentences(text: str) -> int:
    return len([s for s in re.split(r"[.!?]+(?:\s|$)", text.strip()) if s.strip()])


def _naturalness_answer(context: Mapping[str, Any], role: str) -> str:
    said = _utterances(context, role)
    if not said:
        return f"<response>\nNaturalness Score: 1\nJustification: the {role} says nothing.\n</response>"
    notes = []
    repeats = _repeats(said)
    if repeats:
        notes.append(f"{repeats} of {len(said)} turns repeat an earlier one")
    if role == "user":
        long_turns = sum(_sentences(t) > 3 or len(t.split()) > 70 for t in said)
    else:
        long_turns = sum(len(t.split()) > 160 for t in said)
    if long_turns:
        notes.append(f"{long_turns} overlong turns")
    robotic = sum(any(marker in t.lower() for marker in _ROBOTIC) for t in said)
    if robotic:
        notes.append(f"{robotic} turns with machine-like wording")
    empty = sum(not t.strip() for t in said)
    if empty:
        notes.append(f"{empty} empty turns")
    penalty = (2 if repeats * 2 >= len(said) else 1 if repeats else 0) + min(long_turns, 1) + min(robotic, 1)
    score = max(1, 5 - penalty - 2 * min(empty, 1))
    why = "; ".join(notes) if notes else "varied, concise turns with no machine-like wording"
    return f"<response>\nNaturalness Score: {score}\nJustification: The {role}'s turns: {why}.\n</response>"


def _answers(question: str, reply: str, values: Sequence[str]) -> bool:
    """Whether `reply` plausibly answers `question`: shared words, yes/no, a number or a preference value."""
    if content_words(question) & content_words(reply) or _CONFIRMATIONS.search(reply.lower()):
        return True
    normalized = words_of(reply)
    return bool(re.search(r"\d", reply)) or any(v in normalized for v in values)


def _coherence_answer(context: Mapping[str, Any], role: str) -> str:
    dialogue = _turns(context)
    said = [text for who, text in dialogue if who == role]
    if not said:
        return f"<response>\nCoherence Score: 1\nJustification: the {role} says nothing.\n</response>"
    values = [a for by_type in (context.get("preferences") or {}).values() for v in by_type.values()
              for a in _atoms(v)]
    questions = [
        (dialogue[i - 1][1], text)
        for i, (who, text) in enumerate(dialogue)
        if who == role and i > 0 and dialogue[i - 1][1].rstrip().endswith("?")
    ]
    unanswered = sum(not _answers(prev, text, values) for prev, text in questions)
    exact = len(said) - len({words_of(t) for t in said})
    empty = sum(not t.strip() for t in said)
    penalty = 2 if unanswered * 2 > len(questions) else 1 if unanswered else 0
    penalty += min(exact, 1) + 2 * min(empty, 1)
    score = max(1, 5 - penalty)
    why = (
        f"{len(questions) - unanswered} of {len(questions)} questions from the other side answered, "
        f"{exact} turns repeated word for word, {empty} empty turns"
    )
    return f"<response>\nCoherence Score: {score}\nJustification: The {role}'s turns: {why}.\n</response>"


def judge_answer(context: Mapping[str, Any]) -> str:
    """The offline judge's answer for one dimension, from the request context alone."""
    dimension = context.get("dimension")
    if dimension == "task_completion":
        return _task_completion_answer(context)
    if dimension == "personalization":
        return _personalization_answer(context, turn_level=False)
    if dimension == "turn_personalization":
        return _personalization_answer(context, turn_level=True)
    family, _, role = str(dimension).rpartition("_")
    if role in ("assistant", "user") and family == "naturalness":
        return _naturalness_answer(context, role)
    if role in ("assistant", "user") and family == "coherence":
        return _coherence_answer(context, role)
    raise FatalError(f"offline judge: unknown dimension {dimension!r} in request.context['dimension']")


SAMPLE_JITTER = 0.25
"""How often a judge sample other than the first moves a score one level (seeded by the request)."""
_SCORE_LINE = re.compile(r"(Score: )(\d+)")


def _jittered(answer: str, dimension: str, rng: random.Random) -> str:
    """`answer` with each score moved one level up or down with probability `SAMPLE_JITTER`, kept on the
    dimension's scale: a small, seeded judge noise, so repeated judgments vary as a real judge's do."""
    top = 4 if "personalization" in dimension else 5

    def move(match: re.Match[str]) -> str:
        score = int(match.group(2))
        if rng.random() >= SAMPLE_JITTER:
            return match.group(0)
        step = rng.choice((-1, 1))
        moved = score + step if 1 <= score + step <= top else score - step
        return f"{match.group(1)}{min(top, max(1, moved))}"

    return _SCORE_LINE.sub(move, answer)


def respond(request: Request, rng: random.Random) -> str:
    """The answer is a pure function of the evidence for sample 0; later samples (`Request.sample`) add
    a seeded jitter to the scores (task completion's verdict stays as the evidence says)."""
    answer = judge_answer(request.context)
    return _jittered(answer, str(request.context.get("dimension")), rng) if request.sample else answer
