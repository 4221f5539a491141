"""The profile consistency checker (paper §2.4, Appendix A.4): does a profile contradict itself?

Each profile (demographics and the preferences of its kept domains) goes to a model through
`LLMClient` with call kind VALIDATION and task "profile_consistency". The answer is read strictly; an
unreadable answer is sent back with the problem named, and after `max_attempts` answers the
profile is recorded as `missing` with its raw text, never as "no conflict". The flagged rate counts
only profiles that were read. Checks run through the stage engine: one `ConsistencyCheck` record
per profile is appended to the run store as it finishes, a rerun skips finished profiles, and a
check that failed in the llm layer is stored as an error and asked again on the next run.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from personalens_utils.judging.parsing import normalize_answer
from personalens_utils.llm import CallKind, LLMClient, Message, Request
from personalens_utils.llm.role import Role
from personalens_utils.prompt_templates.validation import (
    CONSISTENCY,
    CONSISTENCY_PROMPT_VERSION,
    CONSISTENCY_RETRY,
    CONSISTENCY_SYSTEM,
    CROSS_LABEL,
    DOMAINS_LABEL,
    EXPLANATION_LABEL,
    WITHIN_LABEL,
)
from personalens_utils.reference.schema import load_schema
from personalens_utils.runstore import engine, run_card
from personalens_utils.runstore.engine import Item, UnreadableAnswer
from personalens_utils.runstore.records import ERROR, ConsistencyCheck, Record
from personalens_utils.runstore.store import RunStore

TASK = "profile_consistency"
STAGE = "validation"
DEFAULT_MODEL = "claude-3-sonnet"
MAX_ATTEMPTS = 3
_LABELS = (WITHIN_LABEL, CROSS_LABEL, DOMAINS_LABEL, EXPLANATION_LABEL)


class ConsistencyParseError(UnreadableAnswer):
    """An answer that does not follow the requested four-line form; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class ConsistencyVerdict:
    within: int
    cross: int
    domains: tuple[str, ...]
    explanation: str

    @property
    def label(self) -> int:
        """1 when the profile has a conflict of either kind."""
        return max(self.within, self.cross)


@dataclass(frozen=True, slots=True)
class ProfileToCheck:
    user_id: int
    demographics: Mapping[str, str]
    preferences: Mapping[str, Mapping[str, Any]]
    """Preferences of the domains the profile keeps (its interest mask), by domain."""


def parse_consistency_answer(text: str) -> ConsistencyVerdict:
    """Read an answer in the prompt's form: the four labels in order, each once, at line starts.

    Tolerated: markdown decoration, `<response>` tags, letter case of labels and domains, a preamble
    before the first label. Rejected: a missing, repeated or out-of-order label; a label value other
    than 0 or 1; an unknown domain; a conflict without domains or "none" with a conflict; an empty
    explanation.
    """
    body = normalize_answer(text)
    positions = []
    for label in _LABELS:
        found = list(re.finditer(rf"(?im)^\s*{re.escape(label)}", body))
        if len(found) != 1:
            raise ConsistencyParseError(f"expected one line starting with {label!r}, found {len(found)}")
        positions.append(found[0])
    if [m.start() for m in positions] != sorted(m.start() for m in positions):
        raise ConsistencyParseError("the four labelled lines are not in the requested order")
    values = [
        body[m.end() : nxt.start() if nxt else len(body)].strip()
        for m, nxt in zip(positions, [*positions[1:], None], strict=True)
    ]
    within, cross = (_binary(v, label) for v, label in zip(values[:2], _LABELS[:2], strict=True))
    domains = _domains(values[2])
    if (within or cross) and not domains:
        raise ConsistencyParseError("a conflict is labelled but DOMAINS names none")
    if not (within or cross) and domains:
        raise ConsistencyParseError("no conflict is labelled but DOMAINS names some")
    if not values[3]:
        raise ConsistencyParseError("the EXPLANATION is empty")
    return ConsistencyVerdict(within, cross, domains, values[3])


def _binary(value: str, label: str) -> int:
    if value not in ("0", "1"):
        raise ConsistencyParseError(f"{label} must be followed by 0 or 1, got {value[:40]!r}")
    return int(value)


def _domains(value: str) -> tuple[str, ...]:
    if value.strip().rstrip(".").lower() in ("none", ""):
        return ()
    known = {name.lower(): name for name in load_schema().domain_names}
    out = []
    for part in value.split(","):
        name = part.strip().rstrip(".").lower()
        if name not in known:
            raise ConsistencyParseError(f"DOMAINS names {part.strip()!r}, which is not a domain")
        out.append(known[name])
    return tuple(dict.fromkeys(out))


def render_profile(profile: ProfileToCheck) -> tuple[str, str]:
    """The demographics and preferences blocks of the prompt, one readable line per item."""
    demo = "\n".join(
        f"- {k.replace('_', ' ')}: {v}" for k, v in profile.demographics.items() if k != "user_id"
    )
    blocks = []
    for domain, prefs in profile.preferences.items():
        lines = [f"{domain}:"]
        for name, value in prefs.items():
            shown = ", ".join(value) if isinstance(value, list) else str(value)
            lines.append(f"  - {name}: {shown}")
        blocks.append("\n".join(lines))
    return demo, "\n".join(blocks)


def build_request(
    profile: ProfileToCheck, model: str = DEFAULT_MODEL, retries: Sequence[tuple[str, str]] = ()
) -> Request:
    """The check for one profile; `retries` holds (earlier answer, its problem) pairs to correct."""
    demo, prefs = render_profile(profile)
    messages = [Message("user", CONSISTENCY.format(demographics=demo, preferences=prefs))]
    for answer, problem in retries:
        messages += [Message("assistant", answer), Message("user", CONSISTENCY_RETRY.format(problem=problem))]
    return Request(
        kind=CallKind.VALIDATION,
        task=TASK,
        system=CONSISTENCY_SYSTEM,
        messages=tuple(messages),
        model=model,
        temperature=0.0,
        max_tokens=600,
        context={
            "demographics": dict(profile.demographics),
            "preferences": {d: dict(p) for d, p in profile.preferences.items()},
        },
    )


def _again(request: Request, answer: str, problem: str, attempt: int) -> Request:
    """The same check with the unreadable answer and its problem appended (as `build_request` would)."""
    return replace(request, messages=(*request.messages, Message("assistant", answer),
                                      Message("user", CONSISTENCY_RETRY.format(problem=problem))))


async def check_profile(
    client: LLMClient, profile: ProfileToCheck, model: str = DEFAULT_MODEL, max_attempts: int = MAX_ATTEMPTS
) -> ConsistencyCheck:
    """Check one profile: status "ok", "missing" (never readable) or "error" (the llm layer failed)."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    asked = await engine.ask_parsed(client, build_request(profile, model), parse_consistency_answer, _again,
                                    attempts=max_attempts)
    check = ConsistencyCheck(user_id=profile.user_id, model=model, backend=client.backend_name,
                             prompt_version=CONSISTENCY_PROMPT_VERSION, status="missing",
                             raw=asked.answers[-1] if asked.answers else "", attempts=len(asked.answers))
    verdict = asked.value
    if verdict is not None:
        return replace(check, status="ok", within_domain=verdict.within, cross_domain=verdict.cross,
                       domains=verdict.domains, explanation=verdict.explanation)
    if asked.error is not None:
        return replace(check, status=ERROR, problem=asked.error)
    return replace(check, problem=asked.problems[-1])


def consistency_id(user_id: int, checker: Role) -> str:
    return ConsistencyCheck.make_id(user_id, checker.model, checker.backend, CONSISTENCY_PROMPT_VERSION)


def check_profiles(
    client: LLMClient,
    profiles: Iterable[ProfileToCheck],
    model: str = DEFAULT_MODEL,
    max_attempts: int = MAX_ATTEMPTS,
) -> list[ConsistencyCheck]:
    """Check many profiles concurrently (bounded by the client), keeping no run store; input order."""
    return run_consistency(client, list(profiles), model, None, max_attempts)


def benchmark_profiles(benchmark: Any, users: Iterable[int] | None = None) -> list[ProfileToCheck]:
    """The profiles of a loaded benchmark to check: demographics and the preferences of kept domains."""
    ids = sorted(benchmark.users) if users is None else list(users)
    absent = [u for u in ids if u not in benchmark.users]
    if absent:
        raise KeyError(f"user(s) {absent} are not in the benchmark ({len(benchmark.users)} users)")
    return [
        ProfileToCheck(u, benchmark.users[u].demographics, benchmark.users[u].active_preferences())
        for u in ids
    ]


def run_consistency(
    client: LLMClient,
    profiles: Sequence[ProfileToCheck],
    model: str = DEFAULT_MODEL,
    run_dir: str | os.PathLike[str] | None = None,
    max_attempts: int = MAX_ATTEMPTS,
    *,
    retry_errors: bool = True,
) -> list[ConsistencyCheck]:
    """Check profiles into `<run_dir>/consistency.jsonl` (a throwaway store when None); one record per
    profile, in the order given.

    A profile already checked there (same model, backend and prompt version) is not asked again;
    one whose check errored in the llm layer is, unless `retry_errors=False`.
    """
    if run_dir is None:
        with tempfile.TemporaryDirectory(prefix="consistency-") as scratch:
            return _run(client, profiles, model, RunStore(scratch), max_attempts, retry_errors)
    return _run(client, profiles, model, RunStore(run_dir), max_attempts, retry_errors)


def _run(
    client: LLMClient, profiles: Sequence[ProfileToCheck], model: str, store: RunStore, max_attempts: int,
    retry_errors: bool,
) -> list[ConsistencyCheck]:
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    checker = Role.on(client, model)
    ids = [consistency_id(p.user_id, checker) for p in profiles]
    planned = engine.plan(store, ConsistencyCheck, [((i,), p) for i, p in zip(ids, profiles, strict=True)],
                          retry_errors=retry_errors)

    async def work(llm: LLMClient, item: Item[ProfileToCheck]) -> list[Record]:
        return [await check_profile(llm, item.payload, model, max_attempts)]

    stage = engine.Stage(STAGE, ConsistencyCheck, work)
    options = engine.StageOptions(desc="profile checks")
    report = engine.run_stage(stage, store, client, planned, options=options)
    run_card.note_stage(store, report, run_card.role_entry(checker),
                        prompt_version=CONSISTENCY_PROMPT_VERSION)
    stored = {r.id: r for r in store.read(ConsistencyCheck)}
    return [stored[i] for i in ids]


def flagged_summary(records: Iterable[ConsistencyCheck]) -> pd.DataFrame:
    """Profiles checked, read, missing and flagged (any, within-domain, cross-domain) with rates.

    Rates are over profiles whose answer was read; missing (and errored) ones are reported, not
    counted as 0.
    """
    rows = list(records)
    read = [r for r in rows if r.status == "ok"]
    n = len(read)

    def rate(k: int) -> float:
        return k / n if n else float("nan")

    flagged = sum(r.label or 0 for r in read)
    within = sum(r.within_domain or 0 for r in read)
    cross = sum(r.cross_domain or 0 for r in read)
    return pd.DataFrame(
        [
            ["Profiles checked", len(rows), None],
            ["Answers read", n, None],
            ["Answers missing (unreadable)", len(rows) - n, None],
            ["Flagged (any conflict)", flagged, rate(flagged)],
            ["Within-domain conflict", within, rate(within)],
            ["Cross-domain conflict", cross, rate(cross)],
        ],
        columns=["Measure", "Count", "Rate"],
    )


def records_frame(records: Iterable[ConsistencyCheck]) -> pd.DataFrame:
    """Per-profile results for display (the raw answer left out; it stays in the run store)."""
    df = pd.DataFrame([{k: v for k, v in r.to_json().items() if k != "raw"} for r in records])
    if "domains" in df:
        df["domains"] = df["domains"].map(lambda d: ", ".join(d) if isinstance(d, list) else "")
    return df
