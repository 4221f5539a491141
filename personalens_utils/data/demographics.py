"""Demographic variables of PersonaLens users: the paper's distributions, sampling, reading and regions.

The built-in distributions are the marginal counts of the paper's Tables 6 and 7 (the 1,500 PRISM
survey participants). Users are sampled from those marginals independently, so a generated benchmark
matches the paper's breakdown per variable, not the joint structure of the real survey; give a survey
file to `read_demographics` when the joint structure matters.
"""

from __future__ import annotations

import csv
import json
import os
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

FIELDS: tuple[str, ...] = (
    "age",
    "gender",
    "employment_status",
    "education",
    "marital_status",
    "english_proficiency",
    "ethnicity",
    "religion",
    "birth_country",
    "reside_country",
)
"""The demographic fields of a profile, in the official data's order (plus `user_id` there)."""

PREFER_NOT = "Prefer not to say"


class DemographicsError(ValueError):
    """A demographic record or file that does not fit the kit's fields and categories."""


@dataclass(frozen=True)
class Variable:
    """One breakdown of Tables 6-7: its printed name, the profile field it reads, and printed counts."""

    table: int
    name: str
    field: str
    counts: Mapping[str, int]

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(self.counts)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _resource(name: str) -> Any:
    return json.loads(resources.files("personalens_utils.resources").joinpath(name).read_text("utf-8"))


@cache
def variables() -> dict[str, Variable]:
    """The variables of Tables 6 and 7 keyed by profile field (`region` is derived from birth country)."""
    raw = _resource("demographics.json")
    return {
        v["field"]: Variable(table=v["table"], name=v["name"], field=v["field"], counts=dict(v["counts"]))
        for v in raw["variables"]
    }


@cache
def _stored_as() -> dict[str, dict[str, str]]:
    return _resource("demographics.json")["stored_as"]


@cache
def region_members() -> dict[str, tuple[str, ...]]:
    """Region of Table 7 -> the country names (as the data spells them) that belong to it."""
    return {region: tuple(countries) for region, countries in _resource("regions.json")["regions"].items()}


@cache
def _country_region() -> dict[str, str]:
    return {country: region for region, members in region_members().items() for country in members}


def region_of(country: str) -> str:
    """The Table 7 region of a country name; unknown names raise rather than fall into "Other"."""
    try:
        return _country_region()[country]
    except KeyError:
        raise DemographicsError(
            f"country {country!r} is not in personalens_utils/resources/regions.json; add it to a region"
        ) from None


def to_category(field: str, value: str) -> str:
    """A stored value as the tables print it: the data writes "N/A" where the paper prints
    "Prefer not to say" for ethnicity and religion."""
    for printed, stored in _stored_as().get(field, {}).items():
        if value == stored:
            return printed
    return value


def to_stored(field: str, category: str) -> str:
    """The inverse of `to_category`: how a printed category is written into a profile."""
    return _stored_as().get(field, {}).get(category, category)


def sample_demographics(n: int, seed: int | random.Random = 0) -> list[dict[str, str]]:
    """`n` demographic records drawn from the Tables 6-7 marginals, in the official stored form.

    The region is drawn from Table 7 and the birth country uniformly among that region's countries;
    the user is taken to live where they were born. Records carry no `user_id` (the caller names users).
    """
    if n < 0:
        raise DemographicsError(f"cannot sample a negative number of users ({n})")
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    table = variables()
    members = region_members()
    out = []
    for _ in range(n):
        record = {}
        for field, var in table.items():
            choice = rng.choices(var.categories, weights=list(var.counts.values()))[0]
            if field == "region":
                country = rng.choice(members[choice])
                record["birth_country"] = country
                record["reside_country"] = country
            else:
                record[field] = to_stored(field, choice)
        out.append({field: record[field] for field in FIELDS})
    return out


def validate_demographics(record: Mapping[str, Any], where: str = "record") -> dict[str, str]:
    """Check one record has every field with a known category; return it with string values.

    Categories are those of Tables 6-7 (in stored or printed form) and countries those of regions.json.
    """
    missing = [f for f in FIELDS if f not in record or record[f] in (None, "")]
    if missing:
        raise DemographicsError(f"{where}: missing demographic field(s) {missing}")
    table = variables()
    clean: dict[str, str] = {}
    for field in FIELDS:
        value = record[field]
        if not isinstance(value, str):
            raise DemographicsError(f"{where}: field {field!r} must be a string, got {value!r}")
        if field in table and to_category(field, value) not in table[field].counts:
            raise DemographicsError(
                f"{where}: {field}={value!r} is not one of {list(table[field].categories)}"
            )
        if field.endswith("_country"):
            region_of(value)
        clean[field] = value
    if "user_id" in record:
        clean = {"user_id": str(record["user_id"]), **clean}
    return clean


def _flatten_prism(row: Mapping[str, Any]) -> dict[str, Any]:
    """Accept the PRISM survey's nesting: `location.*_country` and `{ethnicity,religion}.simplified`."""
    flat = dict(row)
    location = flat.pop("location", None)
    if isinstance(location, Mapping):
        for key in ("birth_country", "reside_country"):
            flat.setdefault(key, location.get(key))
    for key in ("ethnicity", "religion"):
        if isinstance(flat.get(key), Mapping):
            flat[key] = flat[key].get("simplified")
    return flat


def read_demographics(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Demographic records from a CSV or JSONL file with the kit's field names; PRISM-style nesting
    (`location.birth_country`, `ethnicity.simplified`, ...) is flattened first. Every row is
    validated against the Tables 6-7 categories; the error names the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DemographicsError(f"demographics file not found: {path}")
    rows: Iterable[tuple[int, Mapping[str, Any]]]
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(enumerate(csv.DictReader(fh), start=2))
    elif path.suffix.lower() in (".jsonl", ".json"):
        parsed = []
        for lineno, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DemographicsError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise DemographicsError(f"{path}:{lineno}: expected a JSON object per line")
            parsed.append((lineno, row))
        rows = parsed
    else:
        raise DemographicsError(f"{path}: expected a .csv or .jsonl file")
    records = [validate_demographics(_flatten_prism(row), f"{path}:{lineno}") for lineno, row in rows]
    if not records:
        raise DemographicsError(f"{path}: no demographic records")
    return records
