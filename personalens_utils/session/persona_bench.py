"""What notebook 08 calls: open a PERSONA Bench run (data, store, client), ask the items, evaluate,
export. Kept here so the notebook stays a parameters cell, a few calls and displays.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from personalens_utils.base.paths import runs_dir
from personalens_utils.llm import LLMClient
from personalens_utils.llm.role import Role
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.plots import FigureResult
from personalens_utils.outputs.tables import TableResult
from personalens_utils.persona_bench import metrics as M
from personalens_utils.persona_bench import report as persona_report
from personalens_utils.persona_bench.data import find_dataset
from personalens_utils.persona_bench.items import KIT, SETTINGS, TASKS, PersonaItem, dataset_id, iter_items
from personalens_utils.persona_bench.official import OFFICIAL, make_official_prompts, read_official_items
from personalens_utils.persona_bench.runner import run_items
from personalens_utils.persona_bench.synthetic import SYNTHETIC_LABEL, write_synthetic
from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS
from personalens_utils.runstore.engine import StageReport
from personalens_utils.runstore.identity import variant_named
from personalens_utils.runstore.shards import Shard
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session

ROLE = "PERSONA Bench model"
NOTEBOOK = "08_persona_bench"
TABLE_P1 = OutputId("table", "P1", "persona", NOTEBOOK, "PERSONA Bench results",
                    "PERSONA Bench: task x metric, P-Conv | P-NonConv (the authors' layout)", "persona")
TABLE_P2 = OutputId("table", "P2", "persona", NOTEBOOK, "PERSONA Bench per domain",
                    "PERSONA Bench: headline metric per domain and setting", "persona")
TABLE_P3 = OutputId("table", "P3", "persona", NOTEBOOK, "PERSONA Bench gains",
                    "PERSONA Bench: paired gains of P-Conv with intervals over users", "persona")
TABLE_P4 = OutputId("table", "P4", "persona", NOTEBOOK, "PERSONA Bench coverage",
                    "PERSONA Bench: answers read of items asked", "persona")
FIGURE_P1 = OutputId("figure", "P1", "persona", NOTEBOOK, "PERSONA Bench radar plot",
                     "PERSONA Bench: one model's metrics, one polygon per setting", "persona")
TABLES = (TABLE_P1, TABLE_P2, TABLE_P3, TABLE_P4)
"""The tables of an evaluation, in the order `PersonaRun.evaluate` makes them (each file adds its name)."""
OUTPUTS = (*TABLES, FIGURE_P1)
"""Notebook 08's tables and its first radar figure, in the order INDEX.md lists them."""


def radar_id(number: int) -> OutputId:
    """Figure P<number>: the radar of the evaluation's `number`-th model (INDEX.md lists the first)."""
    return FIGURE_P1 if number == 1 else OutputId("figure", f"P{number}", "persona", NOTEBOOK)


@dataclass
class Evaluation:
    """The tables and figures of one evaluation, ready to show and export."""

    mode: str
    tables: dict[str, TableResult]
    figures: dict[str, FigureResult] = field(default_factory=dict)
    summary: pd.DataFrame | None = None

    def export(self, output_dir: str | os.PathLike[str]) -> list[Path]:
        """Every table (CSV, LaTeX, Markdown) and figure (PDF, PNG, caption) under `output_dir`; every
        file name contains `persona`."""
        written: list[Path] = []
        for output, (slug, table) in zip(TABLES, self.tables.items(), strict=True):
            written += table.save(output_dir, output, slug).values()
        for number, (slug, figure) in enumerate(self.figures.items(), 1):
            written += figure.save(output_dir, radar_id(number), slug).values()
        return written


def prepare_data(
    *,
    data_dir: str | os.PathLike[str] | None = None,
    synthetic_users: int | None = None,
    seed: int = 0,
    output_dir: str | os.PathLike[str] | None = None,
) -> tuple[Path, str]:
    """The dataset file and its label. `synthetic_users=n` writes n users of synthetic data into
    `data_dir` (default: the output folder, runs/persona_bench/ when None) and labels everything made
    from it; otherwise the authors' file is found by `find_dataset`."""
    if synthetic_users:
        data = write_synthetic(
            data_dir or output_dir or runs_dir() / "persona_bench", synthetic_users, seed=seed
        )
        return data, f"{SYNTHETIC_LABEL}, {synthetic_users} users, seed {seed}"
    data = find_dataset(data_dir)
    return data, f"{data.name} ({dataset_id(data).split(':')[1]})"


@dataclass
class PersonaRun:
    """One notebook's PERSONA Bench run on a kit `Session`: the dataset and its label, the session's run
    store, output folder and client, and the model asked."""

    default_output: ClassVar[str] = "persona_bench"

    data: Path
    data_label: str
    store: RunStore
    output_dir: Path
    client: LLMClient
    model: str

    @classmethod
    def of(cls, session: Session, data: Path, data_label: str, role: Role) -> PersonaRun:
        """The run of the session's `role` (the model asked, resolved when the session opened)."""
        return cls(data, data_label, session.run_store, session.output_dir, role.client, role.model)

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, PersonaRun]:
        """Notebook 08's setup cell in one call on its parameters (`globals()`): the data prepared, the
        session opened (its store beside the data unless `run_dir` is given; 08's `prompt_set` is PERSONA
        Bench's own, not the session's) and the run of `persona_model`."""
        data, label = prepare_data(data_dir=parameters["persona_data"], seed=parameters["seed"],
                                   synthetic_users=parameters["synthetic_users"],
                                   output_dir=parameters["output_dir"])
        session = Session.from_parameters(
            parameters, models=("persona_model",), not_session=("prompt_set",), benchmark_dir=data.parent,
            users="all", run_dir=parameters["run_dir"] or data.parent / "store",
            default_output=cls.default_output, stage="persona_bench")
        return session, cls.of(session, data, label, session.role("persona_model"))

    def items(
        self,
        *,
        prompt_set: str = KIT_PROMPTS,
        tasks: Sequence[str] = TASKS,
        settings: Sequence[str] = SETTINGS,
        users: int | None = None,
        official_code: str | os.PathLike[str] | None = None,
    ) -> Iterator[PersonaItem]:
        """The items of the run's dataset, with the prompts named: the kit's, or the official ones that
        the authors' prompt makers write from the user's copy of their code."""
        if variant_named(prompt_set, (KIT, OFFICIAL)).kit:
            return iter_items(self.data, tasks=tasks, settings=settings, users=users)
        prompt_dir = self.output_dir / "official_prompts"
        make_official_prompts(prompt_dir, code=official_code, data=self.data, tasks=tasks, settings=settings)
        return read_official_items(prompt_dir, data=self.data, tasks=tasks, settings=settings)

    def run(
        self,
        items: Iterator[PersonaItem],
        *,
        shard: str | Shard | None = None,
        limit: int | None = None,
        max_cost_usd: float | None = None,
        retry_errors: bool = True,
    ) -> StageReport:
        """Check the model answers (one minimal call; nothing is stored if it fails), then ask every item
        not yet answered in the store."""
        self.client.preflight({ROLE: self.model})
        return run_items(
            self.client,
            items,
            self.store,
            self.model,
            shard=shard,
            limit=limit,
            max_cost_usd=max_cost_usd,
            retry_errors=retry_errors,
        )

    def evaluate(
        self, *, mode: str = "authors", n_resamples: int = 200, seed: int = 0, sbert: bool = False
    ) -> Evaluation:
        """The results, per-domain, gains and coverage tables and a radar plot per model."""
        frame = persona_report.predictions(self.store)
        kept = M.scored(frame, mode, sbert=sbert)
        origin = self.store.root.name
        summary = M.summary(frame, mode, kept=kept, n_resamples=n_resamples, seed=seed)
        per_domain = M.summary(
            frame, mode, kept=kept, by=("model", "domain", "task", "setting"), n_resamples=0
        )
        gains = M.gains(frame, mode, kept=kept, n_resamples=n_resamples, seed=seed)
        label = self.data_label
        tables = {
            "results": persona_report.results_table(summary, frame, mode, data_label=label, origin=origin),
            "domains": persona_report.domain_table(per_domain, frame, mode, data_label=label, origin=origin),
            "gains": persona_report.gains_table(gains, frame, mode, data_label=label, origin=origin),
            "coverage": persona_report.coverage_table(frame, data_label=label, origin=origin),
        }
        figures = {
            f"radar_{_slug(m)}": persona_report.radar(summary, frame, m, data_label=label, origin=origin)
            for m in sorted(frame["model"].unique())
        }
        return Evaluation(mode, tables, figures, summary)


def _slug(model: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in model.lower()).strip("_")
