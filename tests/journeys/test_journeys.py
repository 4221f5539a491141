"""The journeys of issue 39, tested as people run them (support.journeys): on a clone of the committed
HEAD with the official data as `PERSONALENS_DATA` and the default sizes, (a) `make reproduce` finishes
both passes and its INDEX.md lists every paper table, (b) `make evaluate` adds an assistant from a file
outside the checkout, (c) `make reproduce` again on the same run succeeds and (d) every notebook 02-09
then runs on its defaults. Each step is a process of its own; a failure names the step and its log's
last error line."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.journeys import (
    CHECKOUT,
    NOT_IN_PASS,
    NOTEBOOKS,
    RUN,
    SNAPSHOT,
    Step,
    index_sections,
    load_steps,
    summary_counts,
)

from personalens_utils.reproduce.index import PAPER_ITEMS

pytestmark = [pytest.mark.slow, pytest.mark.official, pytest.mark.journeys,
              pytest.mark.timeout(600, func_only=True)]  # the steps (fixtures) have timeouts of their own
PASSES = ("generated", "official")


def _every_notebook_ok(step: Step) -> None:
    assert step.returncode == 0, step.failure()
    counts = summary_counts(Path(step.log).read_text(encoding="utf-8"))
    assert counts is not None and counts[0] == counts[1], f"{step.failure()} (summary: {counts})"


def test_a_make_reproduce_on_the_official_data_finishes_both_passes_and_indexes_every_paper_table(journey):
    _every_notebook_ok(load_steps(journey)["reproduce"])
    index = journey / SNAPSHOT / "runs" / RUN / "INDEX.md"
    sections = index_sections(index.read_text(encoding="utf-8"))
    assert sorted(sections) == sorted(PASSES), f"{index}: passes {sorted(sections)}"
    for name, items in sections.items():
        unlisted = [item.name for item in PAPER_ITEMS if item.name not in items]
        assert unlisted == [], f"{index}, pass {name}: paper items not listed at all"
        failed = {item: why for item, why in items.items() if why != "reproduced" and NOT_IN_PASS not in why}
        assert failed == {}, f"{index}, pass {name}: paper items not reproduced"
    reproduced = {item for items in sections.values() for item, why in items.items() if why == "reproduced"}
    assert [item.name for item in PAPER_ITEMS if item.name not in reproduced] == [], \
        f"{index}: paper items no pass reproduced"


def test_b_make_evaluate_adds_an_assistant_from_a_file_outside_the_checkout(journey, journey_after):
    step = load_steps(journey_after)["evaluate"]
    assert step.returncode == 0, step.failure()
    indexes = list((journey / CHECKOUT / "runs" / RUN).glob("*/evaluations/Echoing/INDEX.md"))
    assert indexes, f"{step.failure()} (no evaluations/Echoing/INDEX.md under runs/{RUN})"
    assert "FAILED" not in indexes[0].read_text(encoding="utf-8"), f"{indexes[0]} lists a failed notebook"


def test_c_make_reproduce_again_on_the_same_run_finishes(journey_after):
    _every_notebook_ok(load_steps(journey_after)["reproduce-again"])


@pytest.mark.parametrize("number", NOTEBOOKS)
def test_d_each_notebook_then_runs_on_its_defaults(journey_after, number):
    step = load_steps(journey_after)[f"defaults-{number}"]
    assert step.returncode == 0, step.failure()
