"""A person plays the user in JupyterLab (issue 30): headless Chromium (the distribution's package, driven
by Playwright) opens a notebook that shows `play_user` on an offline session, types three user turns
(the third ends the dialogue), then runs the judging cell (offline judge) and the explorer cell, and
finds the person's dialogue, its judgments and their explanation in the explorer. The server serves a
temporary folder on loopback with the worktree's package on PYTHONPATH; screenshots go to the test's
temporary folder."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import nbformat
import pytest
from playwright.sync_api import Page, expect
from support.checkout import ROOT, copy_env
from support.lab import serving_lab, words
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data.write import save_benchmark
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
T = TypeVar("T")
TURNS = ("Hi! Can you help me with something for this evening?",
         "I would like it calm, and not too far from home.",
         "That sounds right, thank you.")
"""What the person types: two messages sent, the third sent with "End dialogue"."""
JUDGED = ("task_completion", "personalization")


def _notebook(folder: Path, scenario_id: str) -> Path:
    """The notebook a person opens: the session and the widget; judging; the explorer."""
    cells = [
        "from personalens_utils.session.base import Session\n"
        "from personalens_utils.session.parameters import SessionConfig\n"
        "from personalens_utils.explore import explore, play_user\n"
        f"session = Session.open(SessionConfig(benchmark_dir={str(folder / 'bench')!r}, "
        f"run_dir={str(folder / 'run')!r}, backend='offline'))\n"
        f"play_user(session, {scenario_id!r}, person='alice', assistant='ref-dialogue-only')",
        "from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging\n"
        "report = run_judging(session.run_store, session.client, benchmark_contexts(session.benchmark), "
        f"JudgingConfig(dimensions={list(JUDGED)!r}))\n"
        "print('judged', report.stored)",
        "explore(session)",
    ]
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / "play.ipynb"
    nbformat.write(book, path)
    return path


@pytest.fixture
def lab(tmp_path) -> Iterator[tuple[str, str, Path]]:
    """JupyterLab serving `tmp_path/work` on loopback, kernels importing the worktree's package."""
    work = tmp_path / "work"
    work.mkdir()

    def command(port: int, token: str) -> list[str]:
        return [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={work}", *(["--allow-root"] if os.getuid() == 0 else [])]

    with serving_lab("jupyter lab", command, work, copy_env(ROOT), tmp_path) as (base, token):
        yield base, token, work


def _until(what: str, value: Callable[[], T], holds: Callable[[T], bool], timeout: float = 60) -> T:
    """`value()` once `holds` (the page follows the widgets through the kernel)."""
    deadline = time.monotonic() + timeout
    while not holds(current := value()):
        assert time.monotonic() < deadline, f"{what}: still {str(current)[:300]}"
        time.sleep(0.25)
    return current


def _run_cell(page: Page, index: int) -> None:
    """Run one cell as a person does: click into it, Shift+Enter."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def test_a_person_plays_the_user_in_the_lab_and_the_dialogue_is_judged_and_explored(lab, page, tmp_path):
    base, token, work = lab
    bench = tiny_benchmark(n_users=1, seed=3)
    save_benchmark(bench, work / "bench")
    scenario_id = bench.scenarios["scenario_id"].iloc[0]
    _notebook(work, scenario_id)
    shots = []

    def shot(name: str) -> None:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path))
        shots.append(path)
        print(f"screenshot: {path}")

    page.goto(f"{base}/lab/tree/play.ipynb?token={token}")
    idle = page.get_by_role("button", name=re.compile(r"Python 3.*\| Idle$"))
    chooser = page.locator(".jp-Dialog", has_text="Select Kernel")
    expect(idle.or_(chooser)).to_be_visible(timeout=120_000)
    if chooser.is_visible():
        chooser.locator(".jp-mod-accept").click()
    expect(idle).to_be_visible(timeout=120_000)
    _run_cell(page, 0)
    widget = page.locator(".pl-play")
    expect(widget).to_be_visible(timeout=120_000)
    brief = words(widget.locator(".pl-play-brief").inner_text())
    task = bench.scenario(scenario_id)
    assert task.user_intent in brief and "What you like" in brief  # what the user agent is given
    end = widget.locator(".pl-play-end")
    expect(end).to_be_disabled()  # the opening message cannot end the dialogue
    shot("1_brief")

    box = widget.locator(".pl-play-message textarea")
    replies = widget.locator(".pl-play-chat .pl-turn-assistant")
    for number, text in enumerate(TURNS, start=1):
        box.fill(text)
        _until("the text reached the kernel", lambda: box.input_value(), lambda v, t=text: v == t)
        time.sleep(0.5)  # the text box syncs its value to the kernel on change
        button = end if number == len(TURNS) else widget.locator(".pl-play-send")
        button.click()
        _until(f"the assistant's reply to turn {number}", replies.count, lambda n, k=number: n == k)
    status = widget.locator(".pl-play-status")
    _until("the dialogue stored", lambda: status.inner_text(), lambda text: "Stored dialogue" in text)
    shot("2_dialogue_stored")

    store = RunStore(work / "run")
    (record,) = store.read(Dialogue)
    assert record.user_model == "human:alice" and record.user_backend == "human"
    assert record.status == "terminated"
    assert [t.content for t in record.turns if t.role == "user"] == list(TURNS)
    assert record.id in status.inner_text()

    _run_cell(page, 1)
    _until("the judging cell", lambda: words(page.locator(".jp-Notebook .jp-Cell").nth(1).inner_text()),
           lambda text: f"judged {len(JUDGED)}" in text, timeout=120)
    judged = {j.dimension: j for j in store.read(Judgment) if j.dialogue_id == record.id}
    assert set(judged) == set(JUDGED)

    page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    explorer = page.locator(".pl-explorer")
    expect(explorer).to_be_visible(timeout=120_000)
    shown = _until("the person's dialogue in the explorer",
                   lambda: explorer.locator(".pl-explorer-page .pl-page").get_attribute("data-dialogue"),
                   lambda value: value == record.id)
    assert shown == record.id
    text = words(explorer.locator(".pl-explorer-page").inner_text())
    assert all(words(t) in text for t in TURNS) and "human:alice" in text
    assert words(judged["personalization"].explanation).split(". ")[0] in text
    explorer.locator(".pl-explorer-page .pl-chat").scroll_into_view_if_needed()
    shot("3_explorer")
    assert all(path.stat().st_size > 10_000 for path in shots)
