"""Benchmark validation measures (paper §2.4, Appendix A.1): Tables 1, 6-9 and Shannon evenness.

Every function takes plain records (demographic dicts, affinity dicts, task domain lists), so the
same code runs on the official data, a generated benchmark or a hand-made test input.

How Tables 8-9 were computed was worked out against the printed numbers (all 90 rows reproduce):
a multi-valued answer contributes each of its values; values are compared as exact strings; every
user counts, whether or not the domain is in their interest mask; evenness uses n = the number of
distinct values generated (not the number of options); and "# Gen." of a categorical type is
capped at "# Poss." (values outside the option list raise the distinct count but not the printed
one). The uncapped count and the number of off-list values are reported beside it.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from personalens_utils.base.errors import KitError
from personalens_utils.reference import demographics as demo
from personalens_utils.reference.schema import Schema, load_schema

PAPER_DOMAIN_SPLIT = "Media"
"""Tables 8 and 9 split the alphabetical domain list after this domain."""

TABLE_6_7_COLUMNS = ["Variable", "Category", "Count", "Percent"]
TABLE_8_9_COLUMNS = ["Domain", "Preference Type", "Is Categorical", "# Poss.", "# Gen.", "Evenness"]


class ValidationInputError(KitError, ValueError):
    """Validation input that cannot be tabulated (unknown domain, malformed answer, ...)."""


def shannon_evenness(counts: Mapping[Any, int] | Iterable[int], n: int | None = None) -> float:
    """Pielou's evenness E = H / log n of a count distribution (natural log; the base cancels).

    `n` defaults to the number of categories observed (positive counts). E is 1 for a uniform
    distribution and 0 when one value takes everything; with fewer than two categories it is
    undefined and NaN is returned rather than a made-up 0 or 1.
    """
    values = list(counts.values()) if isinstance(counts, Mapping) else list(counts)
    if any(c < 0 for c in values):
        raise ValidationInputError(f"counts must be non-negative, got {values}")
    positive = [c for c in values if c > 0]
    if not positive:
        raise ValidationInputError("evenness of an empty distribution")
    k = len(positive) if n is None else n
    if k < len(positive):
        raise ValidationInputError(f"n={k} is smaller than the {len(positive)} observed categories")
    if k < 2:
        return math.nan
    total = sum(positive)
    entropy = -math.fsum(c / total * math.log(c / total) for c in positive)  # exact: order-free
    return entropy / math.log(k)


# --- Tables 6 and 7: demographics --------------------------------------------------------------


def demographics_table(records: Iterable[Mapping[str, str]], table: int) -> pd.DataFrame:
    """Counts and percentages per category for the variables of Table 6 or 7.

    Categories come in the paper's order, age groups from the youngest up as Figure 3 draws them
    (`reading_order`); a value the paper does not list is appended after them (so a generated
    benchmark with an unexpected answer still shows it). The region of Table 7 is
    derived from the birth country, which is how the printed counts come out.
    """
    variables = [v for v in demo.variables().values() if v.table == table]
    if not variables:
        raise ValidationInputError(f"no demographic variables for table {table}; expected 6 or 7")
    rows_in = list(records)
    if not rows_in:
        raise ValidationInputError("no demographic records to tabulate")
    rows = []
    for var in variables:
        counts: Counter[str] = Counter()
        for i, rec in enumerate(rows_in):
            if var.field == "region":
                counts[demo.region_of(_field(rec, "birth_country", i))] += 1
            else:
                counts[demo.to_category(var.field, _field(rec, var.field, i))] += 1
        listed = [c for c in var.categories if counts[c]] + sorted(set(counts) - set(var.categories))
        ordered = demo.reading_order(var.field, listed)
        for category in ordered:
            rows.append([var.name, category, counts[category], 100.0 * counts[category] / len(rows_in)])
    return pd.DataFrame(rows, columns=TABLE_6_7_COLUMNS)


def _field(record: Mapping[str, str], field: str, index: int) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value:
        who = record.get("user_id", "?")
        raise ValidationInputError(f"demographic record #{index} ({who}) has no {field!r}")
    return value


# --- Tables 8 and 9: preference distributions --------------------------------------------------


def preference_values(answer: Any, where: str) -> list[str]:
    """The values one answer contributes: a string is one value, a list gives each of its items."""
    if isinstance(answer, str):
        return [answer]
    if isinstance(answer, list) and all(isinstance(v, str) for v in answer):
        return list(answer)
    raise ValidationInputError(f"{where}: expected a string or a list of strings, got {answer!r}")


def preference_counts(
    affinities: Iterable[Mapping[str, Mapping[str, Any]]], schema: Schema | None = None
) -> dict[tuple[str, str], Counter[str]]:
    """Value counts per (domain, preference type) over users' affinity dicts ({domain: {type: answer}})."""
    schema = schema or load_schema()
    counts: dict[tuple[str, str], Counter[str]] = {
        (d.name, p.name): Counter() for d in schema.domains for p in d.preferences
    }
    for i, user in enumerate(affinities):
        for domain, answers in user.items():
            if not schema.has_domain(domain):
                raise ValidationInputError(f"user #{i}: unknown domain {domain!r} in affinities")
            for name, answer in answers.items():
                key = (domain, name)
                if key not in counts:
                    raise ValidationInputError(
                        f"user #{i}: domain {domain!r} has no preference type {name!r}"
                    )
                counts[key].update(preference_values(answer, f"user #{i} {domain}/{name}"))
    return counts


def preference_table(
    affinities: Iterable[Mapping[str, Mapping[str, Any]]], schema: Schema | None = None
) -> pd.DataFrame:
    """One row per domain and preference type: the columns of Tables 8-9 plus two honest extras.

    `# Distinct` is the uncapped number of distinct values and `# Off-list` how many of them are not
    among a categorical type's options (both are what the printed `# Gen.` hides).
    """
    schema = schema or load_schema()
    counts = preference_counts(affinities, schema)
    rows = []
    for domain in schema.domains:
        for pref in domain.preferences:
            c = counts[(domain.name, pref.name)]
            distinct = len(c)
            possible = len(pref.options) if pref.categorical else None
            off_list = len(set(c) - set(pref.options)) if pref.categorical else None
            generated = min(distinct, possible) if possible is not None else distinct
            evenness = shannon_evenness(c) if distinct else math.nan
            rows.append(
                [domain.name, pref.name, pref.categorical, possible, generated, evenness, distinct, off_list]
            )
    df = pd.DataFrame(rows, columns=[*TABLE_8_9_COLUMNS, "# Distinct", "# Off-list"])
    for col in ("# Poss.", "# Off-list"):
        df[col] = df[col].astype("Int64")
    return df


def split_tables_8_9(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The paper's two halves: domains up to Media (Table 8) and from Messaging on (Table 9)."""
    first = df["Domain"] <= PAPER_DOMAIN_SPLIT
    return df[first].reset_index(drop=True), df[~first].reset_index(drop=True)


# --- Table 1: tasks and dialogues per domain -------------------------------------------------


def task_table(
    task_domains: Iterable[tuple[str, Sequence[str]]],
    scenario_domains: Iterable[tuple[str, Sequence[str]]],
    schema: Schema | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 1 from (task_type, domains) pairs: one per task definition, one per user x task scenario.

    A multi-domain task counts toward each of its domains. Returns the per-domain table and a
    totals table (tasks and dialogues for SD, MD and both).
    """
    schema = schema or load_schema()
    tasks = _count_by_domain(task_domains, schema, "task")
    dials = _count_by_domain(scenario_domains, schema, "scenario")
    per_domain = pd.DataFrame(
        [
            [d, tasks["SD"][d], tasks["MD"][d], tasks["SD"][d] + tasks["MD"][d],
             dials["SD"][d], dials["MD"][d], dials["SD"][d] + dials["MD"][d]]
            for d in schema.domain_names
        ],
        columns=["Domain", "# Tasks SD", "# Tasks MD", "# Tasks", "# Dial SD", "# Dial MD", "# Dial"],
    )
    totals = pd.DataFrame(
        [
            ["SD", tasks["n_SD"], dials["n_SD"]],
            ["MD", tasks["n_MD"], dials["n_MD"]],
            ["All", tasks["n_SD"] + tasks["n_MD"], dials["n_SD"] + dials["n_MD"]],
        ],
        columns=["Task type", "# Tasks", "# Dial"],
    )
    return per_domain, totals


def _count_by_domain(
    items: Iterable[tuple[str, Sequence[str]]], schema: Schema, what: str
) -> dict[str, Any]:
    out: dict[str, Any] = {"SD": Counter(), "MD": Counter(), "n_SD": 0, "n_MD": 0}
    for i, (task_type, domains) in enumerate(items):
        if task_type not in ("SD", "MD"):
            raise ValidationInputError(f"{what} #{i}: task type {task_type!r} is neither 'SD' nor 'MD'")
        unknown = [d for d in domains if not schema.has_domain(d)]
        if unknown or not domains:
            raise ValidationInputError(f"{what} #{i}: unknown or missing domains {list(domains)}")
        out[f"n_{task_type}"] += 1
        out[task_type].update(set(domains))
    return out


# --- the paper's printed values and the comparison with them -----------------------------------


@cache
def _paper() -> dict[str, Any]:
    text = resources.files("personalens_utils.resources").joinpath("paper_tables.json").read_text("utf-8")
    return json.loads(text)


def paper_table(number: int) -> pd.DataFrame:
    """A table as the paper prints it (Tables 1, 6, 7, 8, 9, 10)."""
    key = f"table{number}"
    if key not in _paper():
        raise ValidationInputError(f"no printed values stored for table {number}")
    spec = _paper()[key]
    df = pd.DataFrame(spec["rows"], columns=spec["columns"])
    if "# Poss." in df:
        df["# Poss."] = df["# Poss."].astype("Int64")
    return df


def paper_table1_totals() -> dict[str, int]:
    return dict(_paper()["table1"]["totals"])


def printed_form(df: pd.DataFrame) -> pd.DataFrame:
    """Round measured columns the way the paper prints them (percent 1 decimal, evenness 2)."""
    out = df.copy()
    if "Percent" in out:
        out["Percent"] = out["Percent"].map(lambda v: round(v + 1e-9, 1))
    if "Evenness" in out:
        out["Evenness"] = out["Evenness"].map(lambda v: v if math.isnan(v) else round(v + 1e-12, 2))
    return out


def compare_with_paper(
    measured: pd.DataFrame, printed: pd.DataFrame, keys: Sequence[str], columns: Sequence[str]
) -> pd.DataFrame:
    """Cell-by-cell comparison after rounding to the printed precision.

    Returns one row per compared cell with the measured and printed values and whether they match;
    a row present on only one side shows up with the other side empty (and `match` False).
    """
    left = printed_form(measured)[[*keys, *columns]]
    merged = left.merge(printed[[*keys, *columns]], on=list(keys), how="outer",
                        suffixes=(" (data)", " (paper)"), indicator=True)
    rows = []
    for _, r in merged.iterrows():
        for col in columns:
            ours, theirs = r[f"{col} (data)"], r[f"{col} (paper)"]
            same = r["_merge"] == "both" and _same(ours, theirs)
            rows.append([*(r[k] for k in keys), col, ours, theirs, same])
    return pd.DataFrame(rows, columns=[*keys, "Column", "Data", "Paper", "match"])


def _same(a: Any, b: Any) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    if pd.isna(a) or pd.isna(b):
        return False
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), abs_tol=1e-9)
    return bool(a == b)


PAPER_CELLS: dict[int, tuple[list[str], list[str]]] = {
    1: (["Domain"], ["# Tasks", "# Dial"]),
    6: (["Variable", "Category"], ["Count", "Percent"]),
    7: (["Variable", "Category"], ["Count", "Percent"]),
    8: (["Domain", "Preference Type"], ["Is Categorical", "# Poss.", "# Gen.", "Evenness"]),
    9: (["Domain", "Preference Type"], ["Is Categorical", "# Poss.", "# Gen.", "Evenness"]),
}
"""Per printed table: the key columns that identify a row and the value columns compared."""


def compare_table(number: int, measured: pd.DataFrame) -> pd.DataFrame:
    """Every printed cell of Table `number` beside the value measured on the data (see compare_with_paper)."""
    keys, columns = PAPER_CELLS[number]
    return compare_with_paper(measured, paper_table(number), keys, columns)


def compare_table1_totals(totals: pd.DataFrame) -> pd.DataFrame:
    """Table 1's totals (86 SD + 25 MD tasks; 98,115 + 24,018 dialogues) beside the measured ones."""
    printed = paper_table1_totals()
    names = {
        ("SD", "# Tasks"): "SD tasks", ("MD", "# Tasks"): "MD tasks", ("All", "# Tasks"): "tasks",
        ("SD", "# Dial"): "SD dialogues", ("MD", "# Dial"): "MD dialogues",
        ("All", "# Dial"): "all_dialogues",
    }
    by_type = totals.set_index("Task type")
    rows = [
        [kind, col, int(by_type.loc[kind, col]), printed[key], int(by_type.loc[kind, col]) == printed[key]]
        for (kind, col), key in names.items()
    ]
    return pd.DataFrame(rows, columns=["Task type", "Column", "Data", "Paper", "match"])


def side_by_side(comparison: pd.DataFrame) -> pd.DataFrame:
    """A cell comparison laid out wide: per row, each column's data and paper values and a flag column
    listing the columns that differ."""
    keys = [c for c in comparison.columns if c not in ("Column", "Data", "Paper", "match")]
    columns = list(dict.fromkeys(comparison["Column"]))
    rows = []
    for key, group in comparison.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key, strict=True))
        for _, cell in group.iterrows():
            row[f"{cell['Column']} (data)"] = cell["Data"]
            row[f"{cell['Column']} (paper)"] = cell["Paper"]
        row["differs"] = ", ".join(c for c in columns if not group.loc[group["Column"] == c, "match"].all())
        rows.append(row)
    return pd.DataFrame(rows)


def comparison_summary(comparisons: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One line per compared table: cells compared, cells matching, and the differing cells by name."""
    rows = []
    for name, cmp in comparisons.items():
        keys = [c for c in cmp.columns if c not in ("Column", "Data", "Paper", "match")]
        differing = cmp[~cmp["match"]]
        labels = [" / ".join(str(r[k]) for k in keys) + f": {r['Column']}" for _, r in differing.iterrows()]
        rows.append([name, len(cmp), int(cmp["match"].sum()), "; ".join(labels)])
    return pd.DataFrame(rows, columns=["Table", "Cells", "Matching", "Differing cells"])


# --- a loaded benchmark (personalens_utils.data.Benchmark) -> the tables -------------------------


def benchmark_table1(benchmark: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 1 of a benchmark: task definitions for # Tasks, its user x task scenarios for # Dial."""
    definitions = [(t.task_type, t.domains) for t in benchmark.tasks.values()]
    scenarios = zip(benchmark.scenarios["task_type"], benchmark.scenarios["domains"], strict=True)
    return task_table(definitions, scenarios)


def benchmark_demographics(benchmark: Any) -> pd.DataFrame:
    """Tables 6 and 7 of a benchmark's users, stacked, with a `Table` column."""
    records = [u.demographics for u in benchmark.users.values()]
    parts = [demographics_table(records, n).assign(Table=n) for n in (6, 7)]
    return pd.concat(parts, ignore_index=True)


def benchmark_preferences(benchmark: Any, schema: Schema | None = None) -> pd.DataFrame:
    """Tables 8-9 (stacked) over every user's preferences, masked domains included as the paper did."""
    return preference_table((u.preferences for u in benchmark.users.values()), schema)


def benchmark_source(root: str | os.PathLike[str]) -> tuple[str, bool]:
    """How captions name a benchmark folder, and whether the kit generated it.

    A folder written by notebook 01 holds the generation manifest; its label (the offline-backend
    label for offline text) goes into every caption. Any other folder is taken as given data.
    """
    from personalens_utils.generation.runner import MANIFEST

    manifest = Path(root) / MANIFEST
    if not manifest.is_file():
        return f"benchmark data at {Path(root).name}/ (not generated by the kit)", False
    info = json.loads(manifest.read_text("utf-8"))
    label = info.get("label") or f"generated with backend {info.get('backend')!r}"
    return f"generated benchmark ({label})", True
