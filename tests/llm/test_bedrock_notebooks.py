"""The bedrock backend in a notebook run: a Llama assistant, a Claude user agent and a Claude judge, all on
Amazon Bedrock, here the loopback fake reached through AWS_ENDPOINT_URL_BEDROCK_RUNTIME."""

from __future__ import annotations

import json
from pathlib import Path

import papermill
import pytest
from support.fake_bedrock import FakeBedrock
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import save_benchmark
from personalens_utils.llm import registry
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ASSISTANT = "bedrock:llama-3-1-8b-instruct-v1"  # the official code's short name
USER = "claude-3-5-haiku-v1"
JUDGE = "Claude Sonnet 4.5"


def _displayed(path: Path, marker: str) -> str:
    """Everything the cell whose source holds `marker` displayed, as text."""
    cells = json.loads(path.read_text())["cells"]
    cell = next(c for c in cells if marker in "".join(c["source"]))
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell["outputs"])


def _text(body: dict) -> str:
    return "\n".join(block["text"] for block in body.get("system", [])) + "\n" + "\n".join(
        block["text"] for message in body["messages"] for block in message["content"])


@pytest.mark.slow
def test_notebooks_03_and_04_run_a_llama_assistant_and_claude_judge_on_bedrock(tmp_path, monkeypatch):
    save_benchmark(tiny_benchmark(n_users=2, seed=3), tmp_path / "bench")
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))  # every answer from the endpoint
    aws = {"AWS_ACCESS_KEY_ID": "AKIDNOTEBOOK", "AWS_SECRET_ACCESS_KEY": "not-a-secret",
           "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
    for name, value in aws.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
                 "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    n = 2 * 4
    common = {"benchmark_dir": str(tmp_path / "bench"), "run_dir": str(tmp_path / "run"),
              "backend": "bedrock"}
    faults = dict(fault_rate=0.1, fault_statuses=(429, 503, 500), seed=5, process=True)
    with FakeBedrock(**faults) as bedrock:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.url)
        papermill.execute_notebook(
            str(NOTEBOOKS / "03_simulation.ipynb"), str(tmp_path / "03.ipynb"), kernel_name="python3",
            progress_bar=False,
            parameters={**common, "output_dir": str(tmp_path / "sim"), "user_model": USER,
                        "assistant_model": ASSISTANT, "max_concurrency": 4},
        )
        papermill.execute_notebook(
            str(NOTEBOOKS / "04_judging.ipynb"), str(tmp_path / "04.ipynb"), kernel_name="python3",
            progress_bar=False,
            parameters={**common, "output_dir": str(tmp_path / "judging"), "judge_model": JUDGE,
                        "max_concurrency": 4},
        )
        log = bedrock.requests()
        injected = bedrock.total("injected")
    llama, haiku, sonnet = (registry.resolve(m, "bedrock") for m in ("Llama 3.1 8B Instruct", USER, JUDGE))
    assert (llama, haiku, sonnet) == ("us.meta.llama3-1-8b-instruct-v1:0",
                                      "us.anthropic.claude-3-5-haiku-20241022-v1:0",
                                      "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    store = RunStore(tmp_path / "run")
    dialogues = store.read(Dialogue)
    assert len(dialogues) == n and {d.status for d in dialogues} == {"terminated"}
    assert {d.user for d in dialogues} == {("bedrock", haiku)}
    assert {d.assistant for d in dialogues} == {("bedrock", llama)}
    judgments = store.read(Judgment)
    assert {j.judge for j in judgments} == {("bedrock", sonnet)}
    assert len({j.dialogue_id for j in judgments}) == n and len(judgments) == 7 * n
    assert {j.status for j in judgments} == {"ok"}

    # every call went through Converse, each role's to its own model id; faults were injected and retried
    assert {e["operation"] for e in log} == {"Converse"}
    assert {e["model_id"] for e in log} == {llama, haiku, sonnet}
    assert injected > 0 and {e["status"] for e in log} == {200, 429, 503, 500}
    answered = [e for e in log if e["status"] == 200 and e["body"]["inferenceConfig"]["maxTokens"] > 1]
    by_model = {model: [_text(e["body"]) for e in answered if e["model_id"] == model]
                for model in (llama, haiku, sonnet)}
    assistant_turns = sum(t.role == "assistant" for d in dialogues for t in d.turns)
    # at most one call per assistant turn: dialogues whose requests repeat another's (the scripted user
    # says the same to the same assistant) are answered from the cache when that one finished first,
    # so how many fewer depends on timing (once 7 calls for 8 dialogues)
    assert 0 < len(by_model[llama]) <= assistant_turns
    assert not any("VERDICT" in text or "Personalization Score" in text for text in by_model[llama])
    assert all("VERDICT" in text or "Score" in text for text in by_model[sonnet])
    assert len(by_model[sonnet]) >= len(judgments)  # one call per judgment, plus turn-level judging
    # each preflight made one one-token call per model
    preflights = [e["model_id"] for e in log
                  if e["status"] == 200 and e["body"]["inferenceConfig"]["maxTokens"] == 1]
    assert sorted(preflights) == sorted([llama, haiku, sonnet])

    simulated = _displayed(tmp_path / "03.ipynb", "run_simulation(")
    assert "bedrock" in simulated and llama in simulated and haiku in simulated
    assert "assistant" in simulated and "user agent" in simulated
    judged = _displayed(tmp_path / "04.ipynb", "run_judging(")
    assert "bedrock" in judged and sonnet in judged
