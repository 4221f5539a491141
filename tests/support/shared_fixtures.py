"""Fixtures that test files in more than one folder use, registered as a pytest plugin by tests/conftest.py.

`figures`: the analysis and validation figures drawn from the synthetic store; `paper_outputs`: that store
and every table and figure of notebooks 02 and 04-06 written from it, once for every worker; `pilot_tidy`
and `exports`: a simulated pilot and the trust tables and figures written from it; `page`: headless
Chromium.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")

import pytest
from matplotlib.figure import Figure

from personalens_utils import analysis
from personalens_utils.benchmark_validation.figures import figure3
from personalens_utils.data.demographics import sample_demographics
from personalens_utils.measures import scores
from personalens_utils.outputs import plots
from personalens_utils.outputs.ids import OutputId
from personalens_utils.reference.schema import load_schema
from personalens_utils.trust import differences, power, variance
from support.checkout import made_once
from support.lab import CHROMIUM
from support.paper_outputs import write_outputs
from support.synthetic_store import JUDGE, build_store
from support.trust_design import KNOWN, as_tidy, simulate, usage_table

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture(scope="module")
def figures(tmp_path_factory) -> dict[str, Figure]:
    """The analysis and validation figures of the synthetic store, each also drawn at its other width;
    Figure 4 and the radar also over the official benchmark's 20 domains."""
    store = build_store(tmp_path_factory.mktemp("figure_text") / "store")
    tidy = scores.load_scores(store, judge_model=JUDGE)
    turns = scores.turn_frame(tidy)
    names = load_schema().domain_names  # the official benchmark's 20 domains, as on a full run
    every_domain = tidy.assign(
        domains=[
            [names[zlib.crc32(scenario.encode()) % len(names)]] if kind == "SD" else list(domains)
            for scenario, kind, domains in zip(
                tidy["scenario_id"], tidy["task_type"], tidy["domains"], strict=True
            )
        ]
    )
    results = {
        "figure3": figure3(sample_demographics(300, seed=2), backend_names=["offline"]),
        "figure4": analysis.figure4(tidy, assistant_model="model-a"),
        "figure5": analysis.figure5(turns, assistant_model="model-a", backend_names={"offline"}),
        "radar": analysis.radar_chart(tidy),
        "figure4_20_domains": analysis.figure4(every_domain, assistant_model="model-a"),
        "radar_20_domains": analysis.radar_chart(every_domain),
    }
    drawn = {name: result.figure for name, result in results.items()}
    for name, result in results.items():
        other = "text" if plots.span_of(result.figure) == "column" else "column"
        drawn[f"{name}_{other}"] = result.at(other)
    return drawn


@pytest.fixture(scope="session")
def paper_outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic store in `store/` and what `write_outputs` makes of it in `out/`, made once for every
    xdist worker (the determinism, figure and LaTeX checks each made the same a minute and a half long).
    Read-only by convention: a test that adds outputs copies `out/` first."""
    def make(folder: Path) -> None:
        build_store(folder / "store")
        write_outputs(folder / "store", folder / "out")

    return made_once(tmp_path_factory, "paper_outputs", make)


@pytest.fixture(scope="module")
def pilot_tidy():
    """A pilot of two assistants drawn from `KNOWN`, as the tidy score frame."""
    frame = simulate(KNOWN, users=40, tasks=6, repeats=2, judge_samples=2,
                     effects={"model-a": 0.0, "model-b": 0.3}, seed=31)
    return as_tidy(frame)


@pytest.fixture(scope="module")
def exports(pilot_tidy, tmp_path_factory):
    """The trust tables and figures of the pilot, written to a folder, and its study plan."""
    out = tmp_path_factory.mktemp("trust_exports")
    variance.variance_table(pilot_tidy).save(out, OutputId("table", "V1", "variance"))
    variance.variance_figure(pilot_tidy).save(out, OutputId("figure", "V1", "variance"))
    differences.differences_table(pilot_tidy).save(out, OutputId("table", "D1", "differences"))
    config = power.PlanConfig(users=(20, 50, 100, 200), repeats=(1, 3), judge_samples=(1, 3), target=0.25)
    costs = power.UnitCosts.from_usage(usage_table(), dialogues=40, judge_samples=80)
    plan = power.plan_study(pilot_tidy, treatment="model-b", control="model-a", config=config, costs=costs)
    plan.table.save(out, OutputId("table", "P1", "power"))
    plan.needed.save(out, OutputId("table", "P2", "users_needed"))
    plan.figure.save(out, OutputId("figure", "P1", "power"))
    return out, plan


@pytest.fixture
def page() -> Iterator[Page]:
    """A page of headless Chromium (skipped, saying how to install it, where there is none)."""
    from playwright.sync_api import sync_playwright  # here: the plugin loads for every test file

    if CHROMIUM is None:
        pytest.skip("Chromium not found: install the distribution's package (apt-get install chromium; "
                    ".ci/run does it) or set PERSONALENS_CHROMIUM to its path")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, timeout=60_000)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.set_default_timeout(60_000)
            yield context.new_page()
        finally:
            browser.close()
