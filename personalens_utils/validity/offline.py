"""Offline failure reviewer: which party caused a dialogue's poor result, from evidence in its text.

It answers a review context (a judge context with the judge's `verdicts`, `prompt_sets.review`) in the
format a real reviewer is asked for, by plain rules tried in order; the first that fires names the
party, the fault and the message (numbered from 1) that shows it:

1. the judge: its score says the opposite of its own explanation ("the goal is met" with a False
   verdict; "level 4" with a score of 1), or it missed what the conversation holds (the offline
   judge's evidence gives a verdict of met, or a personalization two levels above the score);
2. the user agent: it spoke as the assistant; it closed the conversation after its opening message
   with preferences of the task never raised by anyone (ended early);
3. the assistant: the user stated a value of a relevant preference type and the assistant never
   applied it (ignored the user);
4. the user agent: it repeated itself twice or more without being ignored (looped); it named an
   option of a relevant categorical type its profile does not hold (contradicted its profile); it
   ended after its opening with relevant values never said by anyone (withheld);
5. the assistant: the user's last message got no reply (left unanswered); personalization is low or
   the task failed with relevant preferences applied only when told or never (not proactive);
6. nobody.

The rules are the offline judge's evidence (`judging.offline.preference_use`) read by a second role: they find
the planted faults of the validity tests, not every fault a real reviewer would.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from personalens_utils.base.words import words_of
from personalens_utils.judging.offline import (
    PreferenceUse,
    judge_answer,
    mentions,
    personalization_score,
    preference_use,
)
from personalens_utils.llm.types import Request
from personalens_utils.reference.schema import load_schema

LOW_PERSONALIZATION = 2
"""A personalization score at or below this is a poor result."""
REPEAT_OVERLAP = 0.8
ASSISTANT_PHRASES = ("as an ai", "as your assistant", "how can i help you", "how may i help you",
                     "how can i assist you", "i'd be happy to help you", "is there anything else i can help")
"""Phrases of an assistant that a user asking for help does not say (lower case)."""
_SAYS_MET = re.compile(r"\b(goal|task) (is|was|has been) (fully )?(met|completed|achieved|reached)\b")
_SAYS_NOT_MET = re.compile(r"\bnot (been )?(met|completed|achieved|reached)\b")
_LEVEL = re.compile(r"\b(?:level|score of|scores?) (\d)\b")
_NON_VALUES = {"no preference", "none", "n a", "any", "not applicable"}

Finding = tuple[str, str, int | None, str]
"""(party, fault, message number or None, why)."""
Texts = list[tuple[str, str]]
"""(role, text) of each message of the dialogue, in order."""


def _texts(context: Mapping[str, Any]) -> Texts:
    return [(str(t.get("role")), str(t.get("content", ""))) for t in context.get("dialogue") or ()]


def _verdict(context: Mapping[str, Any], dimension: str) -> tuple[float | None, str] | None:
    found = (context.get("verdicts") or {}).get(dimension)
    if not found:
        return None
    score = found.get("score")
    return (None if score is None else float(score)), str(found.get("explanation") or "")


def _judge_contradicts(context: Mapping[str, Any]) -> Finding | None:
    completion = _verdict(context, "task_completion")
    if completion is not None and completion[0] is not None:
        score, why = completion
        met, not_met = bool(_SAYS_MET.search(why.lower())), bool(_SAYS_NOT_MET.search(why.lower()))
        if (score == 0 and met and not not_met) or (score == 1 and not_met):
            return ("judge", "score_contradicts_reason", None,
                    f"the task-completion verdict is {bool(score)} but its explanation says otherwise")
    personal = _verdict(context, "personalization")
    if personal is not None and personal[0] is not None:
        stated = {int(level) for level in _LEVEL.findall(personal[1].lower())}
        if stated and int(personal[0]) not in stated:
            return ("judge", "score_contradicts_reason", None,
                    f"the personalization score is {int(personal[0])} but its justification names level "
                    f"{', '.join(map(str, sorted(stated)))}")
    return None


def _judge_missed(context: Mapping[str, Any], use: PreferenceUse) -> Finding | None:
    texts = _texts(context)
    completion = _verdict(context, "task_completion")
    if completion is not None and completion[0] == 0:
        evidence = judge_answer({**context, "dimension": "task_completion"})
        last = max((k for k, (who, _) in enumerate(texts, start=1) if who == "assistant"), default=None)
        if evidence.startswith("VERDICT: True"):
            return ("judge", "missed_evidence", last,
                    "every preference of the goal is applied in the conversation and the user closed it")
    personal = _verdict(context, "personalization")
    if personal is not None and personal[0] is not None:
        evident = personalization_score(use)
        if evident >= personal[0] + 2:
            first = _first_assistant_use(context, use.proactive)
            return ("judge", "missed_evidence", first,
                    f"the assistant applied {len(use.proactive)} of {use.total} relevant preferences "
                    f"unprompted, level {evident}, not {int(personal[0])}")
    return None


def _first_assistant_use(context: Mapping[str, Any], preferences: Sequence[str]) -> int | None:
    found = [m.index for m in mentions(context) if m.role == "assistant" and m.preference in preferences]
    return min(found) + 1 if found else None


def _user_messages(texts: Texts) -> list[tuple[int, str]]:
    return [(k, text) for k, (who, text) in enumerate(texts, start=1) if who == "user" and text.strip()]


def _speaks_as_assistant(texts: Texts) -> Finding | None:
    for number, text in _user_messages(texts):
        if any(phrase in text.lower() for phrase in ASSISTANT_PHRASES):
            return ("user_agent", "answered_as_assistant", number, "a user message speaks as the assistant")
    return None


def _closing(texts: Texts) -> int | None:
    return max((k for k, (who, _) in enumerate(texts, start=1) if who == "user"), default=None)


def _ended_early(context: Mapping[str, Any], texts: Texts, use: PreferenceUse) -> Finding | None:
    if context.get("ended") != "terminated" or not use.unused or len(_user_messages(texts)) > 1:
        return None
    return ("user_agent", "ended_early", _closing(texts), "the user closed the conversation after its "
            f"opening message, never saying {', '.join(use.unused)}")


def _ignored(context: Mapping[str, Any], use: PreferenceUse) -> Finding | None:
    if not use.ignored:
        return None
    said = min(m.index for m in mentions(context) if m.role == "user" and m.preference in use.ignored)
    texts = _texts(context)
    reply = next((k for k, (who, _) in enumerate(texts, start=1) if k > said + 1 and who == "assistant"),
                 None)
    return ("assistant", "ignored_user", reply,
            f"the user stated {', '.join(use.ignored)} and the assistant never applied it")


def _looped(texts: Texts) -> Finding | None:
    seen: list[set[str]] = []
    repeats = []
    for number, text in _user_messages(texts):
        words = set(words_of(text).split())
        if any(len(words & s) / len(words | s) >= REPEAT_OVERLAP for s in seen):
            repeats.append(number)
        seen.append(words)
    if len(repeats) < 2:
        return None
    return ("user_agent", "looped", repeats[1], f"{len(repeats)} user messages repeat an earlier one")


def _held(value: Any) -> set[str]:
    items = value if isinstance(value, list | tuple) else [value]
    return {words_of(v) for v in items if isinstance(v, str) and words_of(v).strip() not in _NON_VALUES}


def _contradicts(context: Mapping[str, Any], texts: Texts) -> Finding | None:
    task = context.get("task") or {}
    preferences = context.get("preferences") or {}
    schema = load_schema()
    for name in task.get("relevant_preferences") or ():
        for kind in schema.resolve_preference(name, list(task.get("domains") or ())):
            held = _held(preferences.get(kind.domain, {}).get(kind.name))
            if not kind.categorical or not held:
                continue
            others = {o for o in _held(list(kind.options)) - held if not any(o.strip() in h for h in held)}
            for number, text in _user_messages(texts):
                if any(o in words_of(text) for o in others):
                    return ("user_agent", "contradicted_profile", number,
                            f"the user asked for an option of {kind.name} its profile does not hold")
    return None


def _withheld(context: Mapping[str, Any], texts: Texts, use: PreferenceUse) -> Finding | None:
    if not use.unused or context.get("ended") != "terminated":
        return None
    return ("user_agent", "withheld", _closing(texts),
            f"the user closed the conversation never saying {', '.join(use.unused)}")


def _assistant_weak(context: Mapping[str, Any], texts: Texts, use: PreferenceUse) -> Finding | None:
    if texts and texts[-1][0] == "user" and texts[-1][1].strip() and context.get("ended") != "terminated":
        return ("assistant", "left_unanswered", len(texts), "the user's last message got no reply")
    personal = _verdict(context, "personalization")
    completion = _verdict(context, "task_completion")
    low = personal is not None and personal[0] is not None and personal[0] <= LOW_PERSONALIZATION
    failed = completion is not None and completion[0] == 0
    waited = [*use.reactive, *use.unused]
    if (low or failed) and waited:
        first = next((k for k, (who, _) in enumerate(texts, start=1) if who == "assistant"), None)
        return ("assistant", "not_proactive", first,
                f"the assistant applied {', '.join(waited)} only when told, or never")
    return None


def review(context: Mapping[str, Any]) -> Finding:
    """The first finding of the rules (module docstring), or nobody."""
    texts = _texts(context)
    use = preference_use(context)
    for finding in (_judge_contradicts(context), _judge_missed(context, use), _speaks_as_assistant(texts),
                    _ended_early(context, texts, use), _ignored(context, use), _looped(texts),
                    _contradicts(context, texts), _withheld(context, texts, use),
                    _assistant_weak(context, texts, use)):
        if finding is not None:
            return finding
    return ("nobody", "none", None, "no party's fault shows in the conversation or the verdicts")


def review_answer(context: Mapping[str, Any]) -> str:
    """The offline reviewer's answer, in the form the reviewer prompt asks for."""
    party, fault, turn, why = review(context)
    return (f"PARTY: {party}\nFAULT: {fault}\nTURN: {'none' if turn is None else turn}\n"
            f"EXPLANATION: {why[0].upper()}{why[1:]}.")


def respond(request: Request, rng: random.Random) -> str:
    """A pure function of the review context."""
    return review_answer(request.context)
