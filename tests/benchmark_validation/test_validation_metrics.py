"""Validation measures on small hand-made inputs whose results were worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from personalens_utils.benchmark_validation import metrics
from personalens_utils.benchmark_validation.figures import figure3
from personalens_utils.outputs import plots


@pytest.mark.parametrize(
    ("counts", "n", "expected"),
    [
        ([5, 5], None, 1.0),  # uniform over 2
        ([2, 2, 2, 2], None, 1.0),  # uniform over 4
        ([3, 1], None, 0.811278124459),  # H = 0.562335 nats, / ln 2
        ([2, 1, 1], None, 0.946394630357),  # H = 1.5 bits, / log2 3
        ([1, 1], 4, 0.5),  # n given: ln 2 / ln 4
        ({"a": 3, "b": 1, "c": 0}, None, 0.811278124459),  # zero counts are not categories
    ],
)
def test_evenness_hand_computed(counts, n, expected):
    assert metrics.shannon_evenness(counts, n) == pytest.approx(expected, abs=1e-9)


def test_evenness_undefined_and_bad_input():
    assert math.isnan(metrics.shannon_evenness([7]))
    assert math.isnan(metrics.shannon_evenness([4, 0]))
    with pytest.raises(metrics.ValidationInputError, match="empty"):
        metrics.shannon_evenness([0, 0])
    with pytest.raises(metrics.ValidationInputError, match="non-negative"):
        metrics.shannon_evenness([3, -1])
    with pytest.raises(metrics.ValidationInputError, match="smaller"):
        metrics.shannon_evenness([1, 1, 1], n=2)


def _user(**fields: str) -> dict[str, str]:
    base = {
        "age": "25-34 years old",
        "gender": "Female",
        "employment_status": "Student",
        "education": "Vocational",
        "marital_status": "Married",
        "english_proficiency": "Fluent",
        "ethnicity": "N/A",
        "religion": "Christian",
        "birth_country": "Chile",
        "reside_country": "Chile",
    }
    return {**base, **fields}


def test_demographics_table_counts_percent_regions_and_na():
    records = [
        _user(),
        _user(gender="Male", birth_country="Canada"),
        _user(ethnicity="Asian"),
        _user(birth_country="United States"),
    ]
    t6 = metrics.demographics_table(records, 6)
    gender = t6[t6["Variable"] == "Gender"].set_index("Category")
    assert gender["Count"].to_dict() == {"Male": 1, "Female": 3}
    assert list(gender.index) == ["Male", "Female"]  # the paper's order, absent categories dropped
    eth = t6[t6["Variable"] == "Self-Reported Ethnicity"].set_index("Category")
    assert eth.loc["Prefer not to say", "Count"] == 3  # stored "N/A" printed as the paper prints it
    assert eth.loc["Asian", "Percent"] == pytest.approx(25.0)
    t7 = metrics.demographics_table(records, 7)
    regions = t7[t7["Variable"] == "Regions"].set_index("Category")["Count"].to_dict()
    assert regions == {"US": 1, "Latin America and the Caribbean": 2, "Northern America": 1}


def test_demographics_table_rejects_missing_field_and_unknown_country():
    with pytest.raises(metrics.ValidationInputError, match="'gender'"):
        metrics.demographics_table([{k: v for k, v in _user().items() if k != "gender"}], 6)
    with pytest.raises(ValueError, match="Atlantis"):
        metrics.demographics_table([_user(birth_country="Atlantis")], 7)


def _prefs(seat: str | list[str], company: list[str]) -> dict[str, dict[str, object]]:
    return {"Buses": {"Seat Preference": seat, "Preferred Bus Company": company}}


def test_preference_table_counts_each_value_caps_gen_and_uses_distinct_n():
    users = [
        _prefs("window", ["Greyhound", "Megabus"]),
        _prefs("window", ["Greyhound"]),
        _prefs("aisle", ["FlixBus"]),
        _prefs("standing", ["Greyhound"]),  # off the option list
        _prefs(["window", "aisle"], ["Megabus"]),  # a list gives each of its values
    ]
    df = metrics.preference_table(users).set_index(["Domain", "Preference Type"])
    seat = df.loc[("Buses", "Seat Preference")]
    # options: window, aisle, no preference -> 3 possible; distinct generated: window, aisle, standing
    assert seat["# Poss."] == 3 and seat["# Distinct"] == 3 and seat["# Off-list"] == 1
    assert seat["# Gen."] == 3
    # counts window 3, aisle 2, standing 1 over n = 3 distinct values
    p = [3 / 6, 2 / 6, 1 / 6]
    assert seat["Evenness"] == pytest.approx(-sum(x * math.log(x) for x in p) / math.log(3))
    company = df.loc[("Buses", "Preferred Bus Company")]
    assert not company["Is Categorical"] and pd.isna(company["# Poss."])
    assert company["# Gen."] == 3  # Greyhound 3, Megabus 2, FlixBus 1
    assert company["Evenness"] == pytest.approx(seat["Evenness"])
    untouched = df.loc[("Alarm", "Alarm Sound Preference")]
    assert untouched["# Gen."] == 0 and math.isnan(untouched["Evenness"])


def test_preference_table_caps_gen_at_possible():
    options_plus_one = [
        {"Train": {"Preferred Train Class": v}} for v in ("first class", "standard class", "sleeper")
    ]
    row = metrics.preference_table(options_plus_one).set_index("Preference Type").loc["Preferred Train Class"]
    assert (row["# Poss."], row["# Gen."], row["# Distinct"], row["# Off-list"]) == (2, 2, 3, 1)
    assert row["Evenness"] == pytest.approx(1.0)


def test_preference_table_names_bad_input():
    with pytest.raises(metrics.ValidationInputError, match="user #1: unknown domain 'Cooking'"):
        metrics.preference_table([{}, {"Cooking": {}}])
    with pytest.raises(metrics.ValidationInputError, match="no preference type 'Colour'"):
        metrics.preference_table([{"Buses": {"Colour": "red"}}])
    with pytest.raises(metrics.ValidationInputError, match="Buses/Seat Preference"):
        metrics.preference_table([{"Buses": {"Seat Preference": 3}}])


def test_split_tables_8_9_follows_the_paper():
    df = metrics.preference_table([])
    t8, t9 = metrics.split_tables_8_9(df)
    assert t8["Domain"].iloc[-1] == "Media" and t9["Domain"].iloc[0] == "Messaging"
    assert (len(t8), len(t9)) == (len(metrics.paper_table(8)), len(metrics.paper_table(9)))


def test_task_table_md_counts_toward_each_domain():
    definitions = [
        ("SD", ["Alarm"]),
        ("SD", ["Alarm"]),
        ("SD", ["Books"]),
        ("MD", ["Alarm", "Books", "Buses"]),
    ]
    scenarios = [("SD", ["Alarm"])] * 3 + [("MD", ["Alarm", "Books", "Buses"])] * 2
    per_domain, totals = metrics.task_table(definitions, scenarios)
    rows = per_domain.set_index("Domain")
    assert rows.loc["Alarm", ["# Tasks SD", "# Tasks MD", "# Tasks"]].tolist() == [2, 1, 3]
    assert rows.loc["Buses", ["# Tasks", "# Dial SD", "# Dial MD", "# Dial"]].tolist() == [1, 0, 2, 2]
    assert rows.loc["Alarm", "# Dial"] == 5 and rows.loc["Travel", "# Tasks"] == 0
    assert totals.set_index("Task type").loc["All"].tolist() == [4, 5]
    with pytest.raises(metrics.ValidationInputError, match="task #0"):
        metrics.task_table([("XD", ["Alarm"])], [])
    with pytest.raises(metrics.ValidationInputError, match="scenario #0"):
        metrics.task_table([], [("SD", ["Narnia"])])


def test_compare_with_paper_names_differing_and_missing_cells():
    measured = pd.DataFrame({"Domain": ["A", "B", "C"], "# Tasks": [1, 2, 3], "# Dial": [10, 20, 30]})
    printed = pd.DataFrame({"Domain": ["A", "B", "D"], "# Tasks": [1, 5, 4], "# Dial": [10, 20, 40]})
    cmp = metrics.compare_with_paper(measured, printed, ["Domain"], ["# Tasks", "# Dial"])
    bad = {(r.Domain, r.Column) for r in cmp.itertuples() if not r.match}
    assert bad == {("B", "# Tasks"), ("C", "# Tasks"), ("C", "# Dial"), ("D", "# Tasks"), ("D", "# Dial")}
    summary = metrics.comparison_summary({"T": cmp})
    assert summary.loc[0, ["Cells", "Matching"]].tolist() == [8, 3]
    assert "B: # Tasks" in summary.loc[0, "Differing cells"]


def test_printed_form_rounds_like_the_paper():
    df = pd.DataFrame({"Percent": [30.2666666, 0.05 + 1e-12], "Evenness": [0.715, math.nan]})
    shown = metrics.printed_form(df)
    assert shown["Percent"].tolist() == [30.3, 0.1]
    assert shown["Evenness"].iloc[0] == 0.72 and math.isnan(shown["Evenness"].iloc[1])


def test_paper_tables_resource_is_consistent_with_demographics_resource():
    from personalens_utils.reference import demographics as demo

    for number in (6, 7):
        printed = metrics.paper_table(number)
        for var in (v for v in demo.variables().values() if v.table == number):
            rows = printed[printed["Variable"] == var.name]
            assert dict(zip(rows["Category"], rows["Count"], strict=True)) == dict(var.counts)
            assert rows["Percent"].tolist() == [round(100 * c / 1500 + 1e-9, 1) for c in var.counts.values()]


def test_benchmark_source_reads_the_generation_manifest(tmp_path):
    import json

    from personalens_utils.generation.runner import MANIFEST
    from personalens_utils.llm.offline import OFFLINE_LABEL

    label, generated = metrics.benchmark_source(tmp_path)
    assert not generated and "not generated by the kit" in label
    (tmp_path / MANIFEST).write_text(json.dumps({"backend": "offline", "label": OFFLINE_LABEL}))
    label, generated = metrics.benchmark_source(tmp_path)
    assert generated and OFFLINE_LABEL in label


def test_side_by_side_lays_out_data_and_paper():
    measured = pd.DataFrame({"Domain": ["A", "B"], "# Tasks": [1, 2], "# Dial": [10, 20]})
    printed = pd.DataFrame({"Domain": ["A", "B"], "# Tasks": [1, 5], "# Dial": [10, 20]})
    compared = metrics.compare_with_paper(measured, printed, ["Domain"], ["# Tasks", "# Dial"])
    wide = metrics.side_by_side(compared)
    assert wide.columns.tolist() == [
        "Domain",
        "# Tasks (data)",
        "# Tasks (paper)",
        "# Dial (data)",
        "# Dial (paper)",
        "differs",
    ]
    assert wide["differs"].tolist() == ["", "# Tasks"]


def test_table6_lists_age_groups_from_the_youngest_as_figure3_draws_them():
    ages = ["25-34 years old", "18-24 years old", "35-44 years old", "55-64 years old", "25-34 years old"]
    records = [_user(age=age) for age in ages]
    listed = list(metrics.demographics_table(records, 6).query("Variable == 'Age'")["Category"])
    assert listed == ["18-24 years old", "25-34 years old", "35-44 years old", "55-64 years old"]
    figure = figure3(records).figure
    panel = next(ax for ax in figure.axes if ax.get_title() == "Age")
    labels = [t.get_text() for t in panel.get_yticklabels()]
    ticks = sorted(zip(panel.get_yticks(), labels, strict=True),
                   key=lambda pair: pair[0] if panel.yaxis_inverted() else -pair[0])  # top down
    assert [label.replace("\n", " ") for _, label in ticks] == listed


@pytest.mark.parametrize(("backends", "note"), [((), plots.GIVEN_NOTE), (("offline",), plots.OFFLINE_NOTE)])
def test_figure3_says_inside_where_its_users_came_from(backends, note):
    """Users the benchmark ships get the given-data note, never the offline one; offline users the other."""
    records = [_user(age=age) for age in ("18-24 years old", "25-34 years old")]
    result = figure3(records, backend_names=backends)
    assert [fig.get_suptitle() for fig in (result.figure, result.at("column"))] == [note, note]


def test_figure3_says_us_and_northern_america_are_the_papers_split_when_it_lists_both():
    """The data records birth countries; Table 7 counts the United States as "US" and Canada as
    "Northern America". A figure listing both says so, one listing one of them says nothing."""
    both = [_user(birth_country="United States"), _user(birth_country="Canada"), _user()]
    caption = figure3(both).describe()
    assert '"US" apart from "Northern America" (to which the kit maps Canada)' in caption
    assert "the data records birth countries" in caption and '"UK"' not in caption
    regions = figure3(both).data.query("Variable == 'Regions'")
    assert set(regions["Category"]) == {"US", "Northern America", "Latin America and the Caribbean"}
    one = figure3([_user(birth_country="United States"), _user()]).describe()
    assert "apart from" not in one
