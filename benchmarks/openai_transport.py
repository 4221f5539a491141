"""The OpenAI-compatible backend's two HTTP transports: requests per second and CPU seconds for N calls.

    python benchmarks/openai_transport.py [--calls 400] [--concurrency 32] [--latency 0] [--repeat 3]
                                          [--transports httpx aiohttp]

Each run sends N distinct chat-completion calls through `LLMClient("openai", http_transport=...)`
(cache off, C calls in flight) to `support.fake_server.FakeLLMServer` on loopback, in its own process
so it does not share this one's GIL, waiting `--latency` seconds before each answer (0: the transport's
cost shows alone). A warm-up call opens the connections first. It prints, per transport, the best of
`--repeat` runs (other jobs on a shared machine only slow a run down) and the range: requests per
second (wall clock) and the CPU seconds this process spent on the N calls (user + system), then the
ratio of the two transports. The server's counter confirms that every call reached it once.
No network and no key: the SDK is pointed at the loopback server with a dummy key.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the `support` package

from support.fake_server import FakeLLMServer

from personalens_utils.llm import CallKind, LLMClient, Message, Request
from personalens_utils.llm.backends._http import HTTP_TRANSPORTS

MODEL = "gpt-4o-mini"


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_s: float

    def rate(self, calls: int) -> float:
        return calls / self.seconds


def requests(n: int, tag: str) -> list[Request]:
    return [Request(kind=CallKind.JUDGE, messages=(Message("user", f"{tag} {i}"),), model=MODEL)
            for i in range(n)]


def one_run(server: FakeLLMServer, transport: str, calls: int, concurrency: int, tag: str) -> Run:
    """N calls on a fresh client (its own connection pool) after one warm-up call."""
    with LLMClient("openai", base_url=f"{server.url}/v1", http_transport=transport, use_cache=False,
                   max_concurrency=concurrency, progress=False) as client:
        client.complete(requests(1, f"{tag} warm-up")[0])
        before = server.total("requests")
        cpu, start = time.process_time(), time.perf_counter()
        answers = client.run_all(requests(calls, tag))
        run = Run(time.perf_counter() - start, time.process_time() - cpu)
    reached = server.total("requests") - before
    if len(answers) != calls or reached != calls:
        raise RuntimeError(f"{transport}: {calls} calls sent, {len(answers)} answered, "
                           f"{reached} reached the server")
    return run


def span(values: list[float], fmt: str) -> str:
    return f"{min(values):{fmt}}-{max(values):{fmt}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--transports", nargs="+", choices=HTTP_TRANSPORTS, default=list(HTTP_TRANSPORTS))
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "dummy-key-for-the-fake-server")
    n = args.calls
    print(f"{n} calls, {args.concurrency} in flight, {args.latency * 1000:.0f} ms server latency, "
          f"best of {args.repeat}, cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    runs: dict[str, list[Run]] = {t: [] for t in args.transports}
    with FakeLLMServer(latency_s=args.latency, reply="echo", process=True) as server:
        for r in range(args.repeat):  # transports interleaved, so a burst of load hits both alike
            for transport in args.transports:
                runs[transport].append(one_run(server, transport, n, args.concurrency, f"{transport} {r}"))
    print(f"{'transport':<9} {'requests/s':>10} {'(range)':>11} {'CPU s':>7} {'(range)':>11} "
          f"{'CPU ms/call':>11}")
    rate, cpu = {}, {}
    for transport, measured in runs.items():
        rates, cpus = [run.rate(n) for run in measured], [run.cpu_s for run in measured]
        rate[transport], cpu[transport] = max(rates), min(cpus)
        print(f"{transport:<9} {max(rates):>10.0f} {span(rates, '.0f'):>11} {min(cpus):>7.2f} "
              f"{span(cpus, '.2f'):>11} {min(cpus) / n * 1000:>11.2f}")
    if set(runs) == {"httpx", "aiohttp"}:
        print(f"aiohttp / httpx: {rate['aiohttp'] / rate['httpx']:.2f}x the requests/s, "
              f"{cpu['aiohttp'] / cpu['httpx']:.2f}x the CPU seconds")


if __name__ == "__main__":
    main()
