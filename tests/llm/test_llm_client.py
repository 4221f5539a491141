"""LLMClient mechanics with a scripted backend: retries, errors, cache, concurrency bound, books."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from personalens_utils.llm import (
    CallKind,
    FatalError,
    LLMClient,
    Message,
    Request,
    Response,
    RetriesExhaustedError,
    RetryableError,
    Usage,
)


class Scripted:
    """Fails according to a script of exceptions (None = answer), then answers; tracks concurrency."""

    name = "anthropic"

    def __init__(self, script: list[Exception | None] | None = None, delay: float = 0.0):
        self.script = list(script or [])
        self.delay = delay
        self.calls = 0
        self.in_flight = 0
        self.peak = 0

    async def acomplete(self, request: Request, model: str) -> Response:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            step = self.script.pop(0) if self.script else None
            if step is not None:
                raise step
            text = f"{model}|{request.messages[-1].content}|{request.temperature}"
            return Response(
                text=text, usage=Usage(100, 20), backend=self.name, model=model, latency_s=self.delay
            )
        finally:
            self.in_flight -= 1


def req(text: str = "hello", **kw) -> Request:
    kw.setdefault("model", "claude-sonnet-4-5")
    return Request(kind=kw.pop("kind", CallKind.ASSISTANT_TURN), messages=(Message("user", text),), **kw)


@pytest.fixture
def make_client(tmp_path) -> Iterator:
    made: list[LLMClient] = []

    def make(backend, **kw) -> LLMClient:
        kw.setdefault("cache_dir", str(tmp_path / "cache"))
        kw.setdefault("retry_base_s", 0.001)
        kw.setdefault("progress", False)
        client = LLMClient(backend, **kw)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def test_retries_are_counted_on_the_response_and_in_the_books(make_client) -> None:
    backend = Scripted([RetryableError("429", status=429), RetryableError("529", status=529)])
    client = make_client(backend, use_cache=False)
    response = client.complete(req())
    assert response.retries == 2
    assert backend.calls == 3
    assert response.text == "claude-sonnet-4-5-20250929|hello|None"
    frame = client.usage_frame()
    assert frame.loc[0, "retries"] == 2 and frame.loc[0, "calls"] == 1
    assert client.totals()["retries"] == 2


def test_retry_after_is_honoured_up_to_the_cap(make_client) -> None:
    client = make_client(Scripted([RetryableError("429", status=429, retry_after=0.3)]), use_cache=False)
    started = time.perf_counter()
    client.complete(req())
    assert time.perf_counter() - started >= 0.3
    capped = make_client(
        Scripted([RetryableError("429", status=429, retry_after=120.0)]), use_cache=False, retry_cap_s=0.05
    )
    started = time.perf_counter()
    capped.complete(req())
    assert time.perf_counter() - started < 2.0


def test_exhausted_retries_raise_and_say_so(make_client) -> None:
    backend = Scripted([RetryableError("boom", status=500)] * 10)
    client = make_client(backend, use_cache=False, max_retries=3)
    with pytest.raises(RetriesExhaustedError, match="after 4 attempts") as info:
        client.complete(req())
    assert info.value.attempts == 4 and backend.calls == 4
    assert client.totals()["errors"] == 1 and client.totals()["retries"] == 3


def test_fatal_errors_are_not_retried(make_client) -> None:
    backend = Scripted([FatalError("set ANTHROPIC_API_KEY", status=401)])
    client = make_client(backend, use_cache=False)
    with pytest.raises(FatalError, match="ANTHROPIC_API_KEY"):
        client.complete(req())
    assert backend.calls == 1


def test_cache_hits_cost_nothing_but_record_their_price(make_client) -> None:
    backend = Scripted()
    client = make_client(backend)
    first = client.complete(req())
    second = client.complete(req())
    assert backend.calls == 1
    assert not first.cached and second.cached and second.text == first.text
    assert first.cost_usd > 0 and second.cost_usd == 0
    row = client.usage_frame().iloc[0]
    assert row["calls"] == 2 and row["cache_hits"] == 1
    assert row["cost_usd"] == pytest.approx(first.cost_usd)
    assert row["cost_uncached_usd"] == pytest.approx(2 * first.cost_usd)


def test_cache_is_shared_between_clients_and_can_be_bypassed(make_client) -> None:
    make_client(Scripted()).complete(req())
    backend = Scripted()
    assert make_client(backend).complete(req()).cached and backend.calls == 0
    assert not make_client(backend, use_cache=False).complete(req()).cached
    assert not make_client(backend).complete(req(), use_cache=False).cached
    assert backend.calls == 2


def test_offline_backend_does_not_cache_by_default(make_client) -> None:
    client = make_client("offline")
    assert client.use_cache is False
    assert make_client("offline", use_cache=True).use_cache is True


def test_offline_cache_keys_depend_on_the_seed(make_client) -> None:
    a, b = make_client("offline", seed=1, use_cache=True), make_client("offline", seed=2, use_cache=True)
    assert a._namespace != b._namespace


def test_concurrency_is_bounded(make_client) -> None:
    backend = Scripted(delay=0.01)
    client = make_client(backend, use_cache=False, max_concurrency=4)
    results = client.run_all([req(f"m{i}") for i in range(40)])
    assert backend.peak == 4
    assert [r.text.split("|")[1] for r in results] == [f"m{i}" for i in range(40)]


def test_run_all_takes_coroutines_and_callables_and_keeps_order(make_client) -> None:
    client = make_client(Scripted(), use_cache=False)

    async def dialogue(i: int) -> str:
        first = await client.acomplete(req(f"a{i}"))
        second = await client.acomplete(req(f"b{i}"))
        return first.text + second.text

    results = client.run_all([dialogue(0), lambda: dialogue(1)])
    assert results[0].count("|a0|") == 1 and results[1].count("|b1|") == 1
    assert client.totals()["calls"] == 4


def test_run_all_failures_raise_or_are_returned(make_client) -> None:
    client = make_client(
        Scripted([None, FatalError("bad request", status=400)]), use_cache=False, max_concurrency=1
    )
    with pytest.raises(FatalError):
        client.run_all([req("x"), req("y"), req("z")], pool_size=1)
    client = make_client(
        Scripted([None, FatalError("bad request", status=400)]), use_cache=False, max_concurrency=1
    )
    results = client.run_all([req("x"), req("y"), req("z")], pool_size=1, return_exceptions=True)
    assert isinstance(results[1], FatalError) and results[0].text and results[2].text


def test_stages_are_booked_separately(make_client) -> None:
    client = make_client(Scripted(), use_cache=False, stage="default")
    client.complete(req("a"))
    with client.stage("judging"):
        client.complete(req("b", kind=CallKind.JUDGE, task="personalization"))
        client.run_all([req("c", kind=CallKind.JUDGE, task="task_completion")])
    client.run_all([req("d")], stage="simulation")
    frame = client.usage_frame()
    assert set(frame["stage"]) == {"default", "judging", "simulation"}
    judging = client.usage_frame("judging")
    assert sorted(judging["task"]) == ["personalization", "task_completion"]
    assert judging["calls"].sum() == 2 and judging["input_tokens"].sum() == 200
    assert client.current_stage == "default"


def test_complete_works_inside_a_running_event_loop(make_client) -> None:
    client = make_client(Scripted(), use_cache=False)

    async def notebook_cell() -> str:
        return client.complete(req("from a notebook")).text

    assert "from a notebook" in asyncio.run(notebook_cell())


def test_models_resolve_and_unknown_ids_pass_through(make_client) -> None:
    client = make_client(Scripted(), use_cache=False)
    assert client.complete(req(model="Claude Haiku 4.5")).model == "claude-haiku-4-5-20251001"
    # A retired paper model is called through its successor on a real backend.
    assert client.complete(req(model="Claude 3.5 Haiku")).model == "claude-haiku-4-5-20251001"
    assert client.complete(req(model="my-finetune")).model == "my-finetune"
    with pytest.raises(FatalError, match="names no model"):
        client.complete(req(model=""))


def test_unpriced_models_are_counted_as_such(make_client) -> None:
    client = make_client(Scripted(), use_cache=False)
    response = client.complete(req(model="my-finetune"))
    assert response.cost_usd == 0
    assert client.usage_frame().loc[0, "unpriced_calls"] == 1


def test_repr_and_errors_for_bad_settings() -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        LLMClient(Scripted(), max_concurrency=0)
    with pytest.raises(ValueError, match="unknown backend"):
        LLMClient("gpt-from-mars")
    with pytest.raises(TypeError, match="only apply"):
        LLMClient(Scripted(), base_url="http://x")
    assert "anthropic" in repr(LLMClient(Scripted(), use_cache=False))


def test_blocking_calls_from_inside_the_pool_are_refused(make_client) -> None:
    client = make_client(Scripted(), use_cache=False)

    async def misuse() -> None:
        client.complete(req())

    with pytest.raises(RuntimeError, match="await acomplete"):
        client.run_all([misuse()])
