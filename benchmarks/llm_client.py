"""LLMClient speed: its own overhead, concurrency against a local fake server, the SDK paths, the cache.

    python benchmarks/llm_client.py [--calls 200] [--latency 0.05] [--concurrency 32]

Prints, for N calls to a fake server that waits `latency` seconds per request (run in a child
process so it does not share the client's GIL):

- the bare client (LoopbackModel) at max_concurrency=C (best of three warm runs) and 1, against the
  ideal ceil(N/C) x latency;
- the anthropic and openai SDK backends at C, best of three (their request building, validation and connection
  pool cost a few ms of CPU per call, which shows at 50 ms latency and vanishes at real API latencies);
- an SDK run with 20 % injected 429/529/500 faults: every call answered, retries counted;
- the client's overhead per call with a no-op backend, and a response-cache hit.
No network and no key: the SDKs are pointed at the loopback server with a dummy key.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the `support` package

from support.fake_server import FakeLLMServer
from support.loopback_model import LoopbackModel

from personalens_utils.llm import CallKind, LLMClient, Message, Request, Response, Usage


class NoOp:
    name = "noop"

    async def acomplete(self, request: Request, model: str) -> Response:
        return Response(text="ok", usage=Usage(10, 2), backend=self.name, model=model, latency_s=0.0)


def requests(n: int, tag: str) -> list[Request]:
    return [
        Request(kind=CallKind.JUDGE, messages=(Message("user", f"{tag} {i}"),), model="claude-haiku-4-5")
        for i in range(n)
    ]


def timed(client: LLMClient, items: list[Request]) -> float:
    started = time.perf_counter()
    client.run_all(items)
    return time.perf_counter() - started


def best_of_3(client: LLMClient, n: int, tag: str) -> float:
    """A warm-up call, then the fastest of three runs: other load on the machine only adds time."""
    client.complete(requests(1, f"{tag} warm-up")[0])
    return min(timed(client, requests(n, f"{tag} run {run}")) for run in range(3))


def report(elapsed: float, ideal: float) -> str:
    return f"{elapsed:7.3f} s  ideal {ideal:6.3f} s  x{elapsed / ideal:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    n, latency, conc = args.calls, args.latency, args.concurrency
    os.environ.setdefault("ANTHROPIC_API_KEY", "dummy-key-for-the-fake-server")
    os.environ.setdefault("OPENAI_API_KEY", "dummy-key-for-the-fake-server")
    ideal = math.ceil(n / conc) * latency
    print(f"{n} calls, {latency * 1000:.0f} ms server latency, cpu count {os.cpu_count()}")

    with FakeLLMServer(latency_s=latency, reply="echo", process=True) as server:
        for c in (conc, 1):
            with LLMClient(
                LoopbackModel(server.url), max_concurrency=c, use_cache=False, progress=False
            ) as client:
                elapsed = best_of_3(client, n, f"bare{c}") if c > 1 else timed(client, requests(n, "bare1"))
            best = math.ceil(n / c) * latency
            print(f"bare client   max_concurrency={c:>3}: {report(elapsed, best)}")
        for backend, suffix in (("anthropic", ""), ("openai", "/v1")):
            with LLMClient(
                backend, base_url=server.url + suffix, max_concurrency=conc, use_cache=False, progress=False
            ) as client:
                elapsed = best_of_3(client, n, backend)
            print(f"{backend:<9} SDK max_concurrency={conc:>3}: {report(elapsed, ideal)}")

    with FakeLLMServer(fault_rate=0.2, seed=1, reply="echo", process=True) as server:
        with LLMClient(
            "anthropic",
            base_url=server.url,
            max_concurrency=conc,
            use_cache=False,
            retry_base_s=0.01,
            progress=False,
        ) as client:
            responses = client.run_all(requests(n, "faults"))
            retries = sum(r.retries for r in responses)
        print(
            f"anthropic SDK with 20% faults: {len(responses)}/{n} answered, {retries} retries, "
            f"server injected {server.total('injected')} faults"
        )

    with LLMClient(NoOp(), use_cache=False, progress=False) as client:
        items = requests(20_000, "noop")
        elapsed = timed(client, items)
    print(f"client overhead (no-op backend): {elapsed / len(items) * 1e6:.0f} us per call")

    with (
        tempfile.TemporaryDirectory() as cache_dir,
        LLMClient(NoOp(), cache_dir=cache_dir, progress=False) as client,
    ):
        items = requests(2_000, "cache")
        client.run_all(items)
        elapsed = timed(client, items)
    print(f"response-cache hit: {elapsed / len(items) * 1e6:.0f} us per call")


if __name__ == "__main__":
    main()
