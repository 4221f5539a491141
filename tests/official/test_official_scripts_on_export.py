"""Kit dialogues exported to the official layout, then judged and summarised by the official scripts
themselves (`src/evaluate_dialogue.py`, `util/gather_evaluation.py`, unchanged, as subprocesses) against a
loopback fake Bedrock endpoint; their output imports back, and what the official gather script prints
is what the kit reads under scoring="official".

The fake judge writes some answers in a form only the strict rule reads (markdown around the label,
"Verdict: **True**"), so the official and the strict readings differ where they should.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fake_bedrock import BedrockCall, FakeBedrock, keyword_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import save_benchmark
from personalens_utils.export.official import (
    export_official,
    import_official_run,
    parse_model_folder,
    plan_export,
)
from personalens_utils.judging import score_under
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures import scores
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

pytestmark = pytest.mark.slow

TC_JUDGE, JUDGE = "claude-3-sonnet-v1", "claude-3-5-sonnet-v2"
"""Task completion is judged under the name gather_evaluation.py reads it from; the rest by its default."""
DIMENSIONS = [("personalization", ""), ("task_completion", ""), ("naturalness", "_user"),
              ("naturalness", "_asst"), ("coherence", "_user"), ("coherence", "_asst")]


def decorated_reply(call: BedrockCall) -> str:
    """The fake's answer; every third judge answer in markdown, which only the strict rule reads."""
    text = keyword_reply(call)
    if "Score: " not in text and "VERDICT: " not in text:
        return text
    if int(hashlib.sha256(call.prompt.encode()).hexdigest(), 16) % 3:
        return text
    text = re.sub(r"^(\w+ Score): (\d)", r"**\1:** \2", text, flags=re.MULTILINE)
    return re.sub(r"^VERDICT: (\w+)", r"Verdict: **\1**", text)


@pytest.fixture(scope="module")
def official_run(official_code: Path, tmp_path_factory: pytest.TempPathFactory):
    """The official code folder, after the kit's export and the official scripts ran on it."""
    tmp = tmp_path_factory.mktemp("official_scripts")
    bench = tiny_benchmark(n_users=2)
    save_benchmark(bench, tmp / "bench")
    store = RunStore(tmp / "run")
    run_simulation(bench, store, LLMClient("offline", progress=False),
                   SimulationConfig(settings=["base", "base+all"]))
    code = tmp / "code"
    shutil.copytree(official_code, code)
    (code / "data").symlink_to(tmp / "bench")
    plan = plan_export(store, code, benchmark=bench)
    assert plan.ok, plan.problems
    exported = export_official(store, code, benchmark=bench)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(tmp / "none"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "none"), "DATA_DIR": str(tmp / "caches"),
           "HOME": str(tmp)}
    gathered: dict[tuple[str, str, str], str] = {}
    with FakeBedrock(responder=decorated_reply) as bedrock:
        env["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] = bedrock.url
        for folder, task_type, first, last in plan.runs:
            md = ["-md"] if task_type == "MD" else []
            for family, ext in DIMENSIONS:
                judge = ["-i", TC_JUDGE] if family == "task_completion" else []
                side = ["-a"] if ext == "_asst" else []
                official(code, env, "src.evaluate_dialogue", "-s", str(first), "-e", str(last), "-m", folder,
                         "-d", family, *judge, *side, *md)
        calls = len(bedrock.requests(operation="InvokeModel"))
    for folder, task_type, first, last in plan.runs:
        md = ["-md"] if task_type == "MD" else []
        for family, ext in DIMENSIONS:
            out = official(code, env, "util.gather_evaluation", "-s", str(first), "-e", str(last),
                           "-m", folder, "-d", family, *(["-f", ext] if ext else []), *md)
            gathered[(folder, task_type, family + ext)] = out
    return store, exported, code, calls, gathered, plan.runs


def official(code: Path, env: dict[str, str], module: str, *args: str) -> str:
    """Run one official script unchanged from its folder; its stdout, or a failure with its stderr."""
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=code, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{module} {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def test_official_scripts_judge_the_export_and_their_output_imports_back(official_run, tmp_path):
    store, exported, code, calls, gathered, runs = official_run
    dialogues = store.read(Dialogue)
    assert len(exported) == len(dialogues) == 2 * 4 * 2
    assert calls == len(dialogues) * len(DIMENSIONS)
    back = RunStore(tmp_path / "back")
    run = import_official_run(code, into=back)
    assert sorted(run.dialogues, key=lambda d: d.id) == sorted(dialogues, key=lambda d: d.id)
    assert len(run.judgments) == len(dialogues) * len(DIMENSIONS)
    assert {j.dialogue_id for j in run.judgments} == {d.id for d in dialogues}
    assert {(j.judge_model_id, j.prompt_set, j.backend) for j in run.judgments} == {
        (TC_JUDGE, "official", "imported"), (JUDGE, "official", "imported")}
    differ = [j for j in run.judgments
              if score_under("strict", j.dimension, j.status, j.score, j.raw)
              != score_under("official", j.dimension, j.status, j.score, j.raw)]
    assert differ and {j.dimension for j in differ} >= {"task_completion", "personalization"}

    tidy = {rule: {judge: scores.load_scores(back, judge_model=judge, scoring=rule)
                   for judge in (TC_JUDGE, JUDGE)} for rule in ("strict", "official")}
    assert len(runs) == 4
    for folder, task_type, _, _ in runs:
        setting = parse_model_folder(folder)[1].name
        for family, ext in DIMENSIONS:
            dimension = {"_user": f"{family}_user", "_asst": f"{family}_assistant"}.get(ext, family)
            judge = TC_JUDGE if family == "task_completion" else JUDGE
            printed = gathered[(folder, task_type, family + ext)]
            factor = 100 if family == "task_completion" else 1
            means = {}
            for rule in ("strict", "official"):
                frame = tidy[rule][judge]
                part = frame[(frame["assistant_setting"] == setting) & (frame["task_type"] == task_type)
                             & (frame["dimension"] == dimension)]
                means[rule] = part["score"].mean() * factor
                assert int(re.search(r"Analyzed (\d+) files", printed)[1]) == len(part)
            label = rf"Average {family} rating: (\S+)"
            shown = re.search(r"Average Task Completion Rate: (\S+)%" if factor == 100 else label, printed)[1]
            if math.isnan(means["official"]):  # no score at all: the official script prints 0
                assert shown == "0.00" and "Score is not parsed" in printed
            else:
                assert f"{means['official']:.2f}" == shown
