"""200 dialogues through the real anthropic backend, pointed at a local fake server that fails 10% of
attempts with 429, 529 or 500: nothing is lost, and every retry is counted."""

from __future__ import annotations

from typing import Any

import pytest
from support.fake_server import FakeLLMServer, last_user_text
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.llm import LLMClient
from personalens_utils.prompt_templates.dialogue import USER_SYSTEM
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

MODEL = "claude-3-5-haiku"


def scripted_reply(api: str, body: dict[str, Any]) -> str:
    """User agent: ask, then thank and end after the first assistant reply. Assistant: a fixed answer."""
    if body.get("system") != USER_SYSTEM:
        return "Here is what I found for you."
    prompt = last_user_text(api, body)
    history = prompt.split("# The conversation so far")[-1].split("# Your next message")[0]
    seen = history.count("ASSISTANT:") if "# The conversation so far" in prompt else 0
    return "Could you help me with this?" if seen < 1 else "That's great, thanks! TERMINATE"


def test_two_hundred_dialogues_survive_injected_server_errors(tmp_path, monkeypatch):
    bench = tiny_benchmark(n_users=50, seed=2)
    assert len(bench.scenarios) == 200
    faults = dict(fault_rate=0.1, fault_statuses=(429, 529, 500), seed=11)
    with FakeLLMServer(**faults, reply=scripted_reply) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        with LLMClient("anthropic", max_concurrency=16, use_cache=False, progress=False,
                       retry_base_s=0.01, retry_cap_s=0.05) as client:
            summary = run_simulation(bench, tmp_path, client,
                                     SimulationConfig(user_model=MODEL, assistant_model=MODEL))
            booked = client.usage_frame("simulation")
        injected = server.total("injected")
        requests = server.total("requests")

    records = RunStore(tmp_path).records(Dialogue)
    assert len(records) == 200 and len({r["scenario_id"] for r in records}) == 200
    assert summary.statuses == {"terminated": 200}
    assert all(r["n_turns"] == 2 and r["backend"] == "anthropic" for r in records)
    assert injected > 0.05 * requests  # about 10% of attempts failed
    assert summary.retries == injected == sum(r["retries"] for r in records)
    assert int(booked["retries"].sum()) == injected
    assert summary.frame()["retries"].iloc[0] == injected
    assert requests == 200 * 4 + injected
