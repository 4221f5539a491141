"""Notebook 02's setup in one call: the session on the notebook's parameters and the benchmark it
describes, named as the captions name it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from personalens_utils.benchmark_validation.tables import benchmark_label
from personalens_utils.data import Benchmark
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session

NOTEBOOK = "02_validation"
TABLE1 = OutputId("table", 1, notebook=NOTEBOOK, name="Table 1", what="tasks and dialogues per domain",
                  models="none")
TABLE6 = OutputId("table", 6, notebook=NOTEBOOK, name="Table 6", what="demographics, part 1", models="none")
TABLE7 = OutputId("table", 7, notebook=NOTEBOOK, name="Table 7", what="demographics, part 2", models="none")
TABLE8 = OutputId("table", 8, notebook=NOTEBOOK, name="Table 8", what="preference types, part 1",
                  models="none")
TABLE9 = OutputId("table", 9, notebook=NOTEBOOK, name="Table 9", what="preference types, part 2",
                  models="none")
TABLE10 = OutputId("table", 10, notebook=NOTEBOOK, name="Table 10", what="lexical diversity of dialogues",
                   models="simulated")
FIGURE3 = OutputId("figure", 3, notebook=NOTEBOOK, name="Figure 3", what="demographic distribution",
                   models="none")
TABLE_S1 = OutputId("table", "S1", "paper_comparison", NOTEBOOK)
TABLE_A4 = OutputId("table", "A4", "profile_consistency", NOTEBOOK)
OUTPUTS = (TABLE1, TABLE6, TABLE7, TABLE8, TABLE9, TABLE10, FIGURE3, TABLE_S1, TABLE_A4)
"""Notebook 02's tables and figures (its paper tables' files add a part: `table1_totals`)."""


@dataclass(frozen=True)
class ValidationRun:
    """What notebook 02 describes: every user of the benchmark (Tables 1 and 6-9), how its captions name
    it (`source`), whether its tables are set beside the paper's (`compare`), and the run store whose
    dialogues Table 10 reads (None: the notebook was given no `run_dir`)."""

    default_output: ClassVar[str] = "validation"

    out: Path
    benchmark: Benchmark
    source: str
    compare: bool
    task_types: list[str]
    run_store: RunStore | None

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, ValidationRun]:
        """The session (no run store unless `run_dir` is given) and the benchmark; `compare_with_paper`
        None compares when the kit did not generate the data."""
        session = Session.from_parameters(parameters, default_output=cls.default_output, stage="validation",
                                          default_run_store=False, models=("consistency_model",))
        benchmark = session.load_benchmark(None)  # Tables 1 and 6-9 describe every user of the benchmark
        source, generated = benchmark_label(benchmark)
        given = parameters["compare_with_paper"]
        compare = (not generated) if given is None else bool(given)
        print(benchmark)
        print("Source:", source, "| compared with the paper:", compare)
        run_store = session.run_store if session.places.has_run_store else None
        return session, cls(session.output_dir, benchmark, source, compare, list(session.task_types),
                            run_store)
