"""Right after `make reproduce`, every notebook runs on its default parameters (issue 13): 02-06 find
the reproduction's benchmark and run store through runs/LATEST, 01 generates data/generated/default.
Executed copies keep finished progress bars. Without its input a notebook stops with one line
saying what to run first. New work, a second `make reproduce`, then every notebook on its defaults: the
journeys (b)-(d) of tests/journeys/."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import papermill
import pytest
from support.checkout import copy_env

from personalens_utils.base import paths

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600, func_only=True)]  # the reproduction has its own

ORDER = ("02_validation", "03_simulation", "04_judging", "05_ablation", "06_analysis", "07_trust",
         "01_generation")
"""A researcher's order after `make reproduce`; 01 last, since its new benchmark becomes 02-07's default."""
WIDGET = "application/vnd.jupyter.widget-view+json"
METER = re.compile(r"\d+%\|.*\d+/\d+ \[")


@pytest.fixture
def checkout(reproduced_checkout, tmp_path, monkeypatch) -> Path:
    """A copy of the reproduced checkout whose kernels import its own package."""
    copy = Path(shutil.copytree(reproduced_checkout, tmp_path / "checkout", symlinks=True))
    for name, value in copy_env(copy).items():
        monkeypatch.setenv(name, value)
    for name in ("PERSONALENS_DATA", "PERSONALENS_CACHE"):
        monkeypatch.delenv(name, raising=False)
    return copy


def _run(checkout: Path, name: str, out: Path, **parameters) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    executed = out / f"{name}.ipynb"
    papermill.execute_notebook(str(checkout / "notebooks" / f"{name}.ipynb"), str(executed),
                               parameters=parameters, kernel_name="python3", progress_bar=False,
                               cwd=str(checkout / "notebooks"))
    return executed


def _text(executed: Path) -> str:
    """Everything the executed notebook printed or displayed as text."""
    parts = []
    for cell in json.loads(executed.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            for mime in ("text/plain", "text/markdown"):
                parts.append("".join(output.get("data", {}).get(mime, "")))
    return "\n".join(parts)


def _bars(executed: Path) -> list[str]:
    """The saved text of every progress bar of an executed notebook: a widget whose text is a tqdm meter
    ("n/total [elapsed"), not the explorer's or another widget's."""
    cells = json.loads(executed.read_text(encoding="utf-8"))["cells"]
    texts = ["".join(o["data"].get("text/plain", "")) for c in cells for o in c.get("outputs", [])
             if WIDGET in o.get("data", {})]
    return [text for text in texts if METER.search(text)]


@pytest.mark.timeout(1500, func_only=True)  # nine notebooks in a row (02-07, 01, then 04 twice)
def test_every_notebook_runs_on_its_defaults_right_after_reproduce(checkout, tmp_path):
    latest = (checkout / "runs" / "LATEST").read_text(encoding="utf-8")
    assert "folder: small/generated" in latest and "benchmark: small/generated/benchmark" in latest
    store = checkout / "runs" / "small" / "generated" / "store"
    out = tmp_path / "executed"
    executed = {name: _run(checkout, name, out) for name in ORDER}
    texts = {name: _text(path) for name, path in executed.items()}
    assert "6 users" in texts["02_validation"]  # the reproduction's 6-user benchmark, not data/generated
    own = checkout / "runs" / "small" / "generated" / EXTENDED
    for name in ("03_simulation", "04_judging"):
        assert str(store) in texts[name], f"{name} did not work on the reproduction's store"
    # 04 judges what the reproduction's 05 added: the reproduction stays, 04 and then 05, 06 use their own run
    assert f"{store} is a finished `make reproduce` store" in texts["04_judging"]
    for name in ("05_ablation", "06_analysis", "07_trust"):
        assert str(own) in texts[name], f"{name} did not go on in the run 04 extended"
    assert "Notebook 06 finished" in texts["06_analysis"] and "Notebook 07 finished" in texts["07_trust"]
    # 04 run to the end (01 made another benchmark the default), then reopened and run again: nothing to do
    bench = str(checkout / "runs" / "small" / "generated" / "benchmark")
    _run(checkout, "04_judging", tmp_path / "finish", benchmark_dir=bench)
    rerun = _run(checkout, "04_judging", tmp_path / "again", benchmark_dir=bench)
    again = json.loads(rerun.read_text(encoding="utf-8"))
    shown = ["".join(o.get("data", {}).get("text/html", ""))
             for c in again["cells"] for o in c.get("outputs", [])]
    assert any("pl-stage-idle" in html and "judging: nothing to do" in html for html in shown)
    usage = [html for html in shown if "pl-usage" in html]  # nothing to do: one line, no empty table
    assert len(usage) == 1 and "judging: no model calls in this session" in usage[0]
    assert "<table" not in usage[0]
    assert not (store / "EXTENDS").exists() and (own / "EXTENDS").is_file()
    assert (checkout / "data" / "generated" / "default" / "profile").is_dir()  # 01 wrote its own benchmark


def test_executed_copies_of_the_reproduction_keep_finished_progress_bars(reproduced_checkout):
    bars = {path.name: _bars(path) for path in sorted((reproduced_checkout / "runs").rglob("*.ipynb"))}
    drawn = [bar for found in bars.values() for bar in found]
    assert len(drawn) >= 5, bars  # simulation, judging, ablation and the second judge draw bars
    for name, found in bars.items():
        for bar in found:
            assert "100%" in bar and not re.search(r"(?<!\d)0/0\b", bar), f"{name}: stale bar {bar!r}"


def test_a_notebook_without_its_input_says_in_one_line_what_to_run_first(checkout, tmp_path):
    (checkout / "runs" / "LATEST").unlink()  # as before any `make reproduce`
    out = tmp_path / "executed"
    with pytest.raises(papermill.PapermillExecutionError) as no_benchmark:
        _run(checkout, "02_validation", out)
    assert no_benchmark.value.ename == "SessionError"
    assert len(no_benchmark.value.traceback) == 1, "the error is one line, not a traceback"
    assert "run notebook 01 or `make reproduce` first, or set benchmark_dir" in no_benchmark.value.evalue
    empty = tmp_path / "empty_store"
    with pytest.raises(papermill.PapermillExecutionError) as no_judgments:
        _run(checkout, "06_analysis", out, run_dir=str(empty),
             benchmark_dir=str(checkout / "runs" / "small" / "generated" / "benchmark"))
    assert len(no_judgments.value.traceback) == 1
    assert f"the run store {empty} holds no judgments by Claude 3.5 Sonnet" in no_judgments.value.evalue
    assert "run notebooks 03 and 04 first" in no_judgments.value.evalue


EXTENDED = "extended_store"
"""Where notebooks on their defaults put new work on a reproduction, inside its folder (paths.LatestRun)."""


def _digest(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes (a store, the executed copies, INDEX.md), but for the
    store notebooks on their defaults extend it in."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and EXTENDED not in path.relative_to(folder).parts}


def _same_tables(made: Path, reproduced: Path) -> list[str]:
    """The CSV tables a notebook wrote on its defaults, each checked against the reproduction's copy."""
    names = sorted(path.name for path in (made / "tables").glob("*.csv"))
    for name in names:
        mine, theirs = (folder / "tables" / name for folder in (made, reproduced))
        assert mine.read_text(encoding="utf-8") == theirs.read_text(encoding="utf-8"), f"{name} differs"
    return names


def test_notebooks_on_their_defaults_show_the_reproduction_and_leave_it_as_it_was(checkout, tmp_path):
    runs = checkout / "runs"
    before, latest = _digest(runs / "small"), (runs / "LATEST").read_bytes()
    out = tmp_path / "executed"
    texts = {name: _text(_run(checkout, name, out))
             for name in ("02_validation", "03_simulation", "06_analysis")}
    assert _digest(runs / "small") == before and (runs / "LATEST").read_bytes() == latest
    repro = runs / "small" / "generated"
    assert not (repro / EXTENDED).exists()  # nothing was to be written, so no run of their own either
    newest = {name: paths.newest_output(name, runs)
              for name in ("validation", "analysis", "simulation-report")}
    assert "table10_lexical_diversity.csv" in _same_tables(newest["validation"], repro)  # Table 10 found
    shown = _same_tables(newest["analysis"], repro)  # 06: the reproduction's four assistants, no extra row
    assert {"table3_assistant_models.csv", "table12_user_agent.csv", "table13_dialogue_stats.csv"} <= {*shown}
    table3 = newest["analysis"] / "tables" / "table3_assistant_models.csv"
    assert "ref-follows-setting" not in table3.read_text(encoding="utf-8")
    assert "focus ref-past-interactions" in texts["06_analysis"]
    # 03 shows the reproduction's focus assistant, all of whose dialogues are stored: nothing to do
    assert "table13_dialogue_stats.csv" in _same_tables(newest["simulation-report"],
                                                         repro / "simulation-ref_past_interactions")
    assert "assistant `offline:ref-past-interactions`" in texts["03_simulation"]


def test_a_notebook_that_would_extend_the_reproduction_says_so_and_writes_to_its_own_run(checkout, tmp_path):
    runs = checkout / "runs"
    before = _digest(runs / "small")
    text = _text(_run(checkout, "03_simulation", tmp_path / "executed", assistant_model="ref-dialogue-only",
                      settings=["base+I"]))
    assert _digest(runs / "small") == before
    own = runs / "small" / "generated" / EXTENDED
    assert f"{runs / 'small' / 'generated' / 'store'} is a finished `make reproduce` store" in text
    assert f"new records go to this notebook's own run {own}" in text
    def stored(store: Path) -> dict[str, dict]:
        lines = (store / "dialogues.jsonl").read_text(encoding="utf-8").splitlines()
        return {d["id"]: d for d in map(json.loads, lines)}

    made, held = stored(own), stored(runs / "small" / "generated" / "store")
    assert set(held) < set(made)  # a copy of the reproduction's dialogues, then the new ones
    new = {(d["assistant_model"], d["assistant_setting"]) for i, d in made.items() if i not in held}
    assert new == {("ref-dialogue-only", "base+I")}
