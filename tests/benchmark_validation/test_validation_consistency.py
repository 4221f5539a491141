"""The profile consistency checker: strict parsing, the offline responder, retries and the flagged rate."""

from __future__ import annotations

import random

import pytest

from personalens_utils.benchmark_validation.consistency import (
    ConsistencyParseError,
    ProfileToCheck,
    build_request,
    check_profiles,
    flagged_summary,
    parse_consistency_answer,
)
from personalens_utils.benchmark_validation.offline import respond_consistency
from personalens_utils.llm import CallKind, FatalError, Request, Response, Usage
from personalens_utils.llm.client import LLMClient

GOOD = """WITHIN-DOMAIN CONFLICT: 1
CROSS-DOMAIN CONFLICT: 0
DOMAINS: restaurants, Hotels
EXPLANATION: Vegan diet but steakhouse cuisine.
It spans two lines."""


def test_parse_good_answer_and_tolerated_decoration():
    v = parse_consistency_answer(GOOD)
    assert (v.within, v.cross, v.label, v.domains) == (1, 0, 1, ("Restaurants", "Hotels"))
    assert v.explanation.endswith("It spans two lines.")
    decorated = (
        "Here is my review.\n<response>\n**WITHIN-DOMAIN CONFLICT:** 0\n**CROSS-DOMAIN CONFLICT:** 0\n"
        "DOMAINS: none\nEXPLANATION: all fine\n</response>"
    )
    assert parse_consistency_answer(decorated).label == 0


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (GOOD.replace("WITHIN-DOMAIN CONFLICT: 1\n", ""), "WITHIN-DOMAIN CONFLICT"),
        (GOOD + "\nCROSS-DOMAIN CONFLICT: 1", "found 2"),
        (GOOD.replace(": 1\n", ": yes\n", 1), "must be followed by 0 or 1"),
        (GOOD.replace(": 1\n", ": 0.5\n", 1), "must be followed by 0 or 1"),
        (GOOD.replace("restaurants", "Cooking"), "'Cooking', which is not a domain"),
        (GOOD.replace("restaurants, Hotels", "none"), "names none"),
        (GOOD.replace("CONFLICT: 1", "CONFLICT: 0"), "names some"),
        ("\n".join(GOOD.splitlines()[:3]) + "\nEXPLANATION:   ", "EXPLANATION is empty"),
        ("\n".join([GOOD.splitlines()[1], GOOD.splitlines()[0], *GOOD.splitlines()[2:]]), "order"),
        ("No conflicts here.", "found 0"),
    ],
)
def test_parse_rejects_malformed_answers(answer, problem):
    with pytest.raises(ConsistencyParseError, match=problem):
        parse_consistency_answer(answer)


def _profile(uid: int = 1, **prefs) -> ProfileToCheck:
    return ProfileToCheck(uid, {"age": "18-24 years old", "gender": "Female"}, prefs)


def _ask(profile: ProfileToCheck) -> str:
    return respond_consistency(build_request(profile), random.Random(0))


def test_offline_responder_rules_and_format():
    clean = _ask(
        _profile(
            Train={"Preferred Train Class": "standard class"}, Shopping={"Price Range Preference": "budget"}
        )
    )
    assert parse_consistency_answer(clean).label == 0
    within = parse_consistency_answer(
        _ask(_profile(Train={"Preferred Train Class": ["first class", "standard class"]}))
    )
    assert (within.within, within.cross, within.domains) == (1, 0, ("Train",))
    no_pref = parse_consistency_answer(
        _ask(_profile(Hotels={"Star Rating Preference": ["no preference", "5 star"]}))
    )
    assert no_pref.within == 1 and "no preference" in no_pref.explanation
    cross = parse_consistency_answer(
        _ask(
            _profile(
                Restaurants={"Price Range": ["budget-friendly"]},
                Train={"Preferred Train Class": "first class"},
            )
        )
    )
    assert (cross.within, cross.cross, set(cross.domains)) == (0, 1, {"Restaurants", "Train"})


def test_offline_responder_refuses_other_tasks():
    with pytest.raises(FatalError, match="task 'other'"):
        respond_consistency(Request(kind=CallKind.VALIDATION, messages=(), task="other"), random.Random(0))


def test_check_profiles_offline_and_flagged_rate():
    profiles = [
        _profile(1, Train={"Preferred Train Class": "standard class"}),
        _profile(2, Train={"Preferred Train Class": ["first class", "standard class"]}),
        _profile(3, Shopping={"Price Range Preference": "luxury"}, Events={"Price Range": ["free"]}),
        _profile(4, Music={"Preferred Audio Quality": "high"}),
    ]
    with LLMClient("offline", progress=False) as client:
        records = check_profiles(client, profiles)
    assert [r.user_id for r in records] == [1, 2, 3, 4]
    assert [r.label for r in records] == [0, 1, 1, 0]
    assert all(r.status == "ok" and r.attempts == 1 and r.backend == "offline" for r in records)
    summary = flagged_summary(records).set_index("Measure")
    assert summary.loc["Flagged (any conflict)", "Rate"] == pytest.approx(0.5)
    assert summary.loc["Within-domain conflict", "Count"] == 1
    assert summary.loc["Cross-domain conflict", "Count"] == 1


class _Scripted:
    """A backend that answers from a script, to exercise retries and give-ups."""

    name = "scripted"

    def __init__(self, answers: list[str]):
        self.answers = answers
        self.requests: list[Request] = []

    async def acomplete(self, request: Request, model: str) -> Response:
        self.requests.append(request)
        text = self.answers[min(len(self.requests) - 1, len(self.answers) - 1)]
        return Response(text=text, usage=Usage(), backend=self.name, model=model, latency_s=0.0)


def test_unreadable_answer_is_retried_with_the_problem_named():
    backend = _Scripted(["I think it is fine.", GOOD])
    with LLMClient(backend, progress=False, use_cache=False) as client:
        [record] = check_profiles(client, [_profile()])
    assert record.status == "ok" and record.attempts == 2 and record.label == 1
    retry = backend.requests[1]
    assert retry.messages[1].content == "I think it is fine."
    assert "found 0" in retry.messages[2].content


def test_answer_never_readable_is_missing_not_consistent():
    backend = _Scripted(["LABEL: 0"])
    with LLMClient(backend, progress=False, use_cache=False) as client:
        records = check_profiles(client, [_profile(1), _profile(2)], max_attempts=2)
    assert all(r.status == "missing" and r.label is None and r.raw == "LABEL: 0" for r in records)
    assert all(r.attempts == 2 and "WITHIN-DOMAIN" in r.problem for r in records)
    summary = flagged_summary(records).set_index("Measure")
    assert summary.loc["Answers missing (unreadable)", "Count"] == 2
    assert summary["Rate"].isna().all()


def test_run_consistency_resumes_from_the_run_store(tmp_path):
    from personalens_utils.benchmark_validation.consistency import run_consistency

    backend = _Scripted([GOOD])
    with LLMClient(backend, progress=False, use_cache=False) as client:
        first = run_consistency(client, [_profile(1), _profile(2)], run_dir=tmp_path)
        again = run_consistency(client, [_profile(2), _profile(3)], run_dir=tmp_path)
    assert len(backend.requests) == 3  # profile 2 was not asked twice
    assert [r.user_id for r in again] == [2, 3] and again[0] == first[1]
    assert len((tmp_path / "consistency.jsonl").read_text().splitlines()) == 3


def test_benchmark_profiles_keep_only_masked_in_domains_and_name_absent_users():
    from types import SimpleNamespace

    from personalens_utils.benchmark_validation.consistency import benchmark_profiles
    from personalens_utils.data import User

    user = User(
        user_id=5,
        demographics={"age": "65+ years old"},
        preferences={"Alarm": {"Alarm Sound Preference": "loud beeping"}, "Books": {"Genre": ["history"]}},
        interests={"Alarm": True, "Books": False},
        interactions={},
    )
    bench = SimpleNamespace(users={5: user})
    [profile] = benchmark_profiles(bench)
    assert profile.preferences == {"Alarm": {"Alarm Sound Preference": "loud beeping"}}
    with pytest.raises(KeyError, match=r"\[7\]"):
        benchmark_profiles(bench, [5, 7])
