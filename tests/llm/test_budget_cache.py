"""The client writes response-cache entries on a background thread (issue 6, throughput): answers are
served while queued, shared by the clients of a cache folder, and all on disk once the client closes."""

from __future__ import annotations

import threading

from personalens_utils.llm import CallKind, Message, Request, Response, Usage
from personalens_utils.llm.cache import ResponseCache
from personalens_utils.llm.client import LLMClient


class Counting:
    name = "counting"

    def __init__(self):
        self.calls = 0

    async def acomplete(self, request: Request, model: str) -> Response:
        self.calls += 1
        text = f"answer to {request.messages[0].content}"
        return Response(text=text, usage=Usage(10, 2), backend=self.name, model=model, latency_s=0.0)


def ask(i: int) -> Request:
    return Request(kind=CallKind.JUDGE, messages=(Message("user", f"q{i}"),), model="claude-haiku-4-5")


def test_queued_answers_are_served_and_written_by_close(tmp_path, monkeypatch):
    release = threading.Event()
    slow_put = ResponseCache.put

    def held_put(self, key, response):  # the writer waits, so the answers stay queued
        release.wait(10)
        slow_put(self, key, response)

    monkeypatch.setattr(ResponseCache, "put", held_put)
    first_backend, second_backend = Counting(), Counting()
    first = LLMClient(first_backend, cache_dir=str(tmp_path), progress=False)
    answers = first.run_all([ask(i) for i in range(50)])
    second = LLMClient(second_backend, cache_dir=str(tmp_path), progress=False)
    again = second.run_all([ask(i) for i in range(50)])
    assert all(a.cached and a.text == b.text for a, b in zip(again, answers, strict=True))
    assert first_backend.calls == 50 and second_backend.calls == 0
    release.set()
    first.close()
    second.close()
    on_disk = ResponseCache(tmp_path)
    assert len(on_disk) == 50
    on_disk.close()
    with LLMClient(Counting(), cache_dir=str(tmp_path), progress=False) as third:
        assert all(r.cached for r in third.run_all([ask(i) for i in range(50)]))
