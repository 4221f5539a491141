"""Notebook 01's setup in one call: the session on the notebook's parameters, and what to generate."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from personalens_utils.base import paths
from personalens_utils.generation.runner import GenerationConfig, GenerationResult, generate_benchmark
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import list_param


@dataclass(frozen=True)
class GenerationRun:
    """Notebook 01's stage on a kit `Session`: what to generate, read from the notebook's parameters, and
    where the benchmark and its step results go."""

    config: GenerationConfig
    generated_dir: str | os.PathLike[str] | None
    run_dir: str | os.PathLike[str] | None

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, GenerationRun]:
        """Notebook 01's setup cell in one call on its parameters (`globals()`): the session writes no
        run store of its own and checks the benchmark's folder writable before the first call."""
        generated, run_dir = parameters["generated_dir"], parameters["run_dir"]
        target = generated or paths.generated_benchmark_dir()
        session = Session.from_parameters(parameters, benchmark_dir=target, output_dir=target, users="all",
                                          run_dir=run_dir, stage="generation", default_run_store=False)
        domains = list_param("domains", parameters["domains"])
        config = GenerationConfig(
            n_users=parameters["n_users"], seed=parameters["demographics_seed"],
            demographics_file=parameters["demographics_file"],
            sd_tasks_per_domain=parameters["sd_tasks_per_domain"], md_tasks=parameters["md_tasks"],
            domains=tuple(domains) if domains else None, model=parameters["model"],
            temperature=parameters["temperature"])
        return session, cls(config, generated, run_dir)

    def generate(self, session: Session) -> GenerationResult:
        """The benchmark generated (or finished) on the session's client."""
        return generate_benchmark(self.config, client=session.client, output_dir=self.generated_dir,
                                  run_dir=self.run_dir)
