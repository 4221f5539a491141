"""The backend call: one request sent to the backend attempt after attempt, within the bound on calls in
flight (`Limiter`), each attempt's time limit and the call's deadline (`RetryPolicy`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from personalens_utils.llm.limiter import Limiter
from personalens_utils.llm.options import ClientOptions
from personalens_utils.llm.retry import Call, RetryNotice, RetryPolicy
from personalens_utils.llm.types import ChatModel, Request, Response

OnRetry = Callable[[RetryNotice], None]


class Transport:
    """A backend with the client's call policy around it; knows nothing of the cache or the books."""

    def __init__(self, backend: ChatModel, options: ClientOptions):
        self.backend = backend
        self.name = backend.name
        self.options = options
        self.limiter = Limiter(options.max_concurrency)
        self.policy = RetryPolicy(options)

    def _call(self, what: str, model: str, max_tokens: int) -> Call:
        return Call(what, self.name, model, self.options.attempt_timeout_s(max_tokens))

    async def send(
        self, request: Request, model: str, *, admit: Callable[[], None], on_retry: OnRetry
    ) -> tuple[Response, int]:
        """(the backend's answer, retries it took). `admit()` runs once, holding a slot, just before the
        first attempt: it may refuse the call (a spending limit) by raising."""
        admitted = False

        def attempt() -> Awaitable[Response]:
            nonlocal admitted
            if not admitted:
                admit()
                admitted = True
            return self.backend.acomplete(request, model)

        call = self._call(f"a {request.kind} call to", model, request.max_tokens)
        return await self.policy.run(attempt, call, slot=self.limiter.slot, on_retry=on_retry)

    async def check(self, preflight: Callable[[str], Awaitable[None]], model: str, on_retry: OnRetry) -> None:
        """The backend's one-token preflight call for `model`: throttling and server errors are retried
        like any call; no connection, or no answer within the time limit, fails at once."""
        await self.policy.run(lambda: preflight(model), self._call("a preflight check of", model, 1),
                              on_retry=on_retry, retry_unanswered=False)
