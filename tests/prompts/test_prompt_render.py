"""The shared renderers of profile material: each form, and where two stages' forms differ on purpose."""

from __future__ import annotations

from personalens_utils.prompt_templates.dialogue import EMPTY_CLOSING
from personalens_utils.prompt_templates.render import (
    render_conversation,
    render_demographics,
    render_fields,
    render_fields_as_keyed,
    render_history,
    render_interactions,
    render_preferences,
    render_preferences_nested,
)
from personalens_utils.reference.demographics import FIELDS

ALARM = {"Alarm Time Preference": "6:30 AM", "Alarm Sound": ["birds", "rain"]}
MUSIC = {"Preferred Genres": ["jazz", "blues"]}


def test_dialogue_form_heads_every_domain_and_the_generation_form_leaves_a_lone_one_unheaded() -> None:
    # the dialogue form reads names like field keys ("Alarm time preference"); prompts are keyed by it
    assert render_preferences({"Alarm": ALARM}) == (
        "Alarm:\n- Alarm time preference: 6:30 AM\n- Alarm sound: birds, rain"
    )
    alone = render_preferences_nested({"Alarm": ALARM})
    assert alone == "- Alarm Time Preference: 6:30 AM\n- Alarm Sound: birds, rain"
    assert render_preferences_nested({"Alarm": ALARM, "Music": MUSIC}) == (
        "Alarm:\n  - Alarm Time Preference: 6:30 AM\n  - Alarm Sound: birds, rain\n"
        "Music:\n  - Preferred Genres: jazz, blues"
    )
    assert render_preferences({}) == "(none)"


def test_field_forms_differ_in_labels_and_in_the_empty_case() -> None:
    values = {"age_group": "35-44", "time_of_day": "morning", "hobbies": ("chess", "golf")}
    readable = render_fields(values).splitlines()
    keyed = render_fields_as_keyed(values).splitlines()
    assert readable[0] == "- Age group: 35-44" and readable[2] == "- Hobbies: chess, golf"
    assert keyed[0] == "- age_group: 35-44" and keyed[2] == "- hobbies: chess, golf"
    assert readable[1] == keyed[1] and "morning" in keyed[1]  # situation keys read alike in both
    assert render_fields({}) == "- (none)"
    assert render_fields_as_keyed({}) == "(none)"


def test_generation_demographics_follow_the_schema_order_with_the_user_id_first() -> None:
    person = {field: f"v-{field}" for field in reversed(FIELDS)} | {"user_id": "7"}
    lines = render_demographics(person).splitlines()
    assert lines[0] == "- User id: 7"
    assert [line.split(": ")[1] for line in lines[1:]] == [f"v-{field}" for field in FIELDS]


def test_interactions_and_dialogue_text() -> None:
    assert render_interactions({"Alarm": "Set alarms."}) == "Set alarms."
    assert render_interactions({"Alarm": "A.", "Music": "M."}) == "Alarm:\nA.\n\nMusic:\nM."
    assert render_interactions({}) == "(none)"
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
             {"role": "user", "content": ""}]
    assert render_history(turns[:2]) == "USER: Hi\nASSISTANT: Hello"
    assert render_conversation(turns).splitlines()[-1] == f"USER: {EMPTY_CLOSING}"
