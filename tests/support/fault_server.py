"""A loopback server that misbehaves on purpose: for tests of what the kit does when a model server fails.

`FaultServer` is a `FakeLLMServer` (same wire formats, counters, `process=True`, 127.0.0.1 only) whose
model requests meet a fixed list of faults, in arrival order, before it answers normally:

- ``"ok"``: answer normally (to let some requests through before the faults start);
- ``"delay"``: wait `delay_s`, then answer normally;
- ``"hang"``: read the request and never answer; the connection is closed after `hang_s`, so no
  test can wait forever on it;
- ``"drop"``: close the connection without a word;
- ``"garbage"``: a 200 whose body is not JSON;
- an HTTP status (``429``, ``500``, ``529``, ...): an error body in the API's own format (429 with
  ``retry-after: retry_after_s``).

Each fault is served `times` times before the next (so faults are bounded in count, and in time by
`hang_s`); ``stats()`` counts them per path under their names ("hang", "drop", "garbage", "delay") or
status, beside "requests" (requests that reached the fault list or were answered). ::

    with FaultServer(["hang"], times=50, hang_s=30) as server:          # every call hangs
        client = LLMClient("anthropic", base_url=server.url, request_timeout_s=1, call_deadline_s=3)
    with FaultServer([529, "drop", "garbage"]) as server:               # three faults, then answers
        ...
    with FaultServer(["ok"] + ["hang"] * 20) as server:                 # one answer, then 20 hangs
        ...
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .fake_server import FakeLLMServer

Fault = str | int
KINDS = ("ok", "delay", "hang", "drop", "garbage")


class FaultServer(FakeLLMServer):
    """`FakeLLMServer` with `faults` served in order, `times` each, before normal answers."""

    def __init__(self, faults: Sequence[Fault], *, times: int = 1, hang_s: float = 30.0, delay_s: float = 1.0,
                 **options: Any):
        for fault in faults:
            if not (fault in KINDS or (isinstance(fault, int) and 400 <= fault <= 599)):
                raise ValueError(f"unknown fault {fault!r}: use one of {KINDS} or an HTTP status 400-599")
        if times < 1 or hang_s <= 0 or delay_s < 0:
            raise ValueError(f"need times >= 1, hang_s > 0, delay_s >= 0; got {times}, {hang_s}, {delay_s}")
        if options.get("host", "127.0.0.1") != "127.0.0.1":
            raise ValueError("a fault server listens on 127.0.0.1 only")
        super().__init__(**options)
        self.faults = [fault for fault in faults for _ in range(times)]
        self.hang_s, self.delay_s = hang_s, delay_s
        self._config.update(faults=list(faults), times=times, hang_s=hang_s, delay_s=delay_s)

    def _next_fault(self, path: str) -> Fault | None:
        with self._lock:
            if not self.faults:
                return None
            fault = self.faults.pop(0)
            if fault == "ok":
                return None
            self.counters[path][str(fault)] += 1
            if fault != "delay":
                self.counters[path]["requests"] += 1
                self.counters[path]["faults"] += 1
        return fault

    async def _intercept(self, path: str, writer: asyncio.StreamWriter, *, close: bool) -> bool | None:
        fault = self._next_fault(path)
        if fault is None:
            return None
        if fault == "delay":
            await asyncio.sleep(self.delay_s)
            return None
        if fault == "hang":
            await asyncio.sleep(self.hang_s)
            writer.close()
            return False
        if fault == "drop":
            writer.transport.abort()
            return False
        if fault == "garbage":
            await self._send(writer, 200, "<html>this is not JSON", {"content-type": "application/json"},
                             close=close)
            return not close
        assert isinstance(fault, int)
        api = "openai" if path.endswith("/chat/completions") else "anthropic"
        extra = {"retry-after": f"{self.retry_after_s:g}"} if fault == 429 else {}
        await self._send(writer, *self._error(api, fault, f"injected fault {fault}", extra), close=close)
        return not close
