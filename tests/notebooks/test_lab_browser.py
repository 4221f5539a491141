"""JupyterLab in a real browser after `make reproduce` (issue 13): `make lab` serves a fresh copy of the
kit on loopback, headless Chromium (the distribution's package, driven by Playwright; no browser is
downloaded) opens notebook 06, runs all cells, opens one dialogue in the explorer and finds its
transcript and a judge's explanation on the page. Screenshots go to the test's temporary folder."""

from __future__ import annotations

import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from playwright.sync_api import expect
from support.checkout import copy_env
from support.lab import serving_lab, words

from personalens_utils.explore import Catalog
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900, func_only=True)]  # the reproduction has its own

JUDGE = "Claude 3.5 Sonnet"
T = TypeVar("T")
@pytest.fixture
def lab(reproduced_checkout, tmp_path) -> Iterator[tuple[str, str, Path]]:
    """`make lab` on a copy of the reproduced checkout: (base URL, token, the copy); stopped at the end."""
    root = Path(shutil.copytree(reproduced_checkout, tmp_path / "checkout", symlinks=True))

    def command(port: int, token: str) -> list[str]:
        args = f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} --ServerApp.port_retries=0 " \
               f"--IdentityProvider.token={token}"
        # the Makefile's own target, on the venv running the tests (-o install: nothing is installed)
        return ["make", "-o", "install", "lab", f"VENV={sys.prefix}", f"ARGS={args}"]

    with serving_lab("make lab", command, root, copy_env(root), tmp_path) as (base, token):
        yield base, token, root


OVERFLOWING = """(root) => {
  const area = root.closest('.jp-OutputArea-output');
  const edge = area.getBoundingClientRect().right + 1;
  const out = area.scrollWidth > area.clientWidth + 1 ? ['the output area scrolls sideways'] : [];
  for (const el of root.querySelectorAll('*')) {
    const box = el.parentElement.closest('.pl-scroll');  // a wide table scrolls inside its own box
    const rect = el.getBoundingClientRect();
    if (!box && rect.width > 0 && rect.right > edge) out.push(`${el.tagName}.${el.className}`);
  }
  return out.slice(0, 10);
}"""
"""The elements of a widget whose right edge is past the output area's (none, when everything wraps)."""
LOOSE = """(root) => [...root.querySelectorAll('.pl-explanation, .pl-relevant td')]
  .map(el => parseFloat(getComputedStyle(el).lineHeight) / parseFloat(getComputedStyle(el).fontSize))
  .filter(ratio => ratio > 1.6)"""
"""Line spacing (line height over font size) of explanations and table cells looser than text's."""
RELEVANT_FITS = """(table) => {
  const area = table.closest('.jp-OutputArea-output').getBoundingClientRect();
  return table.getBoundingClientRect().right <= area.right + 1 && table.scrollWidth <= table.clientWidth + 1;
}"""
"""Whether the relevant-preferences table lies inside the output area, no column cut off."""


def test_notebook_06_runs_in_the_lab_and_the_explorer_opens_a_dialogue(lab, page, tmp_path):
    base, token, root = lab
    shots = []

    def shot(name: str) -> None:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path))
        shots.append(path)
        print(f"screenshot: {path}")

    page.goto(f"{base}/lab/tree/notebooks/06_analysis.ipynb?token={token}")
    idle = page.get_by_role("button", name=re.compile(r"PersonaLens kit\) \| Idle$"))
    chooser = page.locator(".jp-Dialog", has_text="Select Kernel")
    expect(idle.or_(chooser)).to_be_visible(timeout=120_000)
    if chooser.is_visible():  # Lab may ask once; the notebook's own kernel is preselected
        chooser.locator(".jp-mod-accept").click()
    expect(idle).to_be_visible(timeout=120_000)  # the kernel started
    shot("1_opened")
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    expect(page.get_by_text("Notebook 06 finished", exact=False)).to_be_visible(timeout=300_000)
    expect(idle).to_be_visible(timeout=60_000)
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                        has_text="Traceback").count() == 0
    page.locator(".jp-OutputArea-output", has_text="Table 3.").first.scroll_into_view_if_needed()
    shot("2_table3_after_run_all")

    explorer = page.locator(".pl-explorer")
    expect(explorer).to_have_count(1)
    store = RunStore(root / "runs" / "small" / "generated" / "store")
    md = {d.id: d for d in store.read(Dialogue) if d.task_type == "MD"}
    dialogues = explorer.locator(".pl-explorer-dialogue-select select")

    def until(what: str, value: Callable[[], T], holds: Callable[[T], bool]) -> T:
        """`value()` once `holds` (the page follows the widgets through the kernel)."""
        deadline = time.monotonic() + 60
        while not holds(current := value()):
            assert time.monotonic() < deadline, f"{what}: still {str(current)[:300]}"
            time.sleep(0.25)
        return current

    explorer.locator(".pl-explorer-task_type select").select_option(label="MD")
    options = dialogues.locator("option")
    labels = until("the MD filter", lambda: [words(t) for t in options.all_inner_texts()],
                   lambda texts: len(texts) >= 2 and all(" · MD-" in text for text in texts))
    record = {Catalog.label(d): d for d in md.values()}[labels[1]]
    dialogues.select_option(label=labels[1])
    dialogue_id = until("the dialogue page", lambda: explorer.locator(".pl-explorer-page .pl-page")
                        .get_attribute("data-dialogue"), lambda shown: shown == record.id)
    judged = [j for j in store.read(Judgment)
              if j.dialogue_id == dialogue_id and j.judge_model == JUDGE and j.explanation]
    assert judged, f"the reproduction judged dialogue {dialogue_id}"
    page_text = words(explorer.locator(".pl-explorer-page").inner_text())
    first_user_turn = words(record.turns[0].content)
    assert first_user_turn in page_text, "the transcript's first user turn is on the page"
    turns = explorer.locator(".pl-explorer-page .pl-turn")
    assert turns.count() == len(record.turns), "every message of the dialogue is shown"
    explanation = words(judged[0].explanation)
    assert explanation in page_text, f"the {judged[0].dimension} explanation is on the page"
    explorer.locator(".pl-explorer-page .pl-chat").scroll_into_view_if_needed()
    explorer.locator(".pl-explorer-count").scroll_into_view_if_needed()
    shot("3_explorer_dialogue")
    explorer.locator(f".pl-judgment[data-dimension='{judged[0].dimension}']").scroll_into_view_if_needed()
    shot("4_explorer_judgments")
    page.locator(".pl-compare-widget .pl-compare-scenario").scroll_into_view_if_needed()
    shot("5_side_by_side")
    page.locator(".pl-compare-page .pl-side").first.scroll_into_view_if_needed()
    shot("6_side_by_side_transcripts")
    widgets = (explorer, page.locator(".pl-compare-widget"))
    for widget in widgets:  # nothing runs past the output's edge; lines spaced as text
        assert widget.evaluate(OVERFLOWING) == [], "clipped at the output area's right edge"
        assert widget.evaluate(LOOSE) == [], "explanations and cells spaced wider than text"
    page.set_viewport_size({"width": 900, "height": 1000})  # a narrow window: still nothing clipped
    for widget in widgets:
        until("clipped in a narrow window", lambda w=widget: w.evaluate(OVERFLOWING), lambda bad: bad == [])
    relevant = page.locator(".pl-compare-page .pl-relevant")
    relevant.scroll_into_view_if_needed()
    until("the relevant preferences fit a narrow window", lambda: relevant.evaluate(RELEVANT_FITS),
          lambda fits: fits)
    shot("7_side_by_side_narrow")
    assert all(path.stat().st_size > 10_000 for path in shots)
