"""`make evaluate`: a Python assistant in a file outside the checkout beside a small reproduction's
reference assistants, with no call made for them (their dialogues and judgments are reused, Table 5's
second judge's and notebook 07's too), and every output issue 31 asks for in one folder with INDEX.md,
its tables printing at their natural size on ACL's page."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.checkout import copy_env
from support.latex_page import PDFLATEX, unfit_tables

from personalens_utils.outputs.tables import read_table

pytestmark = pytest.mark.slow

ASSISTANT = '''
from pathlib import Path


class Counted:
    """Answers without a model and counts its replies beside its file."""

    def reply(self, view, llm):
        with open(Path(__file__).with_suffix(".calls"), "a", encoding="utf-8") as calls:
            calls.write(view.task_type + "\\n")
        return "Here is a suggestion that fits what you asked for."
'''


JUDGED = ("judgments", "probe_judgments")
"""The tables a judge call writes a record to (an errored call too)."""
OUTPUTS = ("tables/table3_assistant_models.csv", "tables/table4_ablation.csv",
           "tables/table12_user_agent.csv", "tables/table13_dialogue_stats.csv",
           "figures/figure4_domains.pdf",
           "figures/figure5_turn_personalization.pdf", "figures/figure_radar_personalization_by_domain.pdf",
           "tables/tableD1_paired_differences.csv", "tables/tableT1_judge_report_card.csv")
"""What issue 31 asks `make evaluate` to write into the evaluation's folder and list in its INDEX.md."""


def _lines(*paths: Path) -> dict[str, dict]:
    """The records of JSON-lines tables by id (several stores' copies of one record are one)."""
    found: dict[str, dict] = {}
    for path in paths:
        rows = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        found.update((row["id"], row) for row in map(json.loads, rows))
    return found


def _drawn(manifest: Path) -> dict[str, list[str]]:
    """Table 5's sample: the dialogues drawn of each assistant."""
    design = json.loads(manifest.read_text(encoding="utf-8"))["design"]
    return {stratum["value"]: stratum["dialogue_ids"] for stratum in design["strata"]}


@pytest.mark.timeout(2400, func_only=True)  # the shared reproduction (the fixture) has its own timeout
def test_evaluate_puts_a_file_assistant_beside_the_references_calling_only_it(reproduced_checkout, tmp_path):
    checkout = Path(shutil.copytree(reproduced_checkout, tmp_path / "checkout", symlinks=True))
    mine = tmp_path / "elsewhere" / "counted.py"
    mine.parent.mkdir()
    mine.write_text(ASSISTANT, encoding="utf-8")
    command = [sys.executable, "-m", "personalens_utils.reproduce.evaluate",
               "--assistant", f"python:{mine}:Counted"]
    done = subprocess.run(command, cwd=checkout, env=copy_env(checkout), capture_output=True, text=True,
                          timeout=2300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    repro = checkout / "runs" / "small" / "generated"
    folder = repro / "evaluations" / "Counted"
    assert f"outputs: {folder}" in done.stdout
    assert "setting base: Counted sees no demographics, past interactions, situation" in done.stdout
    stored = f"{mine.resolve()}:Counted"
    stores, held_stores = (folder / "store", folder / "trust_store"), (repro / "store", repro / "trust_store")
    held = _lines(*(s / "dialogues.jsonl" for s in held_stores))
    made = _lines(*(s / "dialogues.jsonl" for s in stores))
    assert {i: held[i] for i in held} == {i: made[i] for i in held}  # every reference dialogue reused as is
    new = {i: d for i, d in made.items() if i not in held}
    assert new and {(d["assistant_model"], d["assistant_backend"]) for d in new.values()} == {
        (stored, "python")}
    assert any(d.get("sample") for d in new.values())  # notebook 07 repeated the new assistant's dialogues
    judges = set()
    for table in JUDGED:  # no judge call at all on a reference dialogue: every new judgment is of a new one
        before = _lines(*(s / f"{table}.jsonl" for s in held_stores))
        added = [j for i, j in _lines(*(s / f"{table}.jsonl" for s in stores)).items() if i not in before]
        assert {j["dialogue_id"] for j in added} <= set(new), table
        judges |= {j["judge_model"] for j in added}
    assert judges == {"Claude 3.5 Sonnet", "Claude 3.7 Sonnet"}  # the judge, and Table 5's and 07's second
    sample, reproduced = _drawn(folder / "annotation" / "annotation_sample.json"), _drawn(
        repro / "annotation" / "annotation_sample.json")
    assert {k: v for k, v in sample.items() if k != stored} == reproduced  # the references' draws kept
    assert len(sample[stored]) == max(map(len, reproduced.values()))
    replies = sum(t["role"] == "assistant" for d in new.values() for t in d["turns"])
    assert len(mine.with_suffix(".calls").read_text(encoding="utf-8").splitlines()) == replies
    table3 = read_table(folder / "tables" / "table3_assistant_models.csv")
    assert list(table3["Assistant model"]) == ["ref-ignores-context", "ref-dialogue-only",
                                               "ref-past-interactions", "ref-all-preferences", "Counted"]
    differences = (folder / "tables" / "tableD1_paired_differences.csv").read_text(encoding="utf-8")
    assert all(f"Counted − {ref}" in differences for ref in ("ref-ignores-context", "ref-dialogue-only",
                                                             "ref-past-interactions", "ref-all-preferences"))
    index = (folder / "INDEX.md").read_text(encoding="utf-8")
    assert "# Evaluation of `Counted`" in index and "| 07_trust |" in index
    assert [name for name in OUTPUTS if not (folder / name).is_file() or f"`{name}`" not in index] == []
    if PDFLATEX is not None:  # its tables print on ACL's page as the reproduction's do
        assert unfit_tables(sorted(folder.rglob("tables/*.tex")), tmp_path / "pages") == {}


FAILING = '''
from pathlib import Path


class Flaky:
    """Answers without a model; fails in the vanilla setting (notebook 05) while a marker is beside it."""

    def reply(self, view, llm):
        if view.setting == "vanilla" and Path(__file__).with_suffix(".fail").exists():
            raise RuntimeError("planted failure in the vanilla setting")
        return "Here is a suggestion that fits what you asked for."
'''


@pytest.mark.timeout(2400, func_only=True)
def test_a_failed_evaluation_says_what_failed_and_a_rerun_continues_it(reproduced_checkout, tmp_path):
    """Issue 39 items 3 and 6: the failed step's line names the error; INDEX.md lists what was not made
    and why, and Table D1 is made since 03 and 04 finished; the rerun (on the old code refused with
    `RunCardError: cannot merge the run cards`) continues, takes --settings as the Makefile's ARGS pass
    it, and its captions name the assistant by its class, not by its file's absolute path."""
    checkout = Path(shutil.copytree(reproduced_checkout, tmp_path / "checkout", symlinks=True))
    mine = tmp_path / "elsewhere" / "flaky.py"
    mine.parent.mkdir()
    mine.write_text(FAILING, encoding="utf-8")
    mine.with_suffix(".fail").touch()
    command = [sys.executable, "-m", "personalens_utils.reproduce.evaluate",
               "--assistant", f"python:{mine}:Flaky"]
    first = subprocess.run(command, cwd=checkout, env=copy_env(checkout), capture_output=True, text=True,
                           timeout=2300)
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    assert "[evaluate] 05_ablation FAILED: AssistantError: " in first.stderr
    assert "planted failure in the vanilla setting" in first.stderr and "%xmode" not in first.stderr
    assert "[evaluate] 07_trust not run: 05_ablation failed" in first.stderr
    folder = checkout / "runs" / "small" / "generated" / "evaluations" / "Flaky"
    index = (folder / "INDEX.md").read_text(encoding="utf-8")
    assert "`tables/tableD1_paired_differences.md`" in index  # 03 and 04 finished
    missing = index.split("## Not made")[1]
    assert "**Table 4** (ablation over assistant settings): 05_ablation failed: AssistantError: " in missing
    assert "**Table 3** (assistant models: TCR, P, Nat., Coh. (SD, MD)): 06_analysis did not run: " \
        "05_ablation failed" in missing
    for name in ("Variance decomposition", "Power plan"):
        assert f"**{name}** (" in missing and "07_trust did not run: 05_ablation failed" in missing, name

    mine.with_suffix(".fail").unlink()
    again = subprocess.run([*command, "--settings", "base+all"], cwd=checkout, env=copy_env(checkout),
                           capture_output=True, text=True, timeout=2300)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "RunCardError" not in again.stdout + again.stderr
    index = (folder / "INDEX.md").read_text(encoding="utf-8")
    assert "## Not made" not in index and "- settings it was simulated in: base, base+all" in index
    for name in ("tableT4_variance_decomposition", "tableT5_power_plan", "tableD1_paired_differences"):
        assert f"`tables/{name}.csv`" in index, name
    dialogues = _lines(folder / "store" / "dialogues.jsonl").values()
    ours = {d["assistant_setting"] for d in dialogues if d["assistant_backend"] == "python"}
    assert {"base", "base+all"} <= ours
    shown = [path for sub in ("tables", "figures") for path in (folder / sub).glob("*.md")]
    assert shown and [p.name for p in shown if str(mine.parent) in p.read_text(encoding="utf-8")] == []
