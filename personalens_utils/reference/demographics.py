"""Demographic reference tables: the fields of a profile, the paper's distributions and the regions.

The distributions are the marginal counts of the paper's Tables 6 and 7 (the 1,500 PRISM survey
participants), read from demographics.json beside this module; regions.json maps countries to the
Table 7 regions. Generation samples from them, validation compares against them and the offline
backend reads regions, so they sit below every stage.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from personalens_utils.base.errors import KitError

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


class DemographicsError(KitError, ValueError):
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
    return json.loads(resources.files("personalens_utils.reference").joinpath(name).read_text("utf-8"))


@cache
def variables() -> dict[str, Variable]:
    """The variables of Tables 6 and 7 keyed by profile field (`region` is derived from birth country)."""
    raw = _resource("demographics.json")
    return {
        v["field"]: Variable(table=v["table"], name=v["name"], field=v["field"], counts=dict(v["counts"]))
        for v in raw["variables"]
    }


def reading_order(field: str, categories: Iterable[str]) -> list[str]:
    """Categories in the order a reader scans them, in tables and figures alike: age groups from the
    youngest up (they are ranges; the paper lists them by count), any other variable's as given."""
    listed = list(categories)
    if field != "age":
        return listed
    return sorted(listed, key=lambda c: int(m.group()) if (m := re.search(r"\d+", c)) else 10**6)


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
            f"country {country!r} is not in personalens_utils/reference/regions.json; add it to a region"
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
