"""Generation parsers on well-formed and malformed answers (bad JSON, unknown options, missing types,
wrong multiplicity, bad task lists, invalid situation values)."""

from __future__ import annotations

import json

import pytest

from personalens_utils.generation.parsing import (
    MIN_SUMMARY_WORDS,
    AnswerError,
    extract_json,
    parse_interactions,
    parse_mask,
    parse_md_tasks,
    parse_preferences,
    parse_sd_tasks,
    parse_situation,
)
from personalens_utils.reference.schema import load_schema

SCHEMA = load_schema()
ALARM = SCHEMA.domain("Alarm")
BOOKS = SCHEMA.domain("Books")
DOMAINS = {d.name: d for d in SCHEMA.domains}

GOOD_ALARM = {"Alarm Time Preference": "7:00 AM", "Alarm Sound Preference": "gentle nature",
              "Alarm Recurring Preference": "weekdays"}
GOOD_BOOKS = {"Genre": ["fantasy", "history"], "Favourite Authors": ["Ursula K. Le Guin"],
              "Favourite Books": ["Dune"], "Favourite Book Series": ["Discworld"],
              "Reading Format": ["ebook"], "Reading Time Preference": ["evening"],
              "Reading Frequency": "weekly"}


def _problem(excinfo: pytest.ExceptionInfo[AnswerError]) -> str:
    return str(excinfo.value)


# -- JSON extraction -----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    json.dumps(GOOD_ALARM),
    "```json\n" + json.dumps(GOOD_ALARM, indent=2) + "\n```",
    "Here are the preferences:\n" + json.dumps(GOOD_ALARM),
    "<response>" + json.dumps(GOOD_ALARM) + "</response>",
])
def test_json_is_found_in_common_wrappers(text: str) -> None:
    assert parse_preferences(text, ALARM) == GOOD_ALARM


@pytest.mark.parametrize(("text", "expected"), [
    ('{"Alarm Time Preference": "7:00 AM", ', "not valid JSON"),
    ("I would pick 7 AM and gentle sounds.", "no JSON object"),
    ("{'Alarm Time Preference': '7:00 AM'}", "not valid JSON"),
])
def test_malformed_json_is_rejected(text: str, expected: str) -> None:
    with pytest.raises(AnswerError) as excinfo:
        parse_preferences(text, ALARM)
    assert expected in _problem(excinfo)


def test_wrong_json_type_is_named() -> None:
    with pytest.raises(AnswerError, match="expected a JSON object, got list"):
        extract_json('[{"a": 1}]', dict)
    with pytest.raises(AnswerError, match="expected a JSON array, got dict"):
        extract_json('{"tasks": [1]}', list)


def test_remarks_after_the_value_are_ignored() -> None:
    text = json.dumps(GOOD_ALARM) + "\nI chose a weekday alarm because the person works full-time."
    assert parse_preferences(text, ALARM) == GOOD_ALARM


# -- preferences ---------------------------------------------------------------------------------

def test_options_are_matched_loosely_and_returned_canonically() -> None:
    answer = {"alarm time preference": "7:00 am", "Alarm Sound Preference": ["Gentle Nature"],
              "Alarm Recurring Preference": " weekdays "}
    assert parse_preferences(json.dumps(answer), ALARM) == GOOD_ALARM


def test_multi_valued_types_are_lists_and_open_types_take_free_text() -> None:
    answer = {**GOOD_BOOKS, "Reading Format": "ebook", "Favourite Authors": "Some Local Poet"}
    prefs = parse_preferences(json.dumps(answer), BOOKS)
    assert prefs["Reading Format"] == ["ebook"]
    assert prefs["Favourite Authors"] == ["Some Local Poet"]
    assert prefs["Reading Frequency"] == "weekly"


@pytest.mark.parametrize(("change", "expected"), [
    ({"Alarm Sound Preference": "air horn"}, "'air horn'] not among its options"),
    ({"Alarm Time Preference": ["7:00 AM", "8:00 AM"]}, "takes exactly one value, got 2"),
    ({"Alarm Recurring Preference": []}, "no value given"),
    ({"Alarm Recurring Preference": ""}, "no value given"),
    ({"Alarm Recurring Preference": 5}, "expected a string or a list of strings"),
    ({"Alarm Recurring Preference": ["weekdays", None]}, "expected a string or a list of strings"),
    ({"Snooze Preference": "10 minutes"}, "unknown preference type(s) ['Snooze Preference']"),
])
def test_invalid_preference_values(change: dict, expected: str) -> None:
    with pytest.raises(AnswerError) as excinfo:
        parse_preferences(json.dumps({**GOOD_ALARM, **change}), ALARM)
    assert expected in _problem(excinfo)


def test_missing_type_is_named() -> None:
    answer = {k: v for k, v in GOOD_BOOKS.items() if k != "Reading Format"}
    with pytest.raises(AnswerError, match=r"missing preference type\(s\) \['Reading Format'\]"):
        parse_preferences(json.dumps(answer), BOOKS)


def test_every_problem_is_reported_at_once() -> None:
    answer = {"Alarm Time Preference": "25:00", "Alarm Sound Preference": ["gentle nature", "loud beeping"]}
    with pytest.raises(AnswerError) as excinfo:
        parse_preferences(json.dumps(answer), ALARM)
    assert len(excinfo.value.problems) == 3  # missing type, unknown option, wrong multiplicity


# -- interest mask -------------------------------------------------------------------------------

def _mask(**changes: object) -> str:
    return json.dumps({**{d: 1 for d in SCHEMA.domain_names}, **changes})


def test_mask_accepts_zeros_ones_and_booleans() -> None:
    mask = parse_mask(_mask(Games=0, Buses=False, Alarm=True, Books="1"), SCHEMA.domain_names)
    assert mask["Games"] == 0 and mask["Buses"] == 0 and mask["Alarm"] == 1 and mask["Books"] == 1
    assert set(mask) == set(SCHEMA.domain_names)


@pytest.mark.parametrize(("text", "expected"), [
    (_mask(Games=2), "'Games': expected 0 or 1, got 2"),
    (_mask(Games="maybe"), "expected 0 or 1"),
    (json.dumps({"Alarm": 1}), "missing domain(s)"),
    (_mask(Gardening=1), "unknown domain(s) ['Gardening']"),
    (json.dumps({d: 0 for d in SCHEMA.domain_names}), "at least one domain"),
])
def test_invalid_masks(text: str, expected: str) -> None:
    with pytest.raises(AnswerError) as excinfo:
        parse_mask(text, SCHEMA.domain_names)
    assert expected in _problem(excinfo)


# -- interaction summaries -----------------------------------------------------------------------

def test_summary_label_is_stripped() -> None:
    body = " ".join(["word"] * MIN_SUMMARY_WORDS)
    assert parse_interactions(f"Interaction summary: {body}") == body


@pytest.mark.parametrize(("text", "expected"), [
    ("", "0 words"),
    ("The user likes alarms.", "4 words"),
    ('{"summary": "' + "word " * 40 + '"}', "got JSON"),
])
def test_invalid_summaries(text: str, expected: str) -> None:
    with pytest.raises(AnswerError, match=expected):
        parse_interactions(text)


# -- tasks ---------------------------------------------------------------------------------------

def _sd(n: int = 2, **changes: object) -> list[dict]:
    tasks = [
        {"task_description": f"The user wants to set alarm number {i}.",
         "user_intent": f"You want to set alarm number {i}.",
         "task_goal": "An alarm is set.",
         "relevant_preference_types": ["Alarm Time Preference"]}
        for i in range(n)
    ]
    tasks[0].update(changes)
    return tasks


def test_sd_tasks_parse_and_get_their_domain() -> None:
    tasks = parse_sd_tasks(json.dumps(_sd(relevant_preference_types="alarm time preference")), ALARM, 2)
    assert tasks[0]["relevant_preference_types"] == ["Alarm Time Preference"]
    assert all(t["relevant_domains"] == ["Alarm"] for t in tasks)


@pytest.mark.parametrize(("tasks", "expected"), [
    (_sd(3), "expected 2 tasks, got 3"),
    (_sd(user_intent="The user sets an alarm."), "second person"),
    (_sd(relevant_preference_types=["Genre"]), "['Genre'] are not in the schema"),
    (_sd(relevant_preference_types=[]), "no value given"),
    (_sd(task_goal=""), "'task_goal' must be a non-empty string"),
    (_sd(task_description="The user wants to set alarm number 1."), "same task_description"),
    ([_sd()[0], "just a string"], "task 2: expected a JSON object"),
    ([{"task_description": "x", "user_intent": "You"}, _sd()[1]], "missing key(s) ['task_goal', 'relevant"),
])
def test_invalid_sd_tasks(tasks: list, expected: str) -> None:
    with pytest.raises(AnswerError) as excinfo:
        parse_sd_tasks(json.dumps(tasks), ALARM, 2)
    assert expected in _problem(excinfo)


def test_sd_tasks_must_be_an_array() -> None:
    with pytest.raises(AnswerError, match="expected a JSON array, got dict"):
        parse_sd_tasks(json.dumps(_sd()[0]), ALARM, 1)


def _md(**changes: object) -> list[dict]:
    task = {"task_description": "The user plans a trip with a flight, a hotel and a car.",
            "user_intent": "You want to plan a trip.", "task_goal": "Everything is booked.",
            "relevant_domains": ["Flights", "Hotels", "Rental Cars"],
            "relevant_preference_types": ["Preferred Airline", "Star Rating Preference"]}
    return [{**task, **changes}]


def test_md_tasks_in_response_tags() -> None:
    (task,) = parse_md_tasks("<response>\n" + json.dumps(_md()) + "\n</response>", DOMAINS, 1)
    assert task["relevant_domains"] == ["Flights", "Hotels", "Rental Cars"]


@pytest.mark.parametrize(("task", "expected"), [
    (_md(relevant_domains=["Flights", "Hotels"]), "spans 2 domain(s)"),
    (_md(relevant_domains=["Flights", "Hotels", "Rental Cars", "Travel", "Train", "Buses"]), "spans 6"),
    (_md(relevant_domains=["Flights", "Hotels", "Spaceships"]), "unknown domain(s) ['Spaceships']"),
    (_md(relevant_preference_types=["Genre"]), "['Genre'] are not in the schema of its domain(s)"),
    (_md(user_intent="Plan a trip."), "second person"),
])
def test_invalid_md_tasks(task: list, expected: str) -> None:
    with pytest.raises(AnswerError) as excinfo:
        parse_md_tasks(json.dumps(task), DOMAINS, 1)
    assert expected in _problem(excinfo)


def test_md_tasks_may_not_repeat_earlier_chunks() -> None:
    earlier = [_md()[0]["task_description"].upper()]
    with pytest.raises(AnswerError, match="repeats the task_description of a task written earlier"):
        parse_md_tasks(json.dumps(_md()), DOMAINS, 1, earlier=earlier)


def test_repeated_domains_count_once() -> None:
    with pytest.raises(AnswerError, match="spans 2 domain"):
        parse_md_tasks(json.dumps(_md(relevant_domains=["Flights", "flights", "Hotels"])), DOMAINS, 1)


# -- situations ----------------------------------------------------------------------------------

GOOD_SITUATION = {"Location": "Toronto, Canada", "Device": "Smartphone", "Time of Day": "Evening",
                  "Day of the Week": "Sunday", "Environment": "Quiet", "Justification": "Planning at home."}


def test_situation_values_are_canonicalised() -> None:
    answer = {**GOOD_SITUATION, "Device": "smart speaker", "Time of Day": "night", "Environment": "NOISY"}
    situation, why = parse_situation(json.dumps(answer))
    assert situation == {"Location": "Toronto, Canada", "Device": "Smart speaker", "Time of Day": "Night",
                         "Day of the Week": "Sunday", "Environment": "Noisy"}
    assert why == "Planning at home."


def test_justification_is_optional() -> None:
    answer = {k: v for k, v in GOOD_SITUATION.items() if k != "Justification"}
    assert parse_situation(json.dumps(answer))[1] == ""


@pytest.mark.parametrize(("change", "expected"), [
    ({"Device": "Smart TV"}, "'Device': 'Smart TV' is not one of"),
    ({"Time of Day": "Late Afternoon"}, "'Time of Day': 'Late Afternoon'"),
    ({"Day of the Week": "Weekday (e.g., Tuesday)"}, "'Day of the Week'"),
    ({"Environment": "Moderately Noisy"}, "'Environment': 'Moderately Noisy'"),
    ({"Location": ""}, "'Location': expected a non-empty string"),
    ({"Location": "x" * 200}, "keep it to a place name"),
    ({"Device": 3}, "'Device': expected a non-empty string"),
    ({"Mood": "happy"}, "unknown situation variable(s) ['Mood']"),
    ({"Justification": ["a", "b"]}, "'Justification' must be a string"),
])
def test_invalid_situations(change: dict, expected: str) -> None:
    with pytest.raises(AnswerError) as excinfo:
        parse_situation(json.dumps({**GOOD_SITUATION, **change}))
    assert expected in _problem(excinfo)


def test_missing_situation_variable() -> None:
    answer = {k: v for k, v in GOOD_SITUATION.items() if k != "Environment"}
    with pytest.raises(AnswerError, match=r"missing situation variable\(s\) \['Environment'\]"):
        parse_situation(json.dumps(answer))
