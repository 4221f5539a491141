"""Notebook 02's setup in one call: the session on the notebook's parameters and the benchmark it
describes, named as the captions name it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from personalens_utils.data import Benchmark
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session
from personalens_utils.validation.tables import benchmark_label


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
