"""Offline responders for the two dialogue agents: a rule-based simulated user and assistant.

Simulated user (USER_TURN): opens with a short request built from the task's intent and no
preference values; afterwards it answers what the assistant asks, corrects it when it mentions a
relevant preference without the user's value, and otherwise volunteers one or two relevant
preferences it has not seen applied yet. It says TERMINATE once every relevant preference of the
task appears in the assistant's replies and the assistant is no longer asking, or gives up (also
with TERMINATE) after stating a preference twice in vain or after too many turns. That is the
`cooperative` user-agent style (the paper's); the request's `user_style` context entry may pick another
(`prompt_templates.user_styles`): `reticent` states a preference only when asked or contradicted, `terse`
says as little as will do, `impatient` leaves after two assistant turns that apply nothing new.

Simulated assistant (ASSISTANT_TURN): knows the domains' preference types from the schema and sees
only the user context of its setting. With past interactions (I) it reads preference values off the
summaries (schema options, and names or titles in sentences about a preference type) and applies
them unasked; demographics (D) and the situation (S) only yield a guess when one of their values is
an option of a preference type, plus a remark fitted to them. Whatever is not known it asks for, two
types a turn (three for multi-domain tasks, one with vanilla instructions).

Which of that the assistant uses is its view (`assistants.views.View`, the request's `view` context
entry): the reference assistants (`assistants.reference_assistants`) fix it whatever their setting;
without one the assistant sees exactly its setting's context.

Preference values always appear verbatim: in the user's text when revealed, in the assistant's when
applied, so an evidence-based judge can tell proactive from reactive personalization.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from personalens_utils.assistants.views import View
from personalens_utils.base.words import words_of
from personalens_utils.llm.types import Request
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, STYLE_KEY, user_style
from personalens_utils.reference.schema import PreferenceType, load_schema

# ---------------------------------------------------------------------------------------------
# Vocabulary both agents share: how a preference type is named in conversation, and the sentence
# shapes in which the user states values (the assistant reads them back with the same shapes).

REVEALS = (
    "For the {topic}, I'd like {values}, please.",
    "My {topic} would be {values}, ideally.",
    "When it comes to the {topic}, I'm into {values}, if that works.",
)
TERSE_REVEAL = "{topic}: {values}."
DECLINE = "I don't have a strong preference on the {topic}."
GO_AHEAD = "That covers everything I need, so please go ahead and finalize it."
DEFER = "That doesn't matter for this, so please go ahead and finalize it."
"""A reticent user's answer to questions about what its task does not need: it asks the assistant to
finish, as `GO_AHEAD` does, without claiming that everything it wants was said."""
DONE_MARK = "All set"

_TOPIC_DROP = {"preference", "preferences"}


def _compile(template: str) -> re.Pattern[str]:
    pattern = re.escape(template)
    pattern = pattern.replace(re.escape("{topic}"), r"(?P<topic>[^.,;:!?]+?)")
    pattern = pattern.replace(re.escape("{values}"), r"(?P<values>.+?)")
    return re.compile(pattern + r"(?=\s|$)", re.IGNORECASE)


_REVEAL_RES = tuple(_compile(t) for t in (*REVEALS, TERSE_REVEAL))
_DECLINE_RE = _compile(DECLINE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@lru_cache(maxsize=1024)
def _topics(domains: tuple[str, ...]) -> tuple[tuple[PreferenceType, str], ...]:
    """Every preference type of the domains with its conversational name (domain-qualified if shared)."""
    schema = load_schema()
    types = [p for d in dict.fromkeys(domains) if schema.has_domain(d) for p in schema.domain(d).preferences]
    counts: dict[str, int] = {}
    for p in types:
        counts[p.name] = counts.get(p.name, 0) + 1
    named = []
    for p in types:
        base = " ".join(w for w in p.name.lower().split() if w not in _TOPIC_DROP) or p.name.lower()
        named.append((p, f"{p.domain.lower()} {base}" if counts[p.name] > 1 else base))
    return tuple(named)


@lru_cache(maxsize=1024)
def _topic_finder(domains: tuple[str, ...]) -> tuple[re.Pattern[str], dict[str, PreferenceType]]:
    """One regex finding topic names in text, longest first so "seat class" is not read as "seat"."""
    by_topic = {t: p for p, t in _topics(domains)}
    alternatives = "|".join(re.escape(t) for t in sorted(by_topic, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE), by_topic


def preferences_named(text: str, domains: tuple[str, ...]) -> list[PreferenceType]:
    """Preference types named in `text`, in order of first mention: what the offline user takes as being
    asked about, and the user-agent audit too (`trust.audit`), so both read a question alike."""
    finder, by_topic = _topic_finder(domains)
    found: dict[str, PreferenceType] = {}
    for match in finder.finditer(text):
        pref = by_topic[match.group(0).lower()]
        found.setdefault(f"{pref.domain}/{pref.name}", pref)
    return list(found.values())


def _join(values: Sequence[str]) -> str:
    values = list(values)
    if len(values) <= 1:
        return "".join(values)
    return ", ".join(values[:-1]) + " and " + values[-1]


def _values(value: Any) -> list[str]:
    items = value if isinstance(value, list | tuple) else [value]
    return [str(v).strip() for v in items if isinstance(v, str | int | float) and str(v).strip()]


def _key(pref: PreferenceType) -> tuple[str, str]:
    return (pref.domain, pref.name)


# ---------------------------------------------------------------------------------------------
# The simulated user.


@dataclass(frozen=True, slots=True)
class _Item:
    pref: PreferenceType
    topic: str
    values: tuple[str, ...]

    def seen_in(self, text: str) -> bool:
        """Whether `text` holds one of the values as whole words (as the offline judge reads it)."""
        padded = words_of(text)
        return any(words_of(v) in padded for v in self.values)

    def reveal(self, rng: random.Random, terse: bool = False) -> str:
        if terse:
            return TERSE_REVEAL.format(topic=self.topic.capitalize(), values=_join(self.values))
        return rng.choice(REVEALS).format(topic=self.topic, values=_join(self.values))

    def contradicted_in(self, sentence: str) -> bool:
        """Whether `sentence` gives this type a value other than the user's: another option of it, or
        something applied to it ("set ... for the topic"). Naming the topic alone contradicts nothing."""
        if self.seen_in(sentence):
            return False
        padded = words_of(sentence)
        if any(words_of(o) in padded for o in self.pref.options if o not in self.values):
            return True
        applied = rf"\b(?:set|gone with|used|assumed|pencilled in|chosen|picked|booked|selected)\b.*" \
                  rf"\bfor the {re.escape(self.topic)}\b"
        return re.search(applied, sentence, re.IGNORECASE) is not None


def _user_items(task: Mapping[str, Any], preferences: Mapping[str, Mapping[str, Any]]) -> tuple[
        list[_Item], dict[tuple[str, str], _Item]]:
    """The task's relevant preferences the user has values for, and every preference of its domains."""
    domains = tuple(task.get("domains") or preferences)
    every: dict[tuple[str, str], _Item] = {}
    for pref, topic in _topics(domains):
        values = _values(preferences.get(pref.domain, {}).get(pref.name))
        if values:
            every[_key(pref)] = _Item(pref, topic, tuple(values))
    schema = load_schema()
    relevant: dict[tuple[str, str], _Item] = {}
    for name in task.get("relevant_preferences") or ():
        for pref in schema.resolve_preference(name, list(domains)):
            if _key(pref) in every:
                relevant.setdefault(_key(pref), every[_key(pref)])
    return list(relevant.values()), every


_INTENT_CUT = re.compile(
    r",? (?:that|which) (?:best )?(?:match|matches|suit|suits|fit|fits|align|aligns|cater|caters)\b"
    r"|,? (?:based on|according to|considering|incorporating|matching|following|tailored to|aligned with)\b"
    r"|,? (?:with|at|using|for|in|from|and) (?:your|my) (?:preferred|favou?rite|desired|ideal|usual|"
    r"preferences?|interests?|tastes?)\b"
    r"|, (?:potentially|such as|taking|keeping|while|ensuring|including)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = (
    (r"\byou're\b", "I'm"), (r"\byou've\b", "I've"), (r"\byou'd\b", "I'd"), (r"\byou'll\b", "I'll"),
    (r"\byou are\b", "I am"), (r"\byourself\b", "myself"), (r"\byours\b", "mine"), (r"\byour\b", "my"),
    (r"\byou\b", "I"),
)
_OPENERS = (
    "Hi! Could you help me {request}?",
    "Hey, I'd like to {request}.",
    "Hello, can you help me {request}?",
    "Hi there, I need a hand: I want to {request}.",
)
_GREETING_BY_TIME = {"morning": "Good morning!", "afternoon": "Good afternoon!", "evening": "Good evening!"}


def _request_phrase(intent: str) -> str:
    """The task intent as a short first-person request with no preference detail."""
    text = intent.strip().split(". ")[0].rstrip(".!")
    cut = _INTENT_CUT.search(text)
    if cut and cut.start() > 12:
        text = text[: cut.start()]
    for pattern, repl in _FIRST_PERSON:
        text = re.sub(pattern, repl, text, flags=re.IGNORECASE)
    words = text.split()
    if len(words) > 22:
        head = " ".join(words[:22])
        text = head[: head.rfind(",")] if "," in head[20:] else head
    text = text.strip(" ,;")
    return text[:1].lower() + text[1:] if text[:2] != "I " else text


def _opening(context: Mapping[str, Any], rng: random.Random) -> str:
    task = context.get("task") or {}
    intent = task.get("user_intent") or task.get("task_description") or "sort something out"
    request = _request_phrase(str(intent))
    opener = rng.choice(_OPENERS).format(request=request)
    time_of_day = str((context.get("situation") or {}).get("time_of_day", "")).lower()
    if time_of_day in _GREETING_BY_TIME and rng.random() < 0.5:
        opener = re.sub(r"^(Hi!|Hey,|Hello,|Hi there,)\s*", "", opener)
        opener = f"{_GREETING_BY_TIME[time_of_day]} {opener[:1].upper()}{opener[1:]}"
    return opener


_CLOSINGS = (
    "Perfect, that's exactly what I wanted. Thanks!",
    "That works for me, thank you so much!",
    "Great, that's all sorted then. Thanks!",
)
_GIVE_UPS = (
    "Hmm, that still isn't what I asked for. I'll leave it there for now.",
    "Never mind, I'll sort out the rest myself.",
)
_CORRECTIONS = ("Actually, that's not quite it.", "Hmm, not quite.")
_VOLUNTEER_LEADS = ("Also, ", "Oh, and ", "")
_PATIENCE = {"SD": 8, "MD": 12}
_NONCOMMITTAL = ("Okay.", "Sure, go on.", "Alright.")
_ACCEPTS = ("Okay, thanks. TERMINATE", "Fine, thanks. TERMINATE")


@dataclass(frozen=True, slots=True)
class UserStyle:
    """The knobs one user-agent style turns; everything else is the cooperative user's behaviour."""

    volunteers: tuple[int, ...] = (1, 2)
    """How many pending preferences it may volunteer when asked nothing relevant (one drawn); () never."""
    corrects_omissions: bool = True
    """Restates a preference whose topic the assistant names without the user's value; else only when
    the assistant gives it another value, and a reply asking nothing answerable gets a non-committal one."""
    terse: bool = False
    """One short sentence per preference, no leads or pleasantries, a bare closing."""
    stalled_turns: int = 0
    """Leaves after this many assistant turns in a row applying no new relevant value (0: never)."""
    answers_aside: bool = True
    """Answers questions about preferences its task does not need; else asks the assistant to go ahead
    (`DEFER`) when nothing it was asked matters to the task."""
    most_answers: int = 0
    """Takes up at most this many of the topics one assistant message asks about, in the order asked
    (0: every one); with `answers_aside` off, a first topic its task does not need is passed over."""


_PLAYED = {
    COOPERATIVE: UserStyle(),
    "reticent": UserStyle(volunteers=(), corrects_omissions=False, answers_aside=False, most_answers=1),
    "terse": UserStyle(volunteers=(1,), terse=True),
    "impatient": UserStyle(stalled_turns=2),
}
"""How the offline user agent plays each of `prompt_templates.user_styles.USER_STYLES` (one entry each)."""
_TERSE_CLOSING, _TERSE_GIVE_UP = "Thanks. TERMINATE", "Never mind. TERMINATE"
_CURT_CLOSINGS = ("This isn't going anywhere. TERMINATE", "Forget it, I'll do it myself. TERMINATE")


def _played(context: Mapping[str, Any]) -> UserStyle:
    """The style a user request asks for; a name the kit does not define is refused, never played as
    the cooperative user."""
    return _PLAYED[user_style(str(context.get(STYLE_KEY) or COOPERATIVE)).name]


def _stalled(said_by_assistant: Sequence[str], relevant: Sequence[_Item]) -> int:
    """How many of the latest assistant turns in a row applied no relevant value not applied before."""
    stalled = 0
    for index in range(len(said_by_assistant) - 1, -1, -1):
        before = "\n".join(said_by_assistant[:index])
        if any(it.seen_in(said_by_assistant[index]) and not it.seen_in(before) for it in relevant):
            break
        stalled += 1
    return stalled


def _lead(lead: str, sentence: str) -> str:
    return lead + sentence[:1].lower() + sentence[1:] if lead else sentence


def user_turn(request: Request, rng: random.Random) -> str:
    context = request.context
    style = _played(context)
    dialogue: Sequence[Mapping[str, str]] = context.get("dialogue") or ()
    task = context.get("task") or {}
    if not dialogue:  # every style opens alike: the task's request, greeted by the situation's time of day
        return _opening(context, rng)
    relevant, every = _user_items(task, context.get("preferences") or {})
    said_by_assistant = [t["content"] for t in dialogue if t["role"] == "assistant"]
    said_by_user = [t["content"].lower() for t in dialogue if t["role"] == "user"]
    last = said_by_assistant[-1] if said_by_assistant else ""
    assistant_text = "\n".join(said_by_assistant).lower()
    pending = [it for it in relevant if not it.seen_in(assistant_text)]
    if not pending:
        if "?" in last and GO_AHEAD.lower() not in said_by_user[-1]:
            return GO_AHEAD
        return _TERSE_CLOSING if style.terse else f"{rng.choice(_CLOSINGS)} TERMINATE"
    repeated = any(sum(it.seen_in(u) for u in said_by_user[1:]) >= 2 for it in pending)
    if repeated or len(said_by_user) >= _PATIENCE.get(str(task.get("task_type")), 8):
        return _TERSE_GIVE_UP if style.terse else f"{rng.choice(_GIVE_UPS)} TERMINATE"
    if style.stalled_turns and _stalled(said_by_assistant, relevant) >= style.stalled_turns:
        return rng.choice(_CURT_CLOSINGS)

    domains = tuple(task.get("domains") or ())
    sentences: list[tuple[int, str]] = []  # (0 for a relevant preference, 1 otherwise; sentence)
    answered: set[tuple[str, str]] = set()
    corrected = False
    replied = 0
    for sentence in _SENTENCE.split(last):
        asking = sentence.rstrip().endswith("?")
        for pref in preferences_named(sentence, domains):
            key = _key(pref)
            if key in answered:
                continue
            item = every.get(key)
            is_pending = item is not None and item in pending
            if not asking and not is_pending:
                continue
            if not asking and not style.corrects_omissions and not (item and item.contradicted_in(sentence)):
                continue
            if asking and item is not None and not is_pending and any(item.seen_in(u) for u in said_by_user):
                continue
            if asking and style.most_answers and replied >= style.most_answers:
                continue
            replied += asking
            if asking and not is_pending and not style.answers_aside:
                continue
            answered.add(key)
            if item is None:
                topic = dict(_topics(domains)).get(pref, pref.name.lower())
                sentences.append((1, DECLINE.format(topic=topic)))
            elif asking:
                sentences.append((0 if is_pending else 1, item.reveal(rng, style.terse)))
            else:
                lead = "" if corrected or style.terse else rng.choice(_CORRECTIONS) + " "
                corrected = True
                sentences.append((0, lead + item.reveal(rng, style.terse)))
    if style.volunteers and not any(_key(it.pref) in answered for it in pending):
        fresh = [it for it in pending if _key(it.pref) not in answered]
        for it in fresh[: rng.choice(style.volunteers)]:
            restated = any(it.seen_in(u) for u in said_by_user)
            lead = "" if style.terse else "As I mentioned, " if restated else rng.choice(_VOLUNTEER_LEADS)
            sentences.append((0, _lead(lead, it.reveal(rng, style.terse))))
    if not sentences:  # only a user that volunteers nothing gets here
        if "?" not in last:
            return rng.choice(_ACCEPTS)
        return rng.choice(_NONCOMMITTAL) if style.answers_aside else DEFER
    kept = sorted(range(len(sentences)), key=lambda i: sentences[i][0])[:3]
    return " ".join(sentences[i][1] for i in sorted(kept))


# ---------------------------------------------------------------------------------------------
# The simulated assistant.

_NAME = re.compile(
    r"\"([^\"]{2,60})\"|“([^”]{2,60})”"
    r"|((?:[A-Z][\w'’.&+-]*)(?:\s+(?:(?:of|the|de|la|von|van|and the|&)\s+)?[A-Z0-9][\w'’.&+-]*)*)"
)
_NAME_STOP = frozenset(
    re.findall(
        r"\w+",
        "The A An User This That These Those He She They His Her Their It Its Over As While In On One Past "
        "Initially Additionally Occasionally Recently Overall When With For From At By Also However Since "
        "Although Throughout Beyond Given Based Lately Often Sometimes Moreover Furthermore Interactions "
        "Assistant I",
    )
)
_KEYWORD_DROP = {"favorite", "favourite", "preferred", "and", "of", "the", "type", "types", "name"}


@cache
def _option_finder(domain: str, name: str) -> re.Pattern[str] | None:
    pref = load_schema().preference(domain, name)
    options = sorted((o for o in pref.options if len(o) >= 3), key=len, reverse=True)
    if not options:
        return None
    alternatives = "|".join(re.escape(o) for o in options)
    return re.compile(rf"(?<!\w)({alternatives})(?:e?s)?(?!\w)", re.IGNORECASE)


@cache
def _keywords(domain: str, name: str) -> tuple[str, ...]:
    words = [w for w in re.findall(r"[a-z]+", name.lower()) if w not in _KEYWORD_DROP | _TOPIC_DROP]
    return tuple(w[:-1] if w.endswith("s") and len(w) > 4 else w for w in words)


def _names_near(pref: PreferenceType, text: str) -> list[str]:
    """Names and titles in the sentences of `text` that talk about this (free-text) preference type."""
    keywords = _keywords(pref.domain, pref.name)
    found: list[str] = []
    for sentence in _SENTENCE.split(text):
        lowered = sentence.lower()
        if not any(k in lowered for k in keywords):
            continue
        for match in _NAME.finditer(sentence):
            name = next(g for g in match.groups() if g).strip(" .,'’")
            if name.endswith(("'s", "’s")):
                continue
            at_start = match.start() == 0
            if name in _NAME_STOP or (at_start and " " not in name) or len(name) < 3:
                continue
            if name.split()[0] in _NAME_STOP:
                name = name.split(" ", 1)[1] if " " in name else ""
            if name and name not in found and name.lower() not in (pref.domain.lower(),):
                found.append(name)
    return found


@lru_cache(maxsize=8192)
def _from_history(domain: str, summary: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(type name, values) the assistant can read off one domain's interaction summary."""
    schema = load_schema()
    if not schema.has_domain(domain):
        return ()
    out = []
    for pref in schema.domain(domain).preferences:
        finder = _option_finder(domain, pref.name) if pref.categorical else None
        if finder is not None:
            by_lower = {o.lower(): o for o in pref.options}
            values = list(dict.fromkeys(by_lower[m.group(1).lower()] for m in finder.finditer(summary)))
        else:
            values = _names_near(pref, summary)
        if values:
            out.append((pref.name, tuple(values[: 4 if pref.multi_valued else 1])))
    return tuple(out)


def _from_profile(prefs: Iterable[PreferenceType], facts: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """Guesses from demographics or situation: a fact that is exactly an option of a type."""
    guesses: dict[tuple[str, str], str] = {}
    facts_lower = {str(v).strip().lower(): str(v).strip() for v in facts.values() if str(v).strip()}
    for pref in prefs:
        for option in pref.options:
            if option.lower() in facts_lower:
                guesses.setdefault(_key(pref), option)
        if not pref.categorical and "location" in pref.name.lower() and "location" in facts:
            guesses.setdefault(_key(pref), f"somewhere near {facts['location']}")
    return guesses


@dataclass(slots=True)
class _Known:
    text: str
    source: str  # "user", "history", "situation", "demographics"


def _stated(user_messages: Iterable[str], domains: tuple[str, ...]) -> tuple[
        dict[tuple[str, str], str], set[tuple[str, str]]]:
    """Values the user stated (by type) and the types the user declined, read from the user's sentences."""
    _, by_topic = _topic_finder(domains)
    stated: dict[tuple[str, str], str] = {}
    declined: set[tuple[str, str]] = set()
    for message in user_messages:
        for pattern in _REVEAL_RES:
            for match in pattern.finditer(message):
                pref = by_topic.get(match["topic"].strip().lower())
                if pref is not None:
                    stated[_key(pref)] = match["values"].strip()
        for match in _DECLINE_RE.finditer(message):
            pref = by_topic.get(match["topic"].strip().lower())
            if pref is not None:
                declined.add(_key(pref))
    return stated, declined


_SOURCE_LEADS = {
    "user": ("Noted: I've set {pairs}.", "Got it, I've gone with {pairs}."),
    "history": ("Going by your past requests, I've gone with {pairs}.",
                "From what you've asked me before, I've used {pairs}."),
    "situation": ("Given where you are right now, I've pencilled in {pairs}.",),
    "demographics": ("Based on your profile, I've assumed {pairs}.",),
    "profile": ("Knowing what you like, I've gone with {pairs}.", "I've already set {pairs}, as you prefer."),
}
_ASKS = ("What would you like for the {topics}?", "Could you tell me your {topics}?",
         "Do you have anything in mind for the {topics}?")
_FAREWELLS = ("You're welcome! Enjoy, and just ask if you need anything else.",
              "Happy to help. Have a great day!", "Glad that worked out. Take care!")
_APOLOGY = "Sorry I couldn't get that quite right. I'm here whenever you want to pick it up again."


def _opening_remarks(instructions: str, context: Mapping[str, Any], rng: random.Random) -> list[str]:
    remarks = [rng.choice(("Sure, I can help with that.", "Of course.")) if instructions == "vanilla"
               else rng.choice(("Happy to help with that!", "I'd be glad to help you with that."))]
    situation = context.get("situation")
    if situation:
        device = str(situation.get("device", "")).lower()
        moment = str(situation.get("time_of_day", "")).lower()
        if device or moment:
            remarks.append(f"Since you're on your {device or 'device'} this {moment or 'moment'}, "
                           "I'll keep things short.")
    demographics = context.get("demographics")
    if demographics:
        country = demographics.get("reside_country")
        if "native" not in str(demographics.get("english_proficiency", "native")).lower():
            remarks.append("I'll keep my wording simple and clear.")
        elif country:
            remarks.append(f"I'll stick to options that work in {country}.")
    return remarks


def _oracle_known(oracle: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """The task's relevant preference values, as an assistant with the oracle view knows them at once."""
    relevant, _ = _user_items(oracle.get("task") or {}, oracle.get("preferences") or {})
    return {_key(item.pref): _join(item.values) for item in relevant}


def _ignoring_reply(user_messages: Sequence[str], rng: random.Random) -> str:
    """An assistant that reads no dialogue: the same stock arrangement whatever the user asked for or said."""
    last = user_messages[-1] if user_messages else ""
    if len(user_messages) > 1 and re.search(r"\b(never mind|leave it there)\b", last, re.IGNORECASE):
        return _APOLOGY
    first = len(user_messages) <= 1
    lead = rng.choice(("Sure, I can help with that.", "Of course.") if first else ("Okay.", "Understood."))
    return f"{lead} {DONE_MARK}: I've set it up with the standard options most people pick."


def _goes_ahead(said: str) -> bool:
    """Whether the user asked the assistant to finish with what it has."""
    return any(phrase.lower() in said.lower() for phrase in (GO_AHEAD, DEFER))


def assistant_turn(request: Request, rng: random.Random) -> str:
    context = request.context
    view = View.of(context)
    user_messages = [m.content for m in request.messages if m.role == "user"]
    if not view.dialogue:
        return _ignoring_reply(user_messages, rng)
    oracle = context.get("oracle") or {}
    seen = dict(context) if view.setting else {}
    if view.history:
        seen["interactions"] = oracle.get("interactions") or {}
    if view.oracle:
        seen["situation"] = oracle.get("situation") or {}
    instructions = str(context.get("setting", "base")).split("+")[0].strip().lower()
    domains = tuple(context.get("domains") or ())
    own_messages = "\n".join(m.content for m in request.messages if m.role == "assistant").lower()
    last_user = user_messages[-1] if user_messages else ""
    prefs = [p for p, _ in _topics(domains)]
    topic_of = dict(_topics(domains))

    known: dict[tuple[str, str], _Known] = {}
    if view.oracle:
        known.update({key: _Known(value, "profile") for key, value in _oracle_known(oracle).items()})
    for domain, summary in (seen.get("interactions") or {}).items():
        for name, values in _from_history(domain, summary):
            if domain in domains:
                known.setdefault((domain, name), _Known(_join(values), "history"))
    for source in ("situation", "demographics"):
        for key, value in _from_profile(prefs, seen.get(source) or {}).items():
            known.setdefault(key, _Known(value, source))
    stated, declined = _stated(user_messages, domains)
    for key, value in stated.items():
        known[key] = _Known(value, "user")

    new_stated, _ = _stated([last_user], domains)
    if not new_stated and DONE_MARK.lower() in own_messages and not _goes_ahead(last_user):
        if re.search(r"\b(never mind|leave it there)\b", last_user, re.IGNORECASE):
            return _APOLOGY
        return rng.choice(_FAREWELLS)

    parts = _opening_remarks(instructions, seen, rng) if len(user_messages) == 1 else [
        rng.choice(("Thanks!", "Perfect.", "Great, thanks."))]
    by_source: dict[str, list[str]] = {}
    for pref in prefs:
        entry = known.get(_key(pref))
        if entry is not None and entry.text.lower() not in own_messages:
            by_source.setdefault(entry.source, []).append(f"{entry.text} for the {topic_of[pref]}")
    for source in ("user", "profile", "history", "situation", "demographics"):
        if by_source.get(source):
            parts.append(rng.choice(_SOURCE_LEADS[source]).format(pairs=_join(by_source[source])))

    unknown = [p for p in prefs if _key(p) not in known and _key(p) not in declined]
    asked_before = set(preferences_named(own_messages, domains)) if own_messages else set()
    said = " ".join(user_messages).lower()
    unknown.sort(key=lambda p: (p in asked_before, not any(k in said for k in _keywords(p.domain, p.name))))
    per_turn = 1 if instructions == "vanilla" else (3 if context.get("task_type") == "MD" else 2)
    if not unknown or _goes_ahead(last_user):
        parts.append(f"{DONE_MARK}: everything is arranged with the details above. "
                     "Let me know if you'd like any changes.")
    else:
        parts.append(rng.choice(_ASKS).format(topics=_join([topic_of[p] for p in unknown[:per_turn]])))
    return " ".join(parts)
