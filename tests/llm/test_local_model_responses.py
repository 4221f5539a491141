"""Replies a real local model gave (llama.cpp's server with SmolLM2-135M, recorded in
tests/fixtures/local_model/), served to the openai backend through a mock transport: what the fake
servers never sent (a reply cut at the token limit, an overflowing context, an empty reply) is kept
as a flag, refused with what to change, or retried, and nothing of it is lost in the caches."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from personalens_utils.llm import CallKind, FatalError, LLMClient, Message, Request, RetriesExhaustedError
from personalens_utils.llm.backends.openai import OpenAIBackend
from personalens_utils.llm.cache import ResponseCache
from personalens_utils.runstore.records import BatchEntry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "local_model"
LOCAL_URL = "http://127.0.0.1:8077/v1"
MAX_RETRIES = 2


def recorded(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


class Recorded:
    """A mock endpoint answering every call with one recorded (status, body), counting the calls."""

    def __init__(self, body: dict[str, Any], status: int = 200):
        self.status, self.answer, self.calls = status, body, 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        return httpx2.Response(self.status, json=self.answer)


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    made: list[LLMClient] = []

    def make(endpoint: Recorded, **kw: Any) -> LLMClient:
        client = LLMClient("openai", base_url=LOCAL_URL, cache_dir=str(tmp_path / "cache"),
                           http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)),
                           use_cache=kw.pop("use_cache", False), progress=False, retry_base_s=0.001,
                           max_retries=MAX_RETRIES, **kw)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def ask(text: str = "Book me a table for two.") -> Request:
    return Request(kind=CallKind.ASSISTANT_TURN, model="smollm2", system="You are a helpful assistant.",
                   messages=(Message("user", text),), max_tokens=8)


def with_content(content: str | None) -> dict[str, Any]:
    body = copy.deepcopy(recorded("stop"))
    body["choices"][0]["message"]["content"] = content
    return body


def test_a_complete_reply_keeps_text_and_usage_and_is_not_cut_off(local) -> None:
    body = recorded("stop")
    response = local(Recorded(body)).complete(ask())
    assert response.text == body["choices"][0]["message"]["content"]
    assert response.usage.input_tokens == 29 and response.usage.output_tokens == 58
    assert response.cut_off is False


def test_a_reply_cut_at_the_token_limit_is_flagged(local) -> None:
    response = local(Recorded(recorded("length"))).complete(ask())
    assert response.text == "Europe is a continent that has been shaped"
    assert response.cut_off is True


def test_a_cut_off_reply_stays_cut_off_on_a_cache_hit(local) -> None:
    endpoint = Recorded(recorded("length"))
    client = local(endpoint, use_cache=True)
    client.complete(ask())
    again = client.complete(ask())
    assert endpoint.calls == 1 and again.cached and again.cut_off is True


def test_a_cache_entry_written_before_the_flag_reads_as_not_cut_off(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    cache._open().set("old", {"text": "Hello.", "backend": "openai", "model": "smollm2", "latency_s": 0.1,
                              "usage": {"input_tokens": 1, "output_tokens": 2, "cache_read_tokens": 0,
                                        "cache_write_tokens": 0}})
    hit = cache.get("old")
    cache.close()
    assert hit is not None and hit.text == "Hello." and hit.cut_off is False


def test_an_overflowing_context_is_fatal_at_once_and_says_what_to_change(local) -> None:
    overflow = recorded("context_overflow")
    endpoint = Recorded(overflow["body"], status=overflow["status"])
    with pytest.raises(FatalError) as caught:
        local(endpoint).complete(ask("word " * 5000))
    assert endpoint.calls == 1, "a context that does not fit is not sent again"
    message = str(caught.value)
    assert caught.value.status == 400 and "'smollm2'" in message
    assert "maximum context length is 4096 tokens" in message
    assert "context window" in message and "not retried" in message


@pytest.mark.parametrize("content", ["", None])
def test_an_empty_reply_is_retried_and_then_named_as_the_failure(local, content: str | None) -> None:
    endpoint = Recorded(with_content(content))
    with pytest.raises(RetriesExhaustedError) as caught:
        local(endpoint).complete(ask())
    assert endpoint.calls == MAX_RETRIES + 1
    message = str(caught.value)
    assert "the reply was empty" in message and "'smollm2'" in message and "127.0.0.1:8077" in message


def test_a_batch_answer_cut_at_the_token_limit_is_flagged_and_stored_so() -> None:
    backend = OpenAIBackend(base_url=LOCAL_URL)
    line = {"custom_id": "c1", "response": {"status_code": 200, "body": recorded("length")}}
    result = backend._batch_result(line)
    assert result.outcome == "succeeded" and result.response is not None and result.response.cut_off
    entry = {"id": "c1", "key": "k", "batch_id": "b", "outcome": "succeeded", "backend": "openai",
             "error": None, "retryable": True, "text": result.response.text, "model": "smollm2",
             "usage": result.response.usage.to_dict(), "cost_usd": None}
    assert BatchEntry.from_json({**entry, "cut_off": True}).to_json() == {**entry, "cut_off": True}
    assert BatchEntry.from_json(entry).to_json() == entry, "an entry not cut off is stored as before"


def test_an_empty_batch_answer_is_an_entry_error_sent_again() -> None:
    line = {"custom_id": "c1", "response": {"status_code": 200, "body": with_content("")}}
    result = OpenAIBackend(base_url=LOCAL_URL)._batch_result(line)
    assert result.outcome == "errored" and result.retryable and "the reply was empty" in result.error
