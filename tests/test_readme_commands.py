"""The README's shell commands, verbatim, on a copy of the journeys' checkout right after `make reproduce`
(issue 20; support.journeys): every command of its ```bash blocks is either run here or listed with the
reason it is not, so a new command in the README fails this test until it is one or the other."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.checkout import ROOT, copy_env
from support.journeys import SNAPSHOT, load_steps

pytestmark = pytest.mark.slow

RUN = (
    "mkdir -p runs/mine",
    ".venv/bin/papermill notebooks/03_simulation.ipynb runs/mine/03.ipynb -p output_dir runs/mine",
)
"""Run in this order, offline, each as the README writes it."""
NOT_RUN = {
    "make reproduce": "the journeys' fixture (tests/conftest.py: journey) runs it in a clone, with the "
                      "official data as PERSONALENS_DATA",
    "make test": "the test suite itself",
    "make lab": "a server that runs until stopped; tests/notebooks/test_lab_browser.py starts it "
                "(`make lab ARGS=...`)",
    "git clone https://github.com/amazon-science/PersonaLens": "network",
    "export PERSONALENS_DATA=$PWD/PersonaLens/data": "needs the clone above",
    "export ANTHROPIC_API_KEY=...": "a real key",
    "export ANTHROPIC_API_KEY=... VLLM_URL=http://localhost:8000/v1": "a real key and a vLLM server",
    'make reproduce RUN=claude ARGS="--backend anthropic --passes official --users sample_50"':
        "a real key and the official data",
    ".venv/bin/python -m personalens_utils.run 03 runs/mine/03.ipynb -p output_dir runs/mine -p users 7,66":
        "users 7 and 66 of the whole default benchmark (a reproduction's); tests/notebooks/test_run_entry.py "
        "runs notebooks through the same entry point, with its checks and its output folder",
    ".venv/bin/papermill notebooks/03_simulation.ipynb runs/mine/03.ipynb -p backend anthropic "
    "-p assistant_model claude-haiku-4-5 -p users sample_30": "a real key and the official data",
    ".venv/bin/papermill notebooks/03_simulation.ipynb runs/mine/03.ipynb -p backend anthropic "
    "-p user_model claude-sonnet-4-5 -p assistant_model openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct":
        "a real key and a vLLM server",
    ".venv/bin/papermill notebooks/04_judging.ipynb runs/mine/04.ipynb -p judge_model "
    "anthropic:claude-sonnet-4-5": "a real key",
    ".venv/bin/papermill notebooks/05_ablation.ipynb runs/mine/05.ipynb -p compare_assistant "
    '"python:personalens_utils.assistants.retrieval:RetrievalAssistant?k=3&model=openai@VLLM_URL:Qwen/Qwen2.5-'
    '7B-Instruct"': "a vLLM server",
    'make reproduce RUN=mine ARGS="--compare-assistant python:personalens_utils.assistants.retrieval:'
    'RetrievalAssistant"': "a full reproduction (about 10 minutes) with one more assistant",
    ".venv/bin/papermill notebooks/08_persona_bench.ipynb runs/mine/08.ipynb":
        "about a minute; tests/persona_bench/test_persona_bench_notebook.py runs notebook 08 the same way, "
        "offline, on synthetic data",
    ".venv/bin/papermill notebooks/08_persona_bench.ipynb runs/mine/08.ipynb -p synthetic_users None "
    "-p backend anthropic": "a real key and the authors' data",
    ".venv/bin/papermill notebooks/08_persona_bench.ipynb runs/mine/08.ipynb -p prompt_set official "
    "-p persona_code ~/PERSONA": "a copy of the authors' code at ~/PERSONA",
}


def readme_commands(readme: Path) -> list[str]:
    """The commands of the README's ```bash blocks: continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.S):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                commands.append(command)
    return commands


def test_every_readme_command_is_run_or_says_why_not():
    commands = readme_commands(ROOT / "README.md")
    unlisted = sorted(set(commands) - set(RUN) - set(NOT_RUN))
    assert not unlisted, f"README commands neither run nor explained: {unlisted}"
    assert not (set(RUN) | set(NOT_RUN)) - set(commands), "listed commands the README no longer has"
    assert [c for c in commands if c in RUN] == list(RUN)  # in the README's order


@pytest.mark.official
@pytest.mark.timeout(900, func_only=True)  # the journeys' reproduction (the fixture) has its own timeout
def test_the_cheap_readme_commands_run_verbatim_after_reproduce(journey, tmp_path):
    checkout = Path(shutil.copytree(journey / SNAPSHOT, tmp_path / "checkout", symlinks=True))
    (checkout / ".venv").symlink_to(sys.prefix)  # what `make install` made
    latest = checkout / "runs" / "LATEST"
    assert latest.is_file(), f"no pass was published: {load_steps(journey)['reproduce'].failure()}"
    published = re.search(r"^folder: (\S+)", latest.read_text(encoding="utf-8"), re.M)
    store = checkout / "runs" / published[1] / "store"
    held = {path.name: path.read_bytes() for path in store.rglob("*") if path.is_file()}
    for command in RUN:
        done = subprocess.run(["bash", "-ec", command], cwd=checkout, env=copy_env(checkout),
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert (checkout / "runs" / "mine" / "03.ipynb").is_file()
    assert (checkout / "runs" / "mine" / "tables" / "table13_dialogue_stats.csv").is_file()
    assert {path.name: path.read_bytes() for path in store.rglob("*") if path.is_file()} == held  # as it was
