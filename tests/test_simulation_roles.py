"""Each role on its own backend: the user agent and the assistant of one dialogue on two servers."""

from __future__ import annotations

import pytest
from support.fake_server import FakeLLMServer
from test_run_identity import scripted_reply
from test_simulation_support import tiny_benchmark

from personalens_utils.llm import registry
from personalens_utils.llm.clients import Clients
from personalens_utils.records import Dialogue
from personalens_utils.simulation import plan_dialogues, run_simulation
from personalens_utils.store import RunStore

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

USER = "anthropic:claude-3-5-haiku"
ASSISTANT = "openai@PL_ASSISTANT_URL:Qwen/Qwen2.5-7B-Instruct"


def test_user_agent_and_assistant_each_reach_only_their_own_server(tmp_path, monkeypatch):
    bench = tiny_benchmark(n_users=2, seed=3)
    store = RunStore(tmp_path)
    n = len(bench.scenarios)
    faults = dict(fault_rate=0.1, fault_statuses=(429, 529, 500), seed=5)
    with FakeLLMServer(reply=scripted_reply, **faults) as claude, \
            FakeLLMServer(reply=scripted_reply, **faults) as vllm:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        monkeypatch.setenv("PL_ASSISTANT_URL", vllm.url + "/v1")
        clients = Clients("offline", max_concurrency={"anthropic": 4, "openai": 2}, use_cache=False,
                          progress=False, retry_base_s=0.01, retry_cap_s=0.05)
        user, assistant = clients.spec(USER), clients.spec(ASSISTANT)
        try:
            report = run_simulation(bench, store, clients.client(user), user_model=user.model,
                                    assistant_model=assistant.model,
                                    assistant_client=clients.client(assistant))
            usage = clients.usage_frame("simulation")
        finally:
            clients.close()
        claude_paths, vllm_paths = claude.stats(), vllm.stats()
    assert report.statuses == {"terminated": n}
    dialogues = store.read(Dialogue)
    haiku = registry.resolve("claude-3-5-haiku", "anthropic")
    assert {d.user for d in dialogues} == {("anthropic", haiku)}
    assert {d.assistant for d in dialogues} == {("openai", "Qwen/Qwen2.5-7B-Instruct")}
    turns = sum(d.n_turns for d in dialogues)
    assert set(vllm_paths) == {"/v1/chat/completions"} and set(claude_paths) == {"/v1/messages"}
    assert vllm_paths["/v1/chat/completions"]["ok"] == turns == claude_paths["/v1/messages"]["ok"]
    assert report.calls == 2 * turns
    by_role = usage.groupby(["role", "backend"])["calls"].sum().to_dict()
    assert by_role == {("assistant", "openai"): turns, ("user agent", "anthropic"): turns}
    # the same roles again find everything done; the assistant on the user's backend is other work
    again = plan_dialogues(bench, store, backend="anthropic", assistant_backend="openai",
                           user_model=user.model, assistant_model=assistant.model)
    assert not again.items and again.already_done == n
    other = plan_dialogues(bench, store, backend="anthropic", user_model=user.model,
                           assistant_model=assistant.model)
    assert len(other.items) == n


def test_a_budget_with_the_assistant_on_its_own_client_is_refused(tmp_path):
    clients = Clients("offline", progress=False)
    try:
        with pytest.raises(ValueError, match="max_cost_usd is not supported yet"):
            run_simulation(tiny_benchmark(n_users=1, seed=3), RunStore(tmp_path),
                           clients.client(clients.spec("x")),
                           assistant_client=clients.client(clients.spec("anthropic:y")), max_cost_usd=1.0)
    finally:
        clients.close()
