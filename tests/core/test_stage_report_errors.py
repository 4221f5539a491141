"""A rerun that leaves stored errors alone says so (issue 21, item 6): how many of the items already
stored are errors, and how to retry them; it does not call that "complete"."""

from __future__ import annotations

from pathlib import Path

from support.scripted_models import Overloaded
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.llm.client import LLMClient
from personalens_utils.simulation import SimulationConfig, run_simulation


def test_a_rerun_that_keeps_errored_dialogues_says_how_many_and_how_to_retry_them(tmp_path: Path) -> None:
    bench = tiny_benchmark(n_users=2)
    with LLMClient(Overloaded(), progress=False, max_retries=0) as client:
        first = run_simulation(bench, tmp_path, client)
    assert first.errors == first.stored > 0
    assert "complete" not in first.message() and "every one of the" in first.message()
    assert "retry_errors=True" in first.message() and "RetriesExhaustedError" in first.message()

    with LLMClient("offline", progress=False) as client:
        again = run_simulation(bench, tmp_path, client)
    message = again.message()
    assert "complete" not in message, message
    assert f"{first.errors} items already stored is an error" in message, message
    assert "retry_errors=True" in message
    assert "retry_errors=True" in again._repr_html_() and str(first.errors) in again._repr_html_()

    with LLMClient("offline", progress=False) as client:
        retried = run_simulation(bench, tmp_path, client, SimulationConfig(retry_errors=True))
    assert retried.retried == first.errors and retried.errors == 0
    assert retried.message().startswith("simulation complete")
