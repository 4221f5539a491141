"""The offline generation responder: answers in the real format, deterministic, demographically biased."""

from __future__ import annotations

from collections import Counter

import pytest

from personalens_utils.data.demographics import sample_demographics
from personalens_utils.generation import requests as calls
from personalens_utils.generation.parsing import DEVICES, ENVIRONMENTS, TIMES_OF_DAY
from personalens_utils.llm import CallKind, FatalError, Message, Request
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.reference.schema import load_schema

SCHEMA = load_schema()
SETTINGS = calls.ModelSettings()


def _users(n: int, seed: int = 3) -> list[dict[str, str]]:
    return [{"user_id": f"user{i}", **d} for i, d in enumerate(sample_demographics(n, seed=seed))]


def _answer(call: calls.StepCall, seed: int = 0) -> str:
    return OfflineBackend(seed).respond(call.request, SETTINGS.model).text


def test_every_step_answer_parses_with_the_real_parser() -> None:
    tasks = []
    for domain in SCHEMA.domains:
        call = calls.sd_tasks_call(domain, 5, SETTINGS)
        tasks += call.parse(_answer(call))
    call = calls.md_tasks_call(SCHEMA.domains, 25, SETTINGS)
    md = call.parse(_answer(call))
    assert len(md) == 25 and len(tasks) == 100
    assert len({tuple(t["relevant_domains"]) for t in md}) > 15
    for user in _users(8):
        call = calls.mask_call(user, SCHEMA, SETTINGS)
        mask = call.parse(_answer(call))
        assert any(mask.values())
        prefs = {}
        for domain in SCHEMA.domains:
            call = calls.preferences_call(user, domain, SETTINGS)
            prefs[domain.name] = call.parse(_answer(call))
            call = calls.interactions_call(user, domain, prefs[domain.name], SETTINGS)
            summary = call.parse(_answer(call))
            first_value = next(iter(prefs[domain.name].values()))
            assert (first_value if isinstance(first_value, str) else first_value[0]) in summary
        for task in [*tasks[::9], *md[::5]]:
            task = {"task_id": "SD-x-task-1", **task}
            call = calls.situation_call(user, {d: prefs[d] for d in task["relevant_domains"]}, task, SETTINGS)
            situation, justification = call.parse(_answer(call))
            assert situation["Device"] in DEVICES and situation["Time of Day"] in TIMES_OF_DAY
            assert situation["Environment"] in ENVIRONMENTS and justification


def test_answers_are_deterministic_per_seed() -> None:
    (user,) = _users(1)
    call = calls.preferences_call(user, SCHEMA.domain("Music"), SETTINGS)
    assert _answer(call, seed=1) == _answer(call, seed=1)
    answers = {_answer(call, seed=s) for s in range(6)}
    assert len(answers) > 1


def test_two_users_with_identical_demographics_get_different_prompts() -> None:
    (user,) = _users(1)
    twin = {**user, "user_id": "user99"}
    a = calls.preferences_call(user, SCHEMA.domain("Music"), SETTINGS).request
    b = calls.preferences_call(twin, SCHEMA.domain("Music"), SETTINGS).request
    assert a.cache_key("offline", "m") != b.cache_key("offline", "m")


def test_timezone_and_location_follow_the_country() -> None:
    for user in _users(30):
        country = user["reside_country"]
        call = calls.preferences_call(user, SCHEMA.domain("Calendar"), SETTINGS)
        zone = call.parse(_answer(call))["Timezone"]
        if country == "United States":
            assert zone in {"UTC-5", "UTC-6", "UTC-7", "UTC-8"}
        if country == "United Kingdom":
            assert zone == "UTC+0"


def test_choices_lean_on_demographics() -> None:
    """Students pick budget options more often and luxury far less often than full-time workers."""
    shops = SCHEMA.domain("Shopping")
    picks: dict[str, Counter[str]] = {"Student": Counter(), "Working full-time": Counter()}
    for status, counter in picks.items():
        for user in _users(150, seed=11):
            call = calls.preferences_call({**user, "employment_status": status}, shops, SETTINGS)
            counter[call.parse(_answer(call))["Price Range Preference"]] += 1
    assert picks["Student"]["budget"] > 1.2 * picks["Working full-time"]["budget"]
    assert picks["Working full-time"]["luxury"] > 2 * picks["Student"]["luxury"]


def test_masks_lean_on_demographics() -> None:
    kept: Counter[str] = Counter()
    for user in _users(200, seed=5):
        for age in ("18-24 years old", "65+ years old"):
            call = calls.mask_call({**user, "age": age}, SCHEMA, SETTINGS)
            kept[age] += call.parse(_answer(call))["Games"]
    assert kept["18-24 years old"] > 1.5 * kept["65+ years old"]


def test_bad_requests_fail_clearly() -> None:
    backend = OfflineBackend()
    unknown = Request(kind=CallKind.GENERATION, task="poems", messages=(Message("user", "hi"),))
    with pytest.raises(FatalError, match="no generation step 'poems'"):
        backend.respond(unknown, "m")
    bare = Request(kind=CallKind.GENERATION, task="mask", messages=(Message("user", "hi"),),
                   context={"domains": ["Alarm"]})
    with pytest.raises(FatalError, match=r"lacks \['demographics'\]"):
        backend.respond(bare, "m")
