"""Parsers for the answers of each generation step.

A parser either returns a value that fits the schema exactly (canonical option spelling, single
values as strings, multi-valued ones as lists) or raises `AnswerError` listing every problem, so
the runner can send the problems back to the model and, after the last attempt, store the raw
answer with the reason instead of inventing a value. Answers from real models and from the offline
backend go through the same parsers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from personalens_utils.reference.schema import Domain, PreferenceType
from personalens_utils.runstore.engine import UnreadableAnswer

DEVICES = ("Smartphone", "Laptop", "Smart speaker", "Tablet", "Smartwatch")
TIMES_OF_DAY = ("Morning", "Afternoon", "Evening", "Night")
DAYS_OF_WEEK = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ENVIRONMENTS = ("Quiet", "Noisy")
SITUATION_KEYS = ("Location", "Device", "Time of Day", "Day of the Week", "Environment")
"""The situational context of a user x task (paper §2.2, Figure 11), in the official key order."""

SD_TASK_KEYS = ("task_description", "user_intent", "task_goal", "relevant_preference_types")
MD_TASK_KEYS = (*SD_TASK_KEYS[:3], "relevant_domains", SD_TASK_KEYS[3])
MD_DOMAIN_RANGE = (3, 5)
MIN_SUMMARY_WORDS = 30
MAX_LOCATION_CHARS = 80

Preferences = dict[str, str | list[str]]

_SECOND_PERSON = re.compile(r"\b(you|your|yours|yourself)\b", re.IGNORECASE)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)
_RESPONSE = re.compile(r"<response>(.*?)</response>", re.DOTALL | re.IGNORECASE)


class AnswerError(UnreadableAnswer):
    """A generation answer that does not fit its step's format or the schema."""

    def __init__(self, problems: str | Sequence[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


def _key(text: str) -> str:
    """Comparison form of a name or option: case, spacing and surrounding punctuation ignored."""
    return " ".join(text.casefold().split()).strip(" .")


def _lookup(canonical: Iterable[str]) -> dict[str, str]:
    return {_key(c): c for c in canonical}


def extract_json(text: str, expected: type[dict] | type[list]) -> Any:
    """The first JSON value of an answer, tolerating code fences, <response> tags, a short preamble
    and remarks after the value; it must be an object (`dict`) or an array (`list`) as expected."""
    body = text.strip()
    tagged = _RESPONSE.search(body)
    if tagged:
        body = tagged.group(1).strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    kind = "object" if expected is dict else "array"
    starts = sorted({i for i in (body.find("{"), body.find("[")) if i >= 0})
    if not starts:
        raise AnswerError(f"no JSON {kind} found in the answer")
    decoder = json.JSONDecoder()
    errors: list[json.JSONDecodeError] = []
    for start in starts:
        try:
            value, _ = decoder.raw_decode(body, start)
        except json.JSONDecodeError as exc:
            errors.append(exc)
            continue
        if not isinstance(value, expected):
            raise AnswerError(f"expected a JSON {kind}, got {type(value).__name__}")
        return value
    error = errors[0]
    raise AnswerError(f"not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})")


def _strings(value: Any, what: str, problems: list[str]) -> list[str] | None:
    """A string or list of strings as a clean list; records a problem and returns None otherwise."""
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in items):
        problems.append(f"{what}: expected a string or a list of strings, got {json.dumps(value)[:80]}")
        return None
    cleaned = list(dict.fromkeys(v.strip() for v in items if v.strip()))
    if not cleaned:
        problems.append(f"{what}: no value given")
        return None
    return cleaned


def _match_keys(
    answer: Mapping[str, Any], names: Sequence[str], what: str, problems: list[str]
) -> dict[str, Any]:
    """Answer keys mapped to canonical names; unknown and missing names become problems."""
    lookup = _lookup(names)
    found: dict[str, Any] = {}
    unknown = []
    for key, value in answer.items():
        name = lookup.get(_key(str(key)))
        if name is None:
            unknown.append(key)
        else:
            found[name] = value
    if unknown:
        problems.append(f"unknown {what} {unknown} (expected only {list(names)})")
    missing = [n for n in names if n not in found]
    if missing:
        problems.append(f"missing {what} {missing}")
    return found


def _preference_value(ptype: PreferenceType, value: Any, problems: list[str]) -> str | list[str] | None:
    values = _strings(value, repr(ptype.name), problems)
    if values is None:
        return None
    if ptype.categorical:
        options = _lookup(ptype.options)
        unknown = [v for v in values if _key(v) not in options]
        if unknown:
            problems.append(f"{ptype.name!r}: {unknown} not among its options {list(ptype.options)}")
            return None
        values = list(dict.fromkeys(options[_key(v)] for v in values))
    if ptype.multi_valued:
        return values
    if len(values) != 1:
        problems.append(f"{ptype.name!r} takes exactly one value, got {len(values)}: {values}")
        return None
    return values[0]


def parse_preferences(text: str, domain: Domain) -> Preferences:
    """One domain's preferences: every type of the domain, each value fitting its type."""
    answer = extract_json(text, dict)
    problems: list[str] = []
    found = _match_keys(answer, [p.name for p in domain.preferences], "preference type(s)", problems)
    out: Preferences = {}
    for ptype in domain.preferences:
        if ptype.name in found:
            value = _preference_value(ptype, found[ptype.name], problems)
            if value is not None:
                out[ptype.name] = value
    if problems:
        raise AnswerError(problems)
    return out


def parse_mask(text: str, domains: Sequence[str]) -> dict[str, int]:
    """The interest mask: 0 or 1 for every domain, at least one domain kept."""
    answer = extract_json(text, dict)
    problems: list[str] = []
    found = _match_keys(answer, domains, "domain(s)", problems)
    mask: dict[str, int] = {}
    for name in domains:
        if name not in found:
            continue
        value = found[name]
        if isinstance(value, bool) or value in (0, 1, "0", "1"):
            mask[name] = int(value)
        else:
            problems.append(f"{name!r}: expected 0 or 1, got {json.dumps(value)}")
    if not problems and not any(mask.values()):
        problems.append("every domain is 0; a user must keep at least one domain")
    if problems:
        raise AnswerError(problems)
    return mask


def parse_interactions(text: str) -> str:
    """A past-interaction summary: plain prose of at least `MIN_SUMMARY_WORDS` words."""
    body = text.strip()
    body = re.sub(r"^\s*interaction summary\s*:\s*", "", body, flags=re.IGNORECASE).strip()
    if body.startswith(("{", "[")):
        raise AnswerError("expected a plain-text summary, got JSON")
    words = len(body.split())
    if words < MIN_SUMMARY_WORDS:
        raise AnswerError(f"the summary has {words} words; at least {MIN_SUMMARY_WORDS} are needed")
    return body


def _task_text(task: Mapping[str, Any], key: str, where: str, problems: list[str]) -> str:
    value = task.get(key)
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {key!r} must be a non-empty string")
        return ""
    return " ".join(value.split())


def _task_common(
    task: Any, keys: Sequence[str], where: str, problems: list[str]
) -> dict[str, Any] | None:
    if not isinstance(task, dict):
        problems.append(f"{where}: expected a JSON object")
        return None
    missing = [k for k in keys if k not in task]
    if missing:
        problems.append(f"{where}: missing key(s) {missing}")
        return None
    out: dict[str, Any] = {k: _task_text(task, k, where, problems) for k in keys[:3]}
    if out["user_intent"] and not _SECOND_PERSON.search(out["user_intent"]):
        problems.append(f"{where}: 'user_intent' must address the user in the second person ('you ...')")
    return out


def _relevant_types(
    value: Any, allowed: Mapping[str, str], where: str, problems: list[str]
) -> list[str]:
    names = _strings(value, f"{where}: 'relevant_preference_types'", problems)
    if names is None:
        return []
    unknown = [n for n in names if _key(n) not in allowed]
    if unknown:
        problems.append(f"{where}: preference type(s) {unknown} are not in the schema of its domain(s)")
        return []
    return list(dict.fromkeys(allowed[_key(n)] for n in names))


def _check_count(tasks: list[Any], n_tasks: int, problems: list[str], earlier: Sequence[str] = ()) -> None:
    if len(tasks) != n_tasks:
        problems.append(f"expected {n_tasks} tasks, got {len(tasks)}")
    descriptions = [_key(str(t.get("task_description", ""))) for t in tasks if isinstance(t, dict)]
    if len(set(descriptions)) != len(descriptions):
        problems.append("two tasks have the same task_description")
    if set(descriptions) & {_key(d) for d in earlier}:
        problems.append("a task repeats the task_description of a task written earlier")


def parse_sd_tasks(text: str, domain: Domain, n_tasks: int) -> list[dict[str, Any]]:
    """`n_tasks` single-domain tasks whose relevant preference types all belong to `domain`."""
    tasks = extract_json(text, list)
    problems: list[str] = []
    _check_count(tasks, n_tasks, problems)
    allowed = _lookup(p.name for p in domain.preferences)
    out = []
    for i, raw in enumerate(tasks, 1):
        where = f"task {i}"
        task = _task_common(raw, SD_TASK_KEYS, where, problems)
        if task is not None:
            task["relevant_preference_types"] = _relevant_types(
                raw["relevant_preference_types"], allowed, where, problems
            )
            task["relevant_domains"] = [domain.name]
            out.append(task)
    if problems:
        raise AnswerError(problems)
    return out


def parse_md_tasks(
    text: str, domains: Mapping[str, Domain], n_tasks: int, earlier: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """`n_tasks` multi-domain tasks, each over 3-5 distinct schema domains, with preference types
    that belong to at least one of the task's domains, none repeating an `earlier` description."""
    tasks = extract_json(text, list)
    problems: list[str] = []
    _check_count(tasks, n_tasks, problems, earlier)
    domain_lookup = _lookup(domains)
    low, high = MD_DOMAIN_RANGE
    out = []
    for i, raw in enumerate(tasks, 1):
        where = f"task {i}"
        task = _task_common(raw, MD_TASK_KEYS, where, problems)
        if task is None:
            continue
        names = _strings(raw["relevant_domains"], f"{where}: 'relevant_domains'", problems) or []
        unknown = [n for n in names if _key(n) not in domain_lookup]
        if unknown:
            problems.append(f"{where}: unknown domain(s) {unknown}")
            continue
        chosen = list(dict.fromkeys(domain_lookup[_key(n)] for n in names))
        if not low <= len(chosen) <= high:
            problems.append(f"{where}: spans {len(chosen)} domain(s); a multi-domain task needs {low}-{high}")
            continue
        allowed = _lookup(p.name for d in chosen for p in domains[d].preferences)
        task["relevant_domains"] = chosen
        task["relevant_preference_types"] = _relevant_types(
            raw["relevant_preference_types"], allowed, where, problems
        )
        out.append(task)
    if problems:
        raise AnswerError(problems)
    return out


def parse_situation(text: str) -> tuple[dict[str, str], str]:
    """The five situation variables (enumerated ones in canonical spelling) and the justification."""
    answer = extract_json(text, dict)
    problems: list[str] = []
    justification = answer.pop("Justification", answer.pop("justification", ""))
    found = _match_keys(answer, SITUATION_KEYS, "situation variable(s)", problems)
    choices = {
        "Device": DEVICES,
        "Time of Day": TIMES_OF_DAY,
        "Day of the Week": DAYS_OF_WEEK,
        "Environment": ENVIRONMENTS,
    }
    situation: dict[str, str] = {}
    for key in SITUATION_KEYS:
        if key not in found:
            continue
        value = found[key]
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{key!r}: expected a non-empty string, got {json.dumps(value)[:80]}")
        elif key == "Location":
            location = " ".join(value.split())
            if len(location) > MAX_LOCATION_CHARS:
                problems.append(f"'Location' is {len(location)} characters; keep it to a place name")
            situation[key] = location
        else:
            canonical = _lookup(choices[key]).get(_key(value))
            if canonical is None:
                problems.append(f"{key!r}: {value!r} is not one of {list(choices[key])}")
            else:
                situation[key] = canonical
    if not isinstance(justification, str):
        problems.append("'Justification' must be a string")
    if problems:
        raise AnswerError(problems)
    return situation, " ".join(str(justification).split())
