"""The validation tables of notebook 02 as `TableResult`s: Table 1, Tables 6-9, Table 10, the
comparison with the printed paper, and the profile-consistency summary.

The measures live in `metrics`, `lexical` and `consistency`; this module gives each table its
caption and source, worded once, so notebooks only call and show.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from personalens_utils.benchmark_validation import consistency, lexical, metrics
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.llm.role import Role
from personalens_utils.outputs.latex import Block, Printed
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.runstore.records import OFFLINE, ConsistencyCheck


def benchmark_label(benchmark: Any) -> tuple[str, bool]:
    """How captions name the benchmark, and whether the kit generated it (see `metrics.benchmark_source`)."""
    return metrics.benchmark_source(benchmark.root)


def benchmark_backends(benchmark: Any) -> list[str]:
    """The backend that generated a benchmark (from notebook 01's manifest); none for given data."""
    from personalens_utils.generation.runner import MANIFEST

    manifest = Path(benchmark.root) / MANIFEST
    if not manifest.is_file():
        return []
    backend = json.loads(manifest.read_text("utf-8")).get("backend")
    return [backend] if backend else []


def _source(benchmark: Any, n: int, unit: str) -> Source:
    return Source.of(f"benchmark {Path(benchmark.root).name}/", n, unit)


def table1(benchmark: Any) -> tuple[TableResult, TableResult]:
    """Table 1 (tasks and dialogues per domain) and its totals by task type."""
    label, _ = benchmark_label(benchmark)
    per_domain, totals = metrics.benchmark_table1(benchmark)
    source = _source(benchmark, len(benchmark.scenarios), "user x task scenarios")
    return (
        TableResult(
            per_domain,
            "Tasks and dialogues per domain (SD, MD, both); a multi-domain task counts toward each of its "
            f"domains. Source: {label}.",
            source,
        ),
        TableResult(totals, f"Tasks and dialogues by task type. Source: {label}.", source),
    )


def tables6_7(benchmark: Any) -> tuple[pd.DataFrame, dict[int, TableResult]]:
    """The stacked demographics frame (Figure 3 draws it) and Tables 6 and 7 cut from it."""
    label, _ = benchmark_label(benchmark)
    demographics = metrics.benchmark_demographics(benchmark)
    source = _source(benchmark, len(benchmark.users), "users")
    tables = {}
    for number, part in ((6, 1), (7, 2)):
        table = demographics[demographics["Table"] == number].drop(columns="Table").reset_index(drop=True)
        caption = f"Demographic breakdown, part {part}: counts and percentages of users. Source: {label}."
        tables[number] = TableResult(table, caption, source, precision=1)
    return demographics, tables


def tables8_9(benchmark: Any) -> dict[int, TableResult]:
    """Tables 8 and 9: preference characteristics and evenness per domain and preference type."""
    label, _ = benchmark_label(benchmark)
    source = _source(benchmark, len(benchmark.users), "users")
    caption = (
        "User preference characteristics per domain: categorical or not, # possible values, # generated "
        "values (capped at # possible, as printed in the paper), Shannon evenness E = H / log n over the "
        "n distinct generated values; # Distinct and # Off-list show what the cap hides. "
        f"Source: {label}."
    )
    halves = metrics.split_tables_8_9(metrics.benchmark_preferences(benchmark))
    return {number: TableResult(table, caption, source) for number, table in zip((8, 9), halves, strict=True)}


def paper_comparison(benchmark: Any, comparisons: Mapping[str, pd.DataFrame]) -> TableResult:
    """How many printed cells of Tables 1 and 6-9 the data reproduces, table by table."""
    label, _ = benchmark_label(benchmark)
    summary = metrics.comparison_summary(comparisons)
    caption = f"Cells of Tables 1 and 6-9 measured on the data vs. printed in the paper. Source: {label}."
    counts = [_differing_by_column(cmp) for cmp in comparisons.values()]
    return TableResult(summary, caption, _source(benchmark, int(summary["Cells"].sum()), "cells compared"),
                       printed=lambda shown: _printed_comparison(shown, counts))


DIFFERING_BY_COLUMN = "Differing cells by column"


def _differing_by_column(comparison: pd.DataFrame) -> str:
    """How many cells of each compared column differ, as "# Dial: 21; # Tasks: 1" (blank when none)."""
    differing = comparison.loc[~comparison["match"], "Column"].value_counts(sort=False)
    return "; ".join(f"{column}: {n}" for column, n in differing.items())


def _printed_comparison(shown: pd.DataFrame, counts: Sequence[str]) -> Printed:
    """Table S1 for a paper: on a sample of users nearly every cell differs, and naming each one in a
    cell prints lines thousands of points wide, so the paper counts them per column; the CSV and the
    Markdown still name every cell."""
    frame = shown.drop(columns="Differing cells").assign(**{DIFFERING_BY_COLUMN: list(counts)})
    legend = f"{DIFFERING_BY_COLUMN}: how many cells of each column differ; the CSV names each one."
    return Printed((Block(frame),), legend)


def table10(
    run_dir: str | os.PathLike[str],
    task_types: Sequence[str] = ("SD", "MD"),
    *,
    self_bleu_sample: int = lexical.SELF_BLEU_SAMPLE,
    seed: int = 0,
    assistant_models: Sequence[str] | None = None,
) -> TableResult:
    """Table 10: lexical diversity of the dialogues of a run store (Self-BLEU over a seeded sample), of
    `assistant_models` only when given (a reproduction's own assistants, not its ablation's)."""
    table, used = lexical.run_store_lexical_diversity(
        run_dir, task_types, self_bleu_sample=self_bleu_sample, seed=seed, assistant_models=assistant_models
    )
    made_by = f"Made with the {OFFLINE_LABEL}" if "offline" in used else (
        f"Dialogues from backend(s) {', '.join(sorted(used))}")
    caption = (
        "Lexical diversity: Dist-1/2 and Ent-4 per dialogue, averaged; Self-BLEU of sampled utterances "
        f"against the rest of the sample (lower is more diverse). {made_by}."
    )
    n_dialogues = int(table["# Dial"].sum())
    source = Source.of(f"run store {Path(run_dir).name}/", n_dialogues, "stored dialogues", used)
    return TableResult(table, caption, source, precision=3)


def checker_label(checker: Role) -> str:
    """How captions name the consistency checker: the offline rules, or the model and its backend."""
    return OFFLINE_LABEL if checker.backend == OFFLINE else f"{checker.model} on {checker.backend}"


def consistency_table(records: Iterable[ConsistencyCheck], benchmark: Any, *, checker: Role) -> TableResult:
    """The profile-consistency summary (Appendix A.4): profiles flagged by the checker, with rates."""
    label, _ = benchmark_label(benchmark)
    rows = list(records)
    flagged = consistency.flagged_summary(rows)
    caption = (f"Profiles flagged by the consistency checker ({checker_label(checker)}); rates over answers "
               f"read. Source: {label}.")
    source = _source(benchmark, len(rows), "profiles checked")
    source = Source.of(source.origin, source.n, source.unit, [checker.backend], [checker.model])
    return TableResult(flagged, caption, source, precision=3)
