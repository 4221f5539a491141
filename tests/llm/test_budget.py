"""Cost control: the spending limit refuses new calls, lets calls in flight finish, and leaves runs
resumable; estimates count the calls and tokens a run really makes."""

from __future__ import annotations

import asyncio
import math
from collections import Counter

import pytest
from support.roles import judge_of, user_of
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import judging
from personalens_utils.judging import JudgingConfig
from personalens_utils.llm import CallKind, Message, Request, Response, Usage, registry
from personalens_utils.llm.budget import BudgetReachedError, Tally, Volume, request_tokens
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.offline import OfflineBackend, count_tokens
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation
from personalens_utils.simulation.runner import PAPER_TOKENS_PER_TURN, USER_SHARE, estimate_simulation

MODEL = "claude-haiku-4-5"
SETTINGS = ["base", "base+I"]


class Priced(OfflineBackend):
    """The offline answers under another backend name, so the client prices them like a real model's."""

    name = "priced"

    def __init__(self, delay_s: float = 0.0):
        super().__init__(seed=0)
        self.delay_s = delay_s
        self.keys: list[str] = []
        self.requests: list[Request] = []
        self.in_flight = 0

    async def acomplete(self, request: Request, model: str) -> Response:
        self.keys.append(request.cache_key(self.name, model))
        self.requests.append(request)
        self.in_flight += 1
        try:
            await asyncio.sleep(self.delay_s)
            return self.respond(request, model)
        finally:
            self.in_flight -= 1


class Flat:
    """A backend whose every answer costs the same: 1,000 input and 100 output tokens."""

    name = "flat"

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.calls = 0

    async def acomplete(self, request: Request, model: str) -> Response:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return Response(text="ok", usage=Usage(1000, 100), backend=self.name, model=model, latency_s=0.0)


CALL_COST = registry.cost_usd(MODEL, Usage(1000, 100))


def ask(i: int) -> Request:
    return Request(kind=CallKind.JUDGE, messages=(Message("user", f"question {i}"),), model=MODEL)


def test_the_limit_refuses_new_calls_once_reached():
    backend = Flat()
    with LLMClient(backend, max_cost_usd=2.5 * CALL_COST, max_concurrency=1, use_cache=False,
                   progress=False) as client:
        results = client.run_all([ask(i) for i in range(6)], return_exceptions=True)
        assert client.budget_reached
        totals = client.totals()
    answered = [r for r in results if isinstance(r, Response)]
    refused = [r for r in results if isinstance(r, BudgetReachedError)]
    # after two calls 2 x cost < limit, so a third starts; after it nothing more does
    assert len(answered) == backend.calls == 3 and len(refused) == 3
    assert client.refused_calls == 3 and totals["errors"] == 0 and totals["calls"] == 3
    assert "spending limit reached" in str(refused[0]) and "max_cost_usd" in str(refused[0])


def test_calls_in_flight_finish_and_the_overshoot_is_bounded_by_concurrency():
    backend = Flat(delay_s=0.05)
    with LLMClient(backend, max_concurrency=4, use_cache=False, progress=False) as client:
        with client.spending_limit(CALL_COST / 2):
            results = client.run_all([ask(i) for i in range(20)], return_exceptions=True)
        assert not client.budget_reached  # the limit ended with its block
        client.complete(ask(99))
    answered = sum(isinstance(r, Response) for r in results)
    assert answered == 4  # the first four were in flight together before any was paid for
    assert sum(isinstance(r, BudgetReachedError) for r in results) == 16
    assert backend.calls == 5


def test_limits_are_relative_nested_and_validated(tmp_path):
    with LLMClient(Flat(), use_cache=False, progress=False) as client:
        client.complete(ask(0))
        with client.spending_limit(CALL_COST * 1.5):  # counted from what was spent before the block
            client.complete(ask(1))
            client.complete(ask(2))
            with client.spending_limit(CALL_COST * 10), pytest.raises(BudgetReachedError):
                client.complete(ask(3))  # the tighter outer limit still holds
        with pytest.raises(ValueError, match="max_cost_usd"), client.spending_limit(-1):
            pass


def test_cache_hits_are_free_and_answered_past_the_limit(tmp_path):
    backend = Flat()
    with LLMClient(backend, cache_dir=str(tmp_path), progress=False) as client:
        client.complete(ask(0))
        with client.spending_limit(0):
            assert client.complete(ask(0)).cached
            with pytest.raises(BudgetReachedError):
                client.complete(ask(1))
    assert backend.calls == 1


@pytest.fixture(scope="module")
def bench():
    return tiny_benchmark(n_users=6, seed=3)


def simulate(bench, run_dir, backend, cache_dir, concurrency=4, **options):
    """`cache_dir=None`: no response cache (every request reaches the backend)."""
    with LLMClient(backend, max_concurrency=concurrency, cache_dir=str(cache_dir),
                   use_cache=cache_dir is not None, progress=False) as client:
        return run_simulation(bench, run_dir, client,
                              SimulationConfig(settings=SETTINGS, user_model=MODEL, assistant_model=MODEL,
                                               **options))


def test_simulation_stops_at_the_budget_and_a_rerun_finishes_without_repeating_a_call(bench, tmp_path):
    total = len(bench.scenarios) * len(SETTINGS)
    first_backend = Priced(delay_s=0.002)
    first = simulate(bench, tmp_path / "run", first_backend, tmp_path / "cache", concurrency=2,
                     max_cost_usd=0.03)
    stored = RunStore(tmp_path / "run").records(Dialogue)
    assert first.status == "budget reached" and first.left_by_budget > 0
    assert 0 < first.stored == len(stored) < total and first.stored + first.left_by_budget == total
    assert all(r["status"] != "error" for r in stored)  # cut dialogues are left out, not stored as errors
    assert "budget reached" in first.message() and first.frame()["status"].iloc[0] == "budget reached"

    second_backend = Priced()
    second = simulate(bench, tmp_path / "run", second_backend, tmp_path / "cache", max_cost_usd=100.0)
    assert second.status == "complete" and second.already_done == first.stored
    assert second.planned == total - first.stored == second.stored
    counts = Counter(r["id"] for r in RunStore(tmp_path / "run").records(Dialogue))
    assert len(counts) == total and set(counts.values()) == {1}
    # every call the cut dialogues had made came from the response cache: nothing was asked again
    assert first_backend.keys and second_backend.keys
    assert not set(first_backend.keys) & set(second_backend.keys)


def test_judging_stops_at_the_budget_and_resumes(bench, tmp_path):
    simulate(bench, tmp_path / "run", OfflineBackend(), tmp_path / "cache")
    store = RunStore(tmp_path / "run")
    contexts = judging.benchmark_contexts(bench)
    dims = ["task_completion", "personalization", "naturalness_user"]
    with LLMClient(Priced(delay_s=0.002), max_concurrency=4, use_cache=False, progress=False) as client:
        first = judging.run_judging(store, client, contexts,
                                    JudgingConfig(judge_model=MODEL, dimensions=dims, max_cost_usd=0.01,
                                                  offline_dialogues=True))
    assert first.status == "budget reached" and first.left_by_budget > 0
    stored = store.records(Judgment)
    assert stored and all(r["status"] != "error" for r in stored)
    with LLMClient(Priced(), max_concurrency=4, use_cache=False, progress=False) as client:
        config = JudgingConfig(judge_model=MODEL, dimensions=dims, offline_dialogues=True)
        second = judging.run_judging(store, client, contexts, config)
    assert second.status == "complete" and second.details["judgments_done_before"] == len(stored)
    ids = Counter(r["id"] for r in store.records(Judgment))
    assert len(ids) == len(store.records(Dialogue)) * len(dims) and set(ids.values()) == {1}


def test_a_budget_with_batch_judging_is_refused_before_anything_is_sent(bench, tmp_path):
    simulate(bench, tmp_path / "run", OfflineBackend(), tmp_path / "cache")
    store = RunStore(tmp_path / "run")
    with (
        LLMClient(Priced(), max_concurrency=4, use_cache=False, progress=False) as client,
        pytest.raises(ValueError, match="max_cost_usd cannot stop a Message Batch"),
    ):
        judging.run_judging(store, client, judging.benchmark_contexts(bench),
                            JudgingConfig(judge_model=MODEL, batch=True, max_cost_usd=1.0))
    assert client.totals()["calls"] == 0 and not store.records(Judgment)


def test_simulation_estimate_counts_the_prompts_a_one_turn_run_sends(bench, tmp_path):
    config = SimulationConfig(settings=SETTINGS, user_model=MODEL, assistant_model=MODEL, max_turns=1)
    estimate = estimate_simulation(bench, tmp_path / "run", config, user=user_of(config, Priced.name),
                                   sample=10_000)
    backend = Priced()
    simulate(bench, tmp_path / "run", backend, None, max_turns=1)
    table = estimate.table.set_index("kind")
    n = len(bench.scenarios) * len(SETTINGS)
    assert table.loc["user_turn", "calls"] == table.loc["assistant_turn", "calls"] == n
    user_in = sum(request_tokens(r) for r in backend.requests if r.kind == CallKind.USER_TURN)
    system_in = sum(count_tokens(r.system) for r in backend.requests if r.kind == CallKind.ASSISTANT_TURN)
    per_turn = sum(PAPER_TOKENS_PER_TURN[t] for t in bench.scenarios["task_type"])
    user_says = per_turn * USER_SHARE * len(SETTINGS)
    assert table.loc["user_turn", "input_tokens"] == user_in  # the opening prompts exactly
    assert table.loc["assistant_turn", "input_tokens"] == pytest.approx(system_in + user_says, abs=1)
    price = registry.cost_usd(MODEL, Usage(int(table.loc["user_turn", "input_tokens"]),
                                           int(table.loc["user_turn", "output_tokens"])))
    assert table.loc["user_turn", "cost_usd"] == pytest.approx(price, rel=1e-3)
    assert estimate.total_cost_usd == pytest.approx(table["cost_usd"].iloc[:-1].sum())
    assert any("Table 13" in note for note in estimate.assumptions)
    # once stored, nothing is left to pay for
    again = estimate_simulation(bench, tmp_path / "run", config, user=user_of(config, backend.name))
    assert again.calls == 0


def test_simulation_estimate_prices_by_backend_and_model(bench, tmp_path):
    base = SimulationConfig(settings=["base"])
    offline = estimate_simulation(bench, tmp_path, base, user=user_of(base, "offline"))
    assert offline.total_cost_usd == 0 and offline.calls > 0
    assert any("offline" in note for note in offline.assumptions)
    llama = SimulationConfig(user_model="llama-3.1-8b", settings=["base"])
    unpriced = estimate_simulation(bench, tmp_path, llama, user=user_of(llama, "openai"))
    assert math.isnan(unpriced.total_cost_usd)
    assert any("llama-3.1-8b" in note for note in unpriced.assumptions)
    sd, md = (estimate_simulation(bench, tmp_path, config, user=user_of(config, "anthropic"))
              for config in (SimulationConfig(task_types=[t], settings=["base"]) for t in ("SD", "MD")))
    per_sd = sd.calls / (bench.scenarios["task_type"] == "SD").sum()
    per_md = md.calls / (bench.scenarios["task_type"] == "MD").sum()
    assert per_sd == pytest.approx(2 * 4.74, abs=0.1) and per_md == pytest.approx(2 * 5.64, abs=0.2)


def test_judging_estimate_counts_the_calls_judging_makes(bench, tmp_path):
    simulate(bench, tmp_path / "run", OfflineBackend(), tmp_path / "cache")
    store = RunStore(tmp_path / "run")
    contexts = judging.benchmark_contexts(bench)
    judge = dict(judge_model=MODEL, offline_dialogues=True)  # the dialogues are offline-made
    config = JudgingConfig(**judge)
    hosted = judge_of(config, "anthropic")
    estimate = judging.estimate_judging(store, contexts, config, judge=hosted, sample=10_000)
    batch = judging.estimate_judging(store, contexts, JudgingConfig(batch=True, **judge), judge=hosted)
    backend = Priced()
    with LLMClient(backend, max_concurrency=4, use_cache=False, progress=False) as client:
        judging.run_judging(store, client, contexts, JudgingConfig(**judge))
    firsts = [r for r in backend.requests if not r.context.get("retry")]
    assert estimate.calls == len(firsts)
    assert estimate.table["input_tokens"].iloc[-1] == sum(request_tokens(r) for r in firsts)
    assert batch.total_cost_usd == pytest.approx(estimate.total_cost_usd * registry.BATCH_DISCOUNT, rel=0.01)
    assert judging.estimate_judging(store, contexts, config, judge=judge_of(config, backend.name)).calls == 0


def test_estimate_prices_the_successor_of_a_retired_model() -> None:
    def priced(backend: str) -> float:
        tally = Tally(backend)
        tally.add("simulation", "assistant_turn", "Claude 3 Haiku", Volume(calls=1, input_tokens=1e6))
        return float(tally.estimate([]).table.loc[0, "cost_usd"])

    assert priced("anthropic") == pytest.approx(registry.lookup("Claude Haiku 4.5").price.input)
    assert priced("bedrock") == pytest.approx(registry.lookup("Claude 3 Haiku").price.input)
