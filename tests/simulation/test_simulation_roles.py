"""Each role on its own backend: the user agent and the assistant of one dialogue on two servers."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path

import papermill
import pytest
from support.fake_server import FakeLLMServer
from support.roles import user_of
from support.scripted_models import scripted_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants import resolve_assistant
from personalens_utils.data import save_benchmark
from personalens_utils.llm import PreflightError, Usage, registry
from personalens_utils.llm.client import Clients
from personalens_utils.llm.role import Role
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.parameters import Parameters, SessionConfig
from personalens_utils.session.runtime import Runtime
from personalens_utils.simulation import SimulationConfig, estimate_simulation, plan_dialogues, run_simulation

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

USER = "anthropic:claude-3-5-haiku"
ASSISTANT = "openai@PL_ASSISTANT_URL:Qwen/Qwen2.5-7B-Instruct"
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


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
        served = f"Qwen/Qwen2.5-7B-Instruct at {vllm.url}/v1"  # a server of its own: part of the identity
        clients = Clients("offline", max_concurrency={"anthropic": 4, "openai": 2}, use_cache=False,
                          progress=False, retry_base_s=0.01, retry_cap_s=0.05)
        user, assistant = clients.spec(USER), clients.spec(ASSISTANT)
        try:
            report = run_simulation(bench, store, clients.client(user),
                                    SimulationConfig(user_model=user.model,
                                                     assistant=resolve_assistant(ASSISTANT, clients)))
            usage = clients.usage_frame("simulation")
        finally:
            clients.close()
        claude_paths, vllm_paths = claude.stats(), vllm.stats()
    assert report.statuses == {"terminated": n}
    dialogues = store.read(Dialogue)
    haiku = registry.resolve("claude-3-5-haiku", "anthropic")
    assert {d.user for d in dialogues} == {("anthropic", haiku)}
    assert {d.assistant for d in dialogues} == {("openai", served)}
    turns = sum(d.n_turns for d in dialogues)
    assert set(vllm_paths) == {"/v1/chat/completions"} and set(claude_paths) == {"/v1/messages"}
    assert vllm_paths["/v1/chat/completions"]["ok"] == turns == claude_paths["/v1/messages"]["ok"]
    assert report.calls == 2 * turns
    by_role = usage.groupby(["role", "backend"])["calls"].sum().to_dict()
    assert by_role == {("assistant", "openai"): turns, ("user agent", "anthropic"): turns}
    # the same roles again find everything done; the assistant on the user's backend is other work
    later = Clients("offline", progress=False)
    try:
        same = SimulationConfig(user_model=user.model, assistant=resolve_assistant(ASSISTANT, later))
        again = plan_dialogues(bench, store, same, user=user_of(same, "anthropic"))
    finally:
        later.close()
    assert not again.items and again.already_done == n
    mine = SimulationConfig(user_model=user.model, assistant_model=assistant.model)
    other = plan_dialogues(bench, store, mine, user=user_of(mine, "anthropic"))
    assert len(other.items) == n


def test_a_budget_counts_the_spending_of_the_assistants_own_client(tmp_path, monkeypatch):
    """The user agent runs offline (free) and the assistant on a priced model: only a limit shared by
    both clients stops the run; a rerun without a limit finishes what the budget left."""
    bench = tiny_benchmark(n_users=2, seed=3)
    store = RunStore(tmp_path)
    with FakeLLMServer(reply=scripted_reply) as claude:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        clients = Clients("offline", max_concurrency=1, use_cache=False, progress=False)
        user, assistant = clients.spec("Claude 3 Sonnet"), clients.spec("anthropic:claude-haiku-4-5")
        options = dict(user_model=user.model, assistant=resolve_assistant(str(assistant), clients))
        try:
            whole = run_simulation(bench, RunStore(tmp_path / "uncapped"), clients.client(user),
                                   SimulationConfig(**options))
            limit = whole.cost_usd / 2
            report = run_simulation(bench, store, clients.client(user),
                                    SimulationConfig(max_cost_usd=limit, **options))
            assert report.status == "budget reached"
            assert report.cost_usd >= limit  # the assistant's spending, booked in the report
            kept = store.read(Dialogue)
            assert 0 < len(kept) < len(bench.scenarios) and {d.status for d in kept} == {"terminated"}
            assert report.left_by_budget == len(bench.scenarios) - len(kept)
            rest = run_simulation(bench, store, clients.client(user), SimulationConfig(**options))
        finally:
            clients.close()
    assert rest.status == "complete" and len(store.read(Dialogue)) == len(bench.scenarios)


def test_the_estimate_prices_each_role_on_its_own_backend(tmp_path):
    bench = tiny_benchmark(n_users=1, seed=3)
    haiku = registry.resolve("claude-haiku-4-5", "anthropic")

    def rows(**options):
        config = SimulationConfig(user_model="Claude 3 Sonnet", **options)
        table = estimate_simulation(bench, RunStore(tmp_path), config, user=user_of(config, "offline")).table
        return {kind: row for kind, row in table.set_index("kind").iterrows() if kind}

    priced = rows(assistant_model="claude-haiku-4-5", assistant=Role.of("claude-haiku-4-5", "anthropic"))
    user, assistant = priced["user_turn"], priced["assistant_turn"]
    assert (user["backend"], user["cost_usd"]) == ("offline", 0.0)
    assert assistant["backend"] == "anthropic" and assistant["cost_usd"] == pytest.approx(registry.cost_usd(
        haiku, Usage(int(assistant["input_tokens"]), int(assistant["output_tokens"]))))
    assert assistant["cost_usd"] > 0
    # a Python assistant is priced on the model it declares, with the same turns
    clients = Clients("offline", progress=False)
    retrieval = "python:personalens_utils.assistants.retrieval:RetrievalAssistant"
    python = rows(assistant=resolve_assistant(f"{retrieval}?model=anthropic:claude-haiku-4-5", clients))
    clients.close()
    turn = python["assistant_turn"]
    assert (turn["backend"], turn["model"]) == ("anthropic", "claude-haiku-4-5")
    assert python["assistant_turn"]["cost_usd"] == pytest.approx(assistant["cost_usd"])
    # an assistant on a self-hosted server has no price; the user agent on Claude still has one
    qwen = "Qwen/Qwen2.5-7B-Instruct"
    self_hosted = SimulationConfig(user_model="claude-haiku-4-5", assistant_model=qwen,
                                   assistant=Role.of(qwen, "openai"))
    hosted = estimate_simulation(bench, RunStore(tmp_path), self_hosted,
                                 user=user_of(self_hosted, "anthropic"))
    by_kind = hosted.table.set_index("kind")["cost_usd"]
    assert by_kind["user_turn"] > 0 and math.isnan(by_kind["assistant_turn"])


def _displayed(path: Path, marker: str) -> str:
    """Everything the cell whose source holds `marker` displayed, as text."""
    cells = json.loads(path.read_text())["cells"]
    cell = next(c for c in cells if marker in "".join(c["source"]))
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell["outputs"])


@pytest.mark.slow
def test_notebooks_03_and_04_with_user_and_judge_on_anthropic_and_assistant_on_openai(tmp_path, monkeypatch):
    save_benchmark(tiny_benchmark(n_users=2, seed=3), tmp_path / "bench")
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))  # every answer from the servers
    n = 2 * 4
    common = {"benchmark_dir": str(tmp_path / "bench"), "run_dir": str(tmp_path / "run"),
              "backend": "anthropic"}
    faults = dict(fault_rate=0.1, fault_statuses=(429, 529, 500), seed=5, process=True)
    with FakeLLMServer(reply=scripted_reply, **faults) as claude, \
            FakeLLMServer(reply=scripted_reply, **faults) as vllm:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        monkeypatch.setenv("PL_ASSISTANT_URL", vllm.url + "/v1")
        served = f"Qwen/Qwen2.5-7B-Instruct at {vllm.url}/v1"
        papermill.execute_notebook(
            str(NOTEBOOKS / "03_simulation.ipynb"), str(tmp_path / "03.ipynb"), kernel_name="python3",
            progress_bar=False,
            parameters={**common, "output_dir": str(tmp_path / "sim"), "user_model": "claude-3-5-haiku",
                        "assistant_model": ASSISTANT},
        )
        papermill.execute_notebook(
            str(NOTEBOOKS / "04_judging.ipynb"), str(tmp_path / "04.ipynb"), kernel_name="python3",
            progress_bar=False,
            parameters={**common, "output_dir": str(tmp_path / "judging"), "judge_model": "Claude 3.5 Sonnet",
                        "dimensions": ["personalization"]},
        )
        claude_paths, vllm_paths = claude.stats(), vllm.stats()
    dialogues = RunStore(tmp_path / "run").read(Dialogue)
    assert len(dialogues) == n and {d.status for d in dialogues} == {"terminated"}
    assert {d.user_backend for d in dialogues} == {"anthropic"}
    assert {d.assistant for d in dialogues} == {("openai", served)}
    turns = sum(d.n_turns for d in dialogues)
    # the assistant's calls (a turn's request identical to an earlier one comes from the response cache)
    # and its preflight reached the OpenAI-format server; no other call did
    assert set(vllm_paths) == {"/v1/chat/completions"}
    assert n < vllm_paths["/v1/chat/completions"]["ok"] <= turns + 1
    assert set(claude_paths) == {"/v1/messages"}
    judgments = RunStore(tmp_path / "run").read(Judgment)
    assert len(judgments) == n and {j.judge for j in judgments} == {
        ("anthropic", registry.resolve("Claude 3.5 Sonnet", "anthropic"))}
    # at most the user turns, the judgments and the two preflights went to the Anthropic-format server
    assert n + n + 2 <= claude_paths["/v1/messages"]["ok"] <= turns + n + 2
    usage = _displayed(tmp_path / "03.ipynb", "run_simulation(")
    assert "user agent" in usage and "anthropic" in usage and "openai@PL_ASSISTANT_URL" in usage
    judged = _displayed(tmp_path / "04.ipynb", "run_judging(")
    assert "judge" in judged and "anthropic" in judged


def test_session_preflight_checks_each_role_on_its_own_backend(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))
    runtime = Runtime(Parameters.read(SessionConfig()), {})
    roles = {"user agent": runtime.spec("Claude 3 Sonnet", "user_model"),
             "assistant": runtime.spec(ASSISTANT, "assistant_model")}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("PL_ASSISTANT_URL", f"http://127.0.0.1:{port}/v1")
    try:
        with pytest.raises(PreflightError, match=r"assistant on the openai backend.*set by PL_ASSISTANT_URL"):
            runtime.preflight(roles)
        with FakeLLMServer() as vllm:
            runtime.close()
            monkeypatch.setenv("PL_ASSISTANT_URL", vllm.url + "/v1")
            assert runtime.preflight(roles).splitlines() == [
                "user agent: offline backend, nothing to check",
                "assistant: openai backend, model 'Qwen/Qwen2.5-7B-Instruct' answered "
                "(openai@PL_ASSISTANT_URL)"]
            assert vllm.total("ok") == 1
    finally:
        runtime.close()
