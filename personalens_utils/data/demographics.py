"""Users' demographic records: sampled from the paper's marginals or read from a survey file.

Users are sampled from the Tables 6-7 marginals (personalens_utils.reference.demographics)
independently, so a generated benchmark matches the paper's breakdown per variable, not the joint
structure of the real survey; give a survey file to `read_demographics` when the joint structure matters.
"""

from __future__ import annotations

import csv
import json
import os
import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from personalens_utils.reference.demographics import (
    FIELDS,
    DemographicsError,
    region_members,
    region_of,
    to_category,
    to_stored,
    variables,
)


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
