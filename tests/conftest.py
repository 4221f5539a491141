"""Shared fixtures. The official archive is extracted once per test session into a temp folder.

Fixtures that test files of several folders use live in `support.shared_fixtures`, registered below.

The archive is looked for in ../shared/data beside the checkout, or at $PERSONALENS_ARCHIVE; the
official code archive likewise, or at $PERSONALENS_CODE_ARCHIVE.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
from support import journeys
from support.checkout import clone_head, fresh_copy, made_once, run_reproduce
from support.official_data import SHARED_ARCHIVE, SHARED_CODE_ARCHIVE
from support.scheduling import JourneysFirst

from personalens_utils.data import Benchmark, load_benchmark

pytest_plugins = ["support.shared_fixtures"]

ARCHIVE = Path(os.environ.get("PERSONALENS_ARCHIVE", SHARED_ARCHIVE))
CODE_ARCHIVE = Path(os.environ.get("PERSONALENS_CODE_ARCHIVE", SHARED_CODE_ARCHIVE))


def _extracted(archive: Path, what: str, target: Path) -> Path:
    """`archive` unpacked into `target`; the test skips, naming the path, when it is absent."""
    if not archive.is_file():
        pytest.skip(f"official PersonaLens {what} not found at {archive} (../shared is absent)")
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


@pytest.fixture(scope="session")
def official_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extracted archive: `data/` (profile/, task/) and `res/schema.json`, unpacked once for every
    worker (about 4 s each). Read-only by convention, as the journeys read it too."""
    if not ARCHIVE.is_file():
        pytest.skip(f"official PersonaLens archive not found at {ARCHIVE} (../shared is absent)")
    return made_once(tmp_path_factory, "official", lambda folder: _extracted(ARCHIVE, "archive", folder))


@pytest.fixture(scope="session")
def official_data(official_root: Path) -> Path:
    return official_root / "data"


@pytest.fixture(scope="session")
def official_benchmark(official_data: Path) -> Benchmark:
    """All 1,500 official users, loaded once per worker (3 s each time) for the tests that read them all.
    Read-only: a test that changes it changes it for the others."""
    return load_benchmark(official_data)


@pytest.fixture(scope="session")
def official_schema_path(official_root: Path) -> Path:
    return official_root / "res" / "schema.json"


@pytest.fixture(scope="session")
def official_code_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extracted code archive: `personalens-official-code/` and `official-run-user7/`.

    Read-only by convention: a test that runs the official scripts copies what it needs first.
    """
    return _extracted(CODE_ARCHIVE, "code archive", tmp_path_factory.mktemp("official_code"))


@pytest.fixture(scope="session")
def official_code(official_code_root: Path) -> Path:
    """The authors' code folder (src/, util/, res/), as a user's own copy would be."""
    return official_code_root / "personalens-official-code"


@pytest.fixture(scope="session")
def official_run_user7(official_code_root: Path) -> Path:
    """Real output of the official scripts for user 7 (output/dialogue, output/evaluation, the log)."""
    return official_code_root / "official-run-user7"


@pytest.fixture(autouse=True)
def own_response_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test (and the kernels its notebooks start) gets a response cache of its own. The default is
    the checkout's `.cache/responses`, shared by every test of a session and kept between sessions: a
    test that answered an Anthropic-compatible fake's prompts once made a later test with the same tiny
    benchmark and model find them cached (the kit counts a base URL of those backends as a gateway to the
    same models) and submit nothing, so tests passed or failed by the order they ran in."""
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path_factory.mktemp("response_cache")))


REPRODUCTIONS = {"reproduced_checkout", "journey", "journey_after"}
"""The fixtures that make a whole `make reproduce`: a test using one is marked `reproduction`."""
JOURNEY_CHAIN = {"journey", "journey_after"}
LOCAL_MODEL = "local_model"
"""The mark of the tests that talk to the model `make local-model` installs
(tests/llm/test_local_model_live.py)."""
JOURNEYS = "journeys"
"""The xdist group of the tests of tests/journeys/: the journeys' steps run one after another on one
worker, which `JourneysFirst` hands out before anything else."""


def pytest_configure(config: pytest.Config) -> None:
    """Fewer passes of the cycle collector in each test process (the kernels and scripts the tests start
    keep CPython's defaults): collection and the in-process tests make millions of short-lived objects over
    a heap of half a million long-lived ones (every test module, pandas, the SDKs), and at the default
    thresholds the collector's passes took a quarter of the time a worker spent collecting (12.5 s -> 9 s)."""
    gc.set_threshold(100_000, 50, 100)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> JourneysFirst | None:
    """`make test`'s loadgroup scheduling, with the journeys' group handed out first (support.scheduling)."""
    return JourneysFirst(config, log) if config.getvalue("dist") == "loadgroup" else None


@pytest.hookimpl(tryfirst=True)  # before xdist turns group marks into the scheduler's scopes
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs a whole reproduction, so `make test-fast` (-m "not reproduction")
    leaves it out without a test file having to remember the mark. The journeys' own tests are one xdist
    group; the other tests that read the journeys' reproduction go last, so that the worker that reaches
    them finds it made instead of waiting for it. Every other test file is a group of its own unless it
    names one: its module fixtures are then made once, not once on each worker its tests were spread to
    (the PERSONA Bench notebook ran twice, 10 s each); a file holding a test marked slow is named so that
    it is handed out before the others (support.scheduling). Tests of the model on this machine run
    only when `-m` names them: they need `make local-model` and take minutes."""
    readers = []
    local_opt_in = LOCAL_MODEL in (config.getoption("markexpr") or "")
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if REPRODUCTIONS & fixtures:
            item.add_marker(pytest.mark.reproduction)
        if item.get_closest_marker(LOCAL_MODEL) and not local_opt_in:
            item.add_marker(pytest.mark.skip(reason=f"opt-in: `make local-model`, then -m {LOCAL_MODEL}"))
        if item.get_closest_marker(JOURNEYS):
            item.add_marker(pytest.mark.xdist_group(JOURNEYS))
        elif JOURNEY_CHAIN & fixtures:
            readers.append(item)
        elif not item.get_closest_marker("xdist_group"):
            path = item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(f"{JourneysFirst.slow}{path}" if path in slow else path))
    chosen = set(readers)
    items[:] = [item for item in items if item not in chosen] + readers


@pytest.fixture(scope="session")
def reproduced_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the kit right after a small offline `make reproduce` (support.checkout:
    generated pass, 6 users): `runs/small/generated/` and `runs/LATEST`; what the command printed is
    in `reproduce.log` beside the checkout. Read-only by convention; a test that runs notebooks copies
    it first. Made once per session, whichever xdist worker asks first (`made_once`)."""
    def make(folder: Path) -> None:
        checkout = fresh_copy(folder / "checkout")
        (folder / "reproduce.log").write_text(run_reproduce(checkout), encoding="utf-8")

    return made_once(tmp_path_factory, "reproduced", make) / "checkout"


@pytest.fixture(scope="session")
def journey(tmp_path_factory: pytest.TempPathFactory, official_data: Path) -> Path:
    """Journey (a): a clone of the committed HEAD right after `make reproduce RUN=journey` on the official
    data at the default sizes (support.journeys), made once for every worker. A copy of the clone as (a)
    left it is `reproduced/` in the returned folder (the clone itself, `kit/`, goes on with `journey_after`),
    the step's outcome in `steps.json` (`journeys.load_steps`), its log beside it. It may have failed: the
    tests of tests/journeys/ say so, the tests that read a pass say it is missing. Read-only by
    convention; a test that writes copies `reproduced/` first."""
    def make(folder: Path) -> None:
        checkout = clone_head(folder / journeys.CHECKOUT)
        env = journeys.journey_env(checkout, official_data)
        assert journeys.imported_from(checkout, env) == checkout / "personalens_utils", \
            "the clone's steps would not run the clone's own package"
        step = journeys.run_step("reproduce", journeys.make("reproduce", f"RUN={journeys.RUN}"), checkout,
                                 env, folder, timeout=3600)
        shutil.copytree(checkout, folder / journeys.SNAPSHOT, symlinks=True)
        journeys.save_steps(folder, [step])

    return made_once(tmp_path_factory, "journey", make)


@pytest.fixture(scope="session")
def journey_after(tmp_path_factory: pytest.TempPathFactory, journey: Path, official_data: Path) -> Path:
    """Journeys (b)-(d) in journey (a)'s clone, after it, made once for every worker: `make evaluate` with
    `Echoing` from a file outside the clone, `make reproduce RUN=journey` again, then each notebook 02-09
    on its defaults through the kit's runner. Every step runs whatever the one before it did; their
    outcomes are in `steps.json` (`journeys.load_steps`), the clone stays in the journey's folder."""
    def make(folder: Path) -> None:
        checkout = journey / journeys.CHECKOUT
        mine = folder / "mine" / "my_assistant.py"
        mine.parent.mkdir()
        mine.write_text(journeys.ASSISTANT, encoding="utf-8")
        env = journeys.journey_env(checkout, official_data)
        steps = [
            journeys.run_step("evaluate", journeys.make("evaluate", f"ASSISTANT=python:{mine}:Echoing"),
                              checkout, env, folder, timeout=2400),
            journeys.run_step("reproduce-again", journeys.make("reproduce", f"RUN={journeys.RUN}"), checkout,
                              env, folder, timeout=3600),
        ]
        for number in journeys.NOTEBOOKS:
            command = [sys.executable, "-m", "personalens_utils.run", number]
            steps.append(journeys.run_step(f"defaults-{number}", command, checkout, env, folder, 1800))
        journeys.save_steps(folder, steps)

    return made_once(tmp_path_factory, "journey_after", make)
