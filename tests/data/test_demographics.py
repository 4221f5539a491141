"""The reference demographic distributions and regions; sampling, validating and reading users' records."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from personalens_utils.data import demographics as demo
from personalens_utils.reference import demographics as ref


def test_distributions_cover_tables_6_and_7_with_1500_each():
    variables = ref.variables()
    assert {v.table for v in variables.values()} == {6, 7}
    assert all(v.total == 1500 for v in variables.values())
    assert set(variables) - {"region"} <= set(ref.FIELDS)


def test_every_region_has_countries_and_region_of_is_strict():
    members = ref.region_members()
    assert set(members) == set(ref.variables()["region"].counts)
    assert ref.region_of("United Kingdom") == "UK"
    assert ref.region_of("Canada") == "Northern America"
    with pytest.raises(ref.DemographicsError, match="Atlantis"):
        ref.region_of("Atlantis")


def test_stored_and_printed_forms_round_trip():
    assert ref.to_category("ethnicity", "N/A") == "Prefer not to say"
    assert ref.to_stored("religion", "Prefer not to say") == "N/A"
    assert ref.to_category("gender", "Prefer not to say") == "Prefer not to say"


def test_sampling_is_seeded_valid_and_follows_the_marginals():
    a = demo.sample_demographics(3000, seed=11)
    assert a == demo.sample_demographics(3000, seed=11)
    assert a != demo.sample_demographics(3000, seed=12)
    for i, record in enumerate(a[:200]):
        assert list(record) == list(ref.FIELDS)
        demo.validate_demographics(record, f"sample {i}")
        assert record["birth_country"] == record["reside_country"]
    gender = Counter(r["gender"] for r in a)
    expected = ref.variables()["gender"].counts
    for category, count in expected.items():  # within 3 percentage points of the paper's share
        assert abs(gender[category] / 3000 - count / 1500) < 0.03
    regions = Counter(ref.region_of(r["birth_country"]) for r in a)
    assert abs(regions["US"] / 3000 - 338 / 1500) < 0.03
    assert "Prefer not to say" not in {r["ethnicity"] for r in a}  # stored as N/A, like the data


def test_validate_names_the_problem():
    good = demo.sample_demographics(1, seed=0)[0]
    with pytest.raises(ref.DemographicsError, match="rec: missing demographic field"):
        demo.validate_demographics({k: v for k, v in good.items() if k != "age"}, "rec")
    with pytest.raises(ref.DemographicsError, match="age='ancient'"):
        demo.validate_demographics({**good, "age": "ancient"}, "rec")
    with pytest.raises(ref.DemographicsError, match="must be a string"):
        demo.validate_demographics({**good, "gender": 3}, "rec")
    assert demo.validate_demographics({**good, "user_id": 4})["user_id"] == "4"


def test_read_demographics_csv_jsonl_and_prism_nesting(tmp_path):
    records = demo.sample_demographics(3, seed=5)
    csv_path = tmp_path / "people.csv"
    csv_path.write_text(
        ",".join(ref.FIELDS)
        + "\n"
        + "\n".join(",".join(f'"{r[f]}"' for f in ref.FIELDS) for r in records)
        + "\n",
        encoding="utf-8",
    )
    assert demo.read_demographics(csv_path) == records
    prism = []
    for r in records:
        nested = ("birth_country", "reside_country", "ethnicity", "religion")
        row = {k: v for k, v in r.items() if k not in nested}
        row["location"] = {"birth_country": r["birth_country"], "reside_country": r["reside_country"]}
        row["ethnicity"] = {"simplified": r["ethnicity"]}
        row["religion"] = {"simplified": r["religion"]}
        prism.append(json.dumps(row))
    jsonl = tmp_path / "survey.jsonl"
    jsonl.write_text("\n".join(prism) + "\n\n", encoding="utf-8")
    assert demo.read_demographics(jsonl) == records


def test_read_demographics_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(demo.sample_demographics(1)[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ref.DemographicsError, match=r"bad.jsonl:2: not valid JSON"):
        demo.read_demographics(bad)
    wrong = tmp_path / "x.txt"
    wrong.write_text("", encoding="utf-8")
    with pytest.raises(ref.DemographicsError, match=r"expected a \.csv or \.jsonl"):
        demo.read_demographics(wrong)
    with pytest.raises(ref.DemographicsError, match="not found"):
        demo.read_demographics(tmp_path / "absent.csv")
