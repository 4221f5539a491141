"""PERSONA Bench official mode against the authors' own code (extracted from ../shared/data): their
unchanged prompt makers run on the kit's synthetic data, the kit's items pick the same targets, the
requests the kit sends equal, item by item, those their evaluators send for the same file, and the
kit's metrics equal their metric functions.

3.3 is left out of the request comparison: the authors' 3.3 evaluator loads SBERT by hub name at
import (no network here) and asks for ten candidates (`n=10`), which the kit does not (docs/persona_bench.md).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from support.fake_server import FakeLLMServer
from support.persona_bench import AzureRecorder, extract_code, import_script

from personalens_utils.llm import LLMClient
from personalens_utils.persona_bench import metrics as M
from personalens_utils.persona_bench.items import iter_items
from personalens_utils.persona_bench.official import MAKERS, make_official_prompts, read_official_items
from personalens_utils.persona_bench.runner import run_items
from personalens_utils.persona_bench.synthetic import write_synthetic
from personalens_utils.runstore.store import RunStore

USERS = 12


@pytest.fixture(scope="module")
def official(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(the authors' code, the synthetic data, the folder of the prompts their makers wrote)."""
    root = tmp_path_factory.mktemp("persona-official")
    code = extract_code(root / "code")
    data = write_synthetic(root / "data", USERS, seed=3)
    prompts = root / "prompts"
    make_official_prompts(prompts, code=code, data=data)
    return code, data, prompts


def test_the_authors_prompt_makers_write_every_file_and_the_kit_picks_their_targets(official):
    _, data, prompts = official
    for (task, setting), (_, name) in MAKERS.items():
        lines = (prompts / name).read_text(encoding="utf-8").splitlines()
        assert lines, f"{task} {setting}: {name} is empty"
    theirs = {
        (i.task, i.setting, i.target.removeprefix("task_"))
        for i in read_official_items(prompts, data=data)
        if i.task != "3.3"
    }
    ours = {(i.task, i.setting, i.target) for i in iter_items(data, tasks=("3.1", "3.2"))}
    assert ours == theirs and len(ours) > 0
    counts = {}
    for item in iter_items(data, tasks=("3.3",)):
        counts[item.setting] = counts.get(item.setting, 0) + 1
    official_33 = [i for i in read_official_items(prompts, data=data, tasks=("3.3",), settings=("P-Conv",))]
    assert counts["P-Conv"] == len(official_33)


def _kit_bodies(monkeypatch, items, tmp_path: Path, reply: str) -> list[dict]:
    bodies: list[dict] = []

    def record(api: str, body: dict) -> str:
        bodies.append(body)
        return reply

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeLLMServer(reply=record) as server:
        client = LLMClient(
            "openai", base_url=f"{server.url}/v1", max_concurrency=4, progress=False, use_cache=False
        )
        report = run_items(client, items, RunStore(tmp_path / "store"), "gpt-4.1")
        client.close()
    assert report.errors == 0
    return bodies


def _comparable(bodies: list[dict]) -> list[str]:
    return sorted(json.dumps({k: v for k, v in b.items() if k != "model"}, sort_keys=True) for b in bodies)


@pytest.mark.parametrize(
    ("task", "setting", "script", "reply"),
    [
        ("3.1", "P-Conv", "3.1/GPT.py", "positive"),
        ("3.1", "P-NonConv", "3.1/GPT.py", "negative"),
        ("3.1", "NP-Conv", "3.1/GPT.py", "positive"),
        ("3.2", "P-Conv", "3.2/GPT.py", "12"),
        ("3.2", "P-NonConv", "3.2/GPT.py", "-4"),
        ("3.2", "NP-Conv", "3.2/GPT.py", "7"),
    ],
)
def test_official_requests_equal_the_authors_evaluator_item_by_item(
    official, monkeypatch, tmp_path, task, setting, script, reply
):
    code, data, prompts = official
    file = prompts / MAKERS[(task, setting)][1]
    recorder = AzureRecorder(lambda prompt: reply)
    monkeypatch.chdir(tmp_path)
    evaluator = import_script(code / "LLMEvaluators" / script, f"persona_eval_{task.replace('.', '_')}")
    config = evaluator.MODEL_CONFIGS["gpt-4.1"]
    with FakeLLMServer() as server:
        recorder.install(server)
        config.update(azure_endpoint=server.url, api_key="test-key", api_version="2024-02-15-preview")
        if task == "3.1":
            evaluator.evaluate_model("gpt-4.1", str(file))
        else:
            evaluator.DATASET_PATHS["With"] = str(file)
            evaluator.evaluate_model("gpt-4.1", "With", output_folder=str(tmp_path / "out"))
    lines = file.read_text(encoding="utf-8").splitlines()
    assert len(recorder.bodies) == len(lines) > 0
    assert all(set(b) == {"model", "messages", "max_tokens", "temperature"} for b in recorder.bodies)
    items = list(read_official_items(prompts, data=data, tasks=(task,), settings=(setting,)))
    kit = _kit_bodies(monkeypatch, items, tmp_path, reply)
    assert _comparable(kit) == _comparable(recorder.bodies)


def test_the_kits_metrics_equal_the_authors_metric_functions(official, tmp_path):
    code = official[0]
    eval31 = import_script(code / "LLMEvaluators" / "3.1" / "GPT.py", "persona_metrics_3_1")
    eval32 = import_script(code / "LLMEvaluators" / "3.2" / "GPT.py", "persona_metrics_3_2")
    rng = random.Random(7)
    for n in (5, 40, 333):
        truth = [rng.choice(("positive", "negative")) for _ in range(n)]
        pred = [t if rng.random() < 0.7 else rng.choice(("positive", "negative")) for t in truth]
        acc, f1, mcc = eval31.calculate_metrics(truth, pred)
        ours = M.classification(truth, pred)
        assert math.isclose(ours["Accuracy"], acc, abs_tol=1e-6)
        assert math.isclose(ours["F1"], f1, abs_tol=1e-6)
        assert math.isclose(ours["MCC"], mcc, abs_tol=1e-6)
        fast = M._fast_classification(M._labels(truth), M._labels(pred))
        assert all(math.isclose(fast[k], ours[k], abs_tol=1e-9) for k in ours)
        scores = [rng.choice((-1, 1)) * rng.randint(4, 120) for _ in range(n)]
        guesses = [s + rng.randint(-30, 30) for s in scores]
        theirs = eval32.calculate_regression_metrics(scores, guesses)
        ours32 = M.regression(scores, guesses)
        assert math.isclose(ours32["RMSE"], theirs["rmse"], abs_tol=1e-6)
        assert math.isclose(ours32["MAE"], theirs["mae"], abs_tol=1e-6)
