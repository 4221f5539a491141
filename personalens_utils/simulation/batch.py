"""Simulation through the providers' batch APIs, turn by turn (docs/simulation.md, "Batch or live").

A dialogue is sequential, so batching goes in rounds: every unfinished dialogue runs the one dialogue
loop (`loop.simulate_dialogue`) as its own coroutine, and each call it makes to a role whose backend
takes batches waits in the round. When every dialogue in flight is waiting, the round's calls go out as
one batch per backend (`llm.batch.BatchRunner`: split by the API's limits, recorded in the run store on
acceptance, polled, failed entries resubmitted up to `max_rounds` times), the answers are handed back,
and the dialogues go on to their next call: the next round. A role without a batch API (the offline
backend, a Python assistant, an OpenAI-compatible server without `/v1/batches`) answers live inside the
round. The loop's rules are the same code as live: batch and live are two transports for the same
requests. An entry is keyed by the request's cache key, so a rerun after a kill finds every answered
turn in the stored batch entries (or the response cache) and submits only what was never answered.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from personalens_utils.assistants import Assistant
from personalens_utils.assistants.prompted import PromptedAssistant
from personalens_utils.llm import LLMClient, LLMError, Request, Response
from personalens_utils.llm.batch import BatchEntryError, BatchModel, BatchRunner, BatchStore, BatchUnsupported
from personalens_utils.llm.progress import progress_bar

SETTLE_STEPS = 3
"""Turns of the event loop a round waits before it goes out, so every dialogue started with it has
reached its first call."""


class RoundFailed(Exception):
    """The batch API itself failed in a round (not an entry): the dialogues waiting on it are left for a
    rerun, which polls the batches already recorded instead of submitting them again."""


@dataclass
class _Call:
    client: LLMClient
    request: Request
    future: asyncio.Future[Response]


class Rounds:
    """The batching transport: collects the calls of the dialogues in flight, answers each round in
    batches (or live, for a role without a batch API), and shows a progress line."""

    def __init__(self, store: BatchStore, *, total: int, poll_interval_s: float, max_rounds: int,
                 progress: bool = True, spent: Callable[[], float] = lambda: 0.0):
        self.store = store
        self.poll_interval_s = poll_interval_s
        self.max_rounds = max_rounds
        self.total = total
        self.spent = spent
        self.active = 0
        self.ended = 0
        self.rounds = 0
        self.waiting: list[_Call] = []
        self.flushing = False
        self.live: set[int] = set()
        self.runners: dict[int, BatchRunner] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.bar = progress_bar(total=total, desc="simulation (batch rounds)", unit="dialogue",
                                disable=not progress)

    def batches(self, client: LLMClient) -> bool:
        """Whether `client`'s calls go into batches (its backend has a batch API its server serves)."""
        return isinstance(client.backend, BatchModel) and id(client) not in self.live

    async def complete(self, client: LLMClient, request: Request) -> Response:
        """`client`'s answer to `request`: live when its backend has no batch API, else from the cache or
        from the round's batch."""
        if not self.batches(client):
            return await client.acomplete(request)
        if client.budget_reached:
            raise client.spending.refusal(f"{request.kind!s} call to {client.backend_name} (batch)")
        hit = client.cached(request)
        if hit is not None:
            return hit
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self.waiting.append(_Call(client, request, future))
        self._check()
        return await future

    @asynccontextmanager
    async def dialogue(self) -> AsyncIterator[None]:
        """One dialogue in flight: a round goes out only when every dialogue in flight waits in it."""
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
            self.ended += 1
            self.show()
            self._check()

    def close(self) -> None:
        self.show()
        self.bar.close()

    def show(self) -> None:
        """The one progress line: dialogues ended, rounds done, batches in flight and the oldest's age,
        money spent so far and projected for the whole run."""
        in_flight = [t for runner in self.runners.values() for t in runner.in_flight.values()]
        age = f", oldest {_age(time.monotonic() - min(in_flight))}" if in_flight else ""
        spent = self.spent()
        projected = spent * self.total / self.ended if self.ended else None
        money = f"${spent:.2f} spent" + (f", ~${projected:.2f} projected" if projected is not None else "")
        self.bar.n = self.ended
        self.bar.set_postfix_str(f"rounds={self.rounds}, batches in flight={len(in_flight)}{age}, {money}",
                                 refresh=True)

    def _check(self) -> None:
        if self.waiting and not self.flushing and len(self.waiting) >= self.active:
            self.flushing = True
            task = asyncio.get_running_loop().create_task(self._round())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _round(self) -> None:
        try:
            for _ in range(SETTLE_STEPS):
                await asyncio.sleep(0)
            if len(self.waiting) < self.active:
                return
            calls, self.waiting = self.waiting, []
            self.rounds += 1
            groups: defaultdict[int, list[_Call]] = defaultdict(list)
            for call in calls:
                groups[id(call.client)].append(call)
            watch = asyncio.get_running_loop().create_task(self._watch())
            try:
                await asyncio.gather(*(self._answer(group) for group in groups.values()))
            finally:
                watch.cancel()
            self.show()
        finally:
            self.flushing = False
            self._check()

    async def _watch(self) -> None:
        """Refresh the progress line while a round's batches are polled."""
        while True:
            self.show()
            await asyncio.sleep(max(1.0, self.poll_interval_s))

    async def _answer(self, calls: list[_Call]) -> None:
        """One backend's calls of a round, as one batch (split by its limits); each waiting dialogue gets
        its answer, the entry's failure, or `RoundFailed`."""
        client = calls[0].client
        if not self.batches(client):
            await self._live(calls)
            return
        runner = self.runners.get(id(client))
        if runner is None:
            runner = self.runners[id(client)] = BatchRunner(
                client, self.store, poll_interval_s=self.poll_interval_s, max_rounds=self.max_rounds,
                progress=False)
        requests = {client.cache_key(call.request): call.request for call in calls}
        try:
            outcomes = await runner.arun(requests)
        except BatchUnsupported:
            self.live.add(id(client))
            await self._live(calls)
            return
        except LLMError as err:
            for call in calls:
                call.future.set_exception(RoundFailed(str(err)))
            return
        for call in calls:
            outcome = outcomes.get(client.cache_key(call.request))
            if outcome is None:
                call.future.set_exception(RoundFailed("its batch is still in flight"))
            elif outcome.response is None:
                call.future.set_exception(BatchEntryError(f"batch entry failed: {outcome.error}"))
            else:
                client.remember(call.request, outcome.response)
                call.future.set_result(replace(outcome.response, cached=False))

    @staticmethod
    async def _live(calls: list[_Call]) -> None:
        async def one(call: _Call) -> None:
            try:
                call.future.set_result(await call.client.acomplete(call.request))
            except Exception as exc:
                call.future.set_exception(exc)

        await asyncio.gather(*(one(call) for call in calls))


def _age(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


@dataclass
class BatchedUser:
    """The user agent's client as the dialogue loop sees it in a batch run: its calls wait in the round."""

    client: LLMClient
    rounds: Rounds

    @property
    def backend_name(self) -> str:
        return self.client.backend_name

    @property
    def endpoint(self) -> str:
        """Where the user agent's model is served: identity, as on the live path."""
        return self.client.endpoint

    async def acomplete(self, request: Request) -> Response:
        return await self.rounds.complete(self.client, request)


@dataclass
class BatchedAssistant:
    """The assistant under test in a batch run: a prompted assistant's calls wait in the round; any
    other assistant (a Python class, an offline reference) answers live."""

    assistant: Assistant
    rounds: Rounds

    def __getattr__(self, name: str) -> Any:
        return getattr(self.assistant, name)

    async def respond(self, request: Request) -> Response:
        assistant = self.assistant
        if isinstance(assistant, PromptedAssistant):
            return await self.rounds.complete(assistant.role.client, assistant.prepared(request))
        return await assistant.respond(request)
