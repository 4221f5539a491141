"""Cost you can see before you pay: every estimate row priced live, in batches and in batches with prompt
caching; batch answers and cache tokens booked at their prices; the official prompt set's stable heads
marked for the cache without changing the prompt text or the cache key."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.fake_batches import FakeBatches
from support.fake_server import FakeLLMServer
from support.roles import user_of
from support.tiny_benchmark import HISTORY, SITUATION, TASKS, rich_scenario, tiny_users

from personalens_utils.data import Benchmark, load_benchmark
from personalens_utils.llm import CallKind, LLMClient, Message, Request, Response, Usage, registry
from personalens_utils.llm.backends.anthropic import AnthropicBackend, stable_prefix
from personalens_utils.llm.budget import PRICE_COLUMNS, Tally
from personalens_utils.llm.offline import count_tokens
from personalens_utils.prompt_sets import OfficialPromptSet, ScenarioContext
from personalens_utils.prompt_sets.official.templates import load_official_prompts
from personalens_utils.simulation import AssistantSetting, SimulationConfig, user_request
from personalens_utils.simulation.runner import PAPER_TURNS, estimate_simulation

SONNET = "Claude Sonnet 4.5"
MODEL_ID = registry.resolve(SONNET, "anthropic")
PRICE = registry.price_for(MODEL_ID)
HINT = "cache_prefix_chars"
LONG = f"{HISTORY} {HISTORY}"
"""Past interactions long enough for every head to pass the 1,024-token cache minimum."""
TURNS = [{"role": "user", "content": "Could you find me a playlist?"},
         {"role": "assistant", "content": "Sure, some jazz on Spotify?"}]


def by_hand(input_tokens: float, output_tokens: float, read: float = 0, written: float = 0,
            *, batch: bool = False) -> float:
    """Anthropic's bill written out: writes 1.25x and reads 0.1x the input price, batches half of it."""
    assert PRICE is not None
    dollars = (input_tokens - read - written) * PRICE.input + output_tokens * PRICE.output
    dollars += written * 1.25 * PRICE.input + read * 0.1 * PRICE.input
    return dollars / 1e6 * (0.5 if batch else 1.0)


def rich_benchmark() -> Benchmark:
    """Users with past interactions as long as the official ones, so the heads reach the cache minimum."""
    users = [replace(u, interactions=dict.fromkeys(u.interactions, LONG)) for u in tiny_users(3, seed=3)]
    scenarios = [task.for_user(u.user_id, dict(SITUATION)) for u in users for task in TASKS]
    return Benchmark.from_records(users, TASKS, scenarios)


def test_the_estimate_prices_each_role_live_in_batches_and_in_batches_with_caching(tmp_path: Path) -> None:
    config = SimulationConfig(settings=["base+all"], task_types=["SD"], user_model=SONNET,
                              assistant_model=SONNET)
    estimate = estimate_simulation(rich_benchmark(), tmp_path / "run", config,
                                   user=user_of(config, "anthropic"))
    table = estimate.table
    roles = table[table["stage"] != "total"].set_index("kind")
    assert sorted(roles.index) == ["assistant_turn", "user_turn"]
    assert set(PRICE_COLUMNS) <= set(table.columns)
    for kind, row in roles.iterrows():
        assert row["cache_write_tokens"] > 0, f"the {kind}'s head is long enough to cache"
        # the head is written on a dialogue's first turn and read on every later one
        assert row["cache_read_tokens"] == pytest.approx((PAPER_TURNS["SD"] - 1) * row["cache_write_tokens"],
                                                         abs=1)
        tokens = (row["input_tokens"], row["output_tokens"])
        assert row["live_usd"] == pytest.approx(by_hand(*tokens)) == row["cost_usd"]
        assert row["batch_usd"] == pytest.approx(by_hand(*tokens, batch=True))
        assert row["batch_cached_usd"] == pytest.approx(
            by_hand(*tokens, row["cache_read_tokens"], row["cache_write_tokens"], batch=True))
        assert row["batch_cached_usd"] < row["batch_usd"]
    total = table.iloc[-1]
    for column in PRICE_COLUMNS:
        assert total[column] == pytest.approx(roles[column].sum())
    assert any("batch_cached_usd" in note for note in estimate.assumptions)


def test_a_head_repeated_by_later_calls_is_written_once_then_read() -> None:
    ctx = rich_scenario("SD")
    ctx = replace(ctx, interactions=dict.fromkeys(ctx.interactions, LONG))
    calls = [user_request(ctx, turns, SONNET) for turns in ([], TURNS, TURNS + TURNS)]
    system, profile = stable_prefix(calls[0])
    head = count_tokens(system) + count_tokens(profile)
    assert head >= 1024
    rows = {}
    for backend in ("anthropic", "openai", "bedrock"):
        tally = Tally(backend)
        tally.add_requests("simulation", calls, output_tokens=50)
        rows[backend] = tally.estimate([]).table.iloc[0]
    anthropic = rows["anthropic"]
    assert (anthropic["cache_write_tokens"], anthropic["cache_read_tokens"]) == (head, 2 * head)
    tokens = (anthropic["input_tokens"], anthropic["output_tokens"])
    assert anthropic["batch_cached_usd"] == pytest.approx(by_hand(*tokens, 2 * head, head, batch=True))
    # OpenAI caches by prefix on its own and bills no write: a first sighting is plain input
    assert rows["openai"]["batch_cached_usd"] == pytest.approx(by_hand(*tokens, 2 * head, batch=True))
    bedrock = rows["bedrock"]  # the kit marks nothing there
    assert bedrock["cache_write_tokens"] == bedrock["cache_read_tokens"] == 0
    assert bedrock["batch_cached_usd"] == bedrock["batch_usd"] == pytest.approx(bedrock["live_usd"] / 2)


class Answering:
    """A backend whose answers carry fixed usage with cache tokens, as a batch or as a live answer."""

    name = "anthropic"

    def __init__(self, batch: bool):
        self.batch = batch

    async def acomplete(self, request: Request, model: str) -> Response:
        return Response(text="ok", usage=Usage(1000, 100, cache_read_tokens=4000, cache_write_tokens=2000),
                        backend=self.name, model=model, latency_s=0.0, batch=self.batch)


def test_the_books_take_a_batch_answer_at_the_batch_price_and_cache_tokens_at_theirs() -> None:
    ask = Request(kind=CallKind.USER_TURN, messages=(Message("user", "hello"),), model=SONNET)
    spent = {}
    for batch in (False, True):
        with LLMClient(Answering(batch), use_cache=False, progress=False) as client:
            answer = client.complete(ask)
            books = client.usage_frame()
        spent[batch] = float(books["cost_usd"].sum())
        assert answer.cost_usd == pytest.approx(spent[batch])
        assert float(books["cost_uncached_usd"].sum()) == pytest.approx(spent[batch])
    # 1,000 plain, 4,000 read, 2,000 written input tokens (7,000 in all) and 100 output tokens
    assert spent[False] == pytest.approx(by_hand(7000, 100, read=4000, written=2000))
    assert spent[True] == pytest.approx(by_hand(7000, 100, read=4000, written=2000, batch=True))


def test_the_anthropic_batch_transport_flags_its_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    ask = Request(kind=CallKind.JUDGE, messages=(Message("user", "Score it."),), model=SONNET)
    model = registry.resolve(SONNET, "anthropic")

    async def submit_and_read(backend: AnthropicBackend) -> list[Any]:
        batch_id = await backend.create_batch([("entry-1", ask, model)])
        while await backend.batch_status(batch_id) != "ended":
            await asyncio.sleep(0)
        results = await backend.batch_results(batch_id)
        await backend.aclose()
        return results

    with FakeLLMServer() as server:
        FakeBatches(polls_in_progress=0).install(server)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        (result,) = asyncio.run(submit_and_read(AnthropicBackend(base_url=server.url)))
    assert result.outcome == "succeeded" and result.response.batch


@pytest.fixture(scope="module")
def official_prompts(official_code: Path, official_data: Path) -> tuple[OfficialPromptSet, ScenarioContext]:
    bench = load_benchmark(official_data, users=[7])
    scenario = next(iter(bench.iter_scenarios(["SD"])))
    return OfficialPromptSet(load_official_prompts(official_code)), ScenarioContext.of(scenario,
                                                                                       bench.user(7))


def test_official_user_and_assistant_turns_carry_a_breakpoint_after_their_stable_head(
        official_prompts: tuple[OfficialPromptSet, ScenarioContext], monkeypatch: pytest.MonkeyPatch) -> None:
    prompts, ctx = official_prompts
    setting = AssistantSetting.parse("base+all")
    user = prompts.user_request(ctx, TURNS, SONNET)
    assistant = prompts.assistant_request(setting, ctx, TURNS, SONNET)
    sent: list[dict[str, Any]] = []

    def reply(api: str, body: dict[str, Any]) -> str:
        sent.append(body)
        return "Noted."

    with FakeLLMServer(reply=reply) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        with LLMClient("anthropic", use_cache=False, progress=False) as client:
            client.complete(user)
            client.complete(assistant)
    for request, body in zip((user, assistant), sent, strict=True):
        text = request.messages[0].content
        blocks = body["messages"][0]["content"]
        assert [b.get("cache_control") for b in blocks] == [{"type": "ephemeral"}, None]
        assert "".join(b["text"] for b in blocks) == text, "the prompt text is sent unchanged"
        head, rest = blocks[0]["text"], blocks[1]["text"]
        assert head.strip() and TURNS[0]["content"] not in head and TURNS[0]["content"] in rest
        assert body["system"] == request.system
        # what the old builders sent: the same text and cache key, without the hint
        plain = replace(request, context={k: v for k, v in request.context.items() if k != HINT})
        assert plain.cache_key("anthropic", MODEL_ID) == request.cache_key("anthropic", MODEL_ID)
    # the head is what every later turn repeats: the same with a longer transcript
    later = prompts.user_request(ctx, TURNS + TURNS, SONNET)
    cut = later.context[HINT]
    assert later.messages[0].content[:cut] == sent[0]["messages"][0]["content"][0]["text"]
