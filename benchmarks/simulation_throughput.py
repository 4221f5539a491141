"""Simulation throughput against a loopback fake server (100 ms latency) at 1, 8, 32 and 128 calls in flight.

    python benchmarks/simulation_throughput.py [--turns 5] [--waves 4] [--repeat 2]
                                               [--paths sdk sdk-httpx loopback] [--concurrency 1 8 32 128]

Each measurement is the kit's simulation path end to end: `run_simulation` over a benchmark made
by the offline generator, through `LLMClient` (response cache on, in a temporary folder, as for any
network backend) and a backend that speaks HTTP to `support.fake_server.FakeLLMServer` running in its
own process (100 ms before every answer; short replies, unique per request and never TERMINATE, so
every dialogue runs exactly `--turns` turns = 2 x turns calls, none of them a cache hit; the server's
request counter confirms it). Paths:

- `sdk`: the anthropic backend as the kit builds it by default (anthropic SDK over its aiohttp
  transport, `http_transport="aiohttp"`);
- `sdk-httpx`: the previous default, the same backend over the SDK's own httpx2 transport
  (`http_transport="httpx"`);
- `sdk-lean`: as `sdk`, with the SDK's OpenTelemetry span building switched off
  (`ANTHROPIC_OPEN_TELEMETRY=false`): the least CPU per call the SDK backend takes;
- `openai`, `openai-httpx`: the OpenAI-compatible backend as the kit builds it (openai SDK over its
  aiohttp transport) and over the SDK's own httpx2 one (`http_transport="httpx"`, the previous default);
- `loopback`: `LoopbackModel`, the kit's lean Anthropic-format client over bare keep-alive sockets
  (no SDK): what the runner and client reach when a call costs little CPU.

For C calls in flight the ideal is C / (calls per dialogue x latency) dialogues per second. Each
point runs `--waves` x C dialogues (at least 4) after a warm-up that opens the connections; the best
of `--repeat` runs is reported with the range, because other jobs on a shared machine only slow a
run down. Targets for the default anthropic path: at least 80 % of ideal at 32 and 60 % at 128; the
closing lines print both figures for the default transport and the previous one.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the `support` package

from support.fake_server import FakeLLMServer, last_user_text
from support.loopback_model import LoopbackModel

from personalens_utils.data import load_benchmark
from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.llm import CallKind, LLMClient, Message, Request
from personalens_utils.simulation import SimulationConfig, run_simulation

LATENCY_S = 0.1
MODEL, WARM_UP_MODEL = "claude-haiku-4-5", "warm-up-model"
SETTINGS = ["base"]
TARGETS = {32: 0.80, 128: 0.60}
PATHS = ("sdk", "sdk-httpx", "sdk-lean", "openai", "openai-httpx", "loopback")
TRANSPORTS = {"sdk": "default transport (aiohttp)", "sdk-httpx": "previous transport (httpx2)"}
TRACING_ENV = "ANTHROPIC_OPEN_TELEMETRY"


def short_reply(api: str, body: dict[str, Any]) -> str:
    """A short answer that differs for every request, so no two dialogues send the same request."""
    return f"Noted ({hashlib.sha256(last_user_text(api, body).encode()).hexdigest()[:16]})."


@dataclass
class Point:
    path: str
    concurrency: int
    dialogues: int
    calls: int
    seconds: float
    cpu_ms_per_call: float
    fractions: list[float]

    @property
    def fraction(self) -> float:
        return max(self.fractions)


def make_client(path: str, url: str, concurrency: int, cache_dir: str) -> LLMClient:
    """The client for one path; an SDK path is made and warmed up by one call."""
    common = {"max_concurrency": concurrency, "cache_dir": cache_dir, "use_cache": True, "progress": False}
    if path == "loopback":
        return LLMClient(LoopbackModel(url), **common)
    if path.startswith("openai"):
        transport = "httpx" if path == "openai-httpx" else "aiohttp"
        client = LLMClient("openai", base_url=f"{url}/v1", http_transport=transport, **common)
        client.complete(Request(kind=CallKind.JUDGE, messages=(Message("user", "warm-up"),), model=MODEL))
        return client
    tracing = os.environ.pop(TRACING_ENV, None)
    if path == "sdk-lean":
        os.environ[TRACING_ENV] = "false"
    transport = "httpx" if path == "sdk-httpx" else "aiohttp"
    try:  # the SDK reads the variable when its client is made, on the first call of the warm-up
        client = LLMClient("anthropic", base_url=url, http_transport=transport, **common)
        client.complete(Request(kind=CallKind.JUDGE, messages=(Message("user", "warm-up"),), model=MODEL))
    finally:
        os.environ.pop(TRACING_ENV, None)
        if tracing is not None:
            os.environ[TRACING_ENV] = tracing
    return client


def one_run(bench: Any, path: str, server: FakeLLMServer, concurrency: int, turns: int, waves: int,
            tmp: Path) -> tuple[int, float, float]:
    """(dialogues, seconds, CPU seconds of this process) for one measured run on a fresh store and cache."""
    n = max(4, waves * concurrency)
    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    client = make_client(path, server.url, concurrency, str(run_dir / "cache"))
    try:  # the warm-up opens the connections; another model name keeps its answers out of the way
        run_simulation(bench, run_dir / "warm-up", client,
                       SimulationConfig(settings=SETTINGS, max_turns=1, limit=concurrency,
                                        user_model=WARM_UP_MODEL, assistant_model=WARM_UP_MODEL))
        before = server.total("requests")
        cpu, start = time.process_time(), time.perf_counter()
        summary = run_simulation(bench, run_dir / "run", client,
                                 SimulationConfig(settings=SETTINGS, max_turns=turns, limit=n,
                                                  user_model=MODEL, assistant_model=MODEL))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        calls = server.total("requests") - before
        if summary.statuses != {"turn_cap": n} or calls != 2 * turns * n:
            raise RuntimeError(f"{path}: expected {n} dialogues of {turns} turns and {2 * turns * n} calls, "
                               f"got {dict(summary.statuses)} and {calls} calls")
        return n, elapsed, cpu
    finally:
        client.close()


def measure(bench: Any, path: str, server: FakeLLMServer, concurrency: int, args: argparse.Namespace,
            tmp: Path) -> Point:
    turns = args.turns
    calls_per_dialogue = 2 * turns
    ideal = concurrency / (calls_per_dialogue * LATENCY_S)
    runs = [one_run(bench, path, server, concurrency, turns, args.waves, tmp) for _ in range(args.repeat)]
    n, seconds, cpu = min(runs, key=lambda r: r[1])
    return Point(path, concurrency, n, n * calls_per_dialogue, seconds, cpu / (n * calls_per_dialogue) * 1e3,
                 [r[0] / r[1] / ideal for r in runs])


def report(points: list[Point], turns: int) -> None:
    calls = 2 * turns
    print(f"\n{'path':<14} {'C':>4} {'dialogues':>9} {'seconds':>8} {'dial/min':>9} {'ideal/min':>9} "
          f"{'of ideal':>9} {'range':>11} {'CPU ms/call':>11}")
    for p in points:
        ideal = p.concurrency / (calls * LATENCY_S) * 60
        low, high = min(p.fractions), max(p.fractions)
        spread = f"{low:.0%}-{high:.0%}"
        rate = p.fraction * ideal
        print(f"{p.path:<14} {p.concurrency:>4} {p.dialogues:>9} {p.seconds:>8.2f} {rate:>9.0f} "
              f"{ideal:>9.0f} {p.fraction:>9.0%} {spread:>11} {p.cpu_ms_per_call:>11.2f}")
    print()
    for path in dict.fromkeys(p.path for p in points):
        verdicts = []
        for concurrency, target in TARGETS.items():
            point = next((p for p in points if p.path == path and p.concurrency == concurrency), None)
            if point is not None:
                met = "met" if point.fraction >= target else "NOT MET"
                verdicts.append(f">= {target:.0%} at {concurrency}: {met} ({point.fraction:.0%})")
        print(f"{path:<14} " + "; ".join(verdicts))
    print()
    for path, label in TRANSPORTS.items():
        figures = {p.concurrency: p.fraction for p in points if p.path == path and p.concurrency in TARGETS}
        if figures:
            shown = ", ".join(f"{figures[c]:.0%} at {c}" for c in TARGETS if c in figures)
            print(f"anthropic backend, {label}: {shown} in flight (of ideal)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=5, help="turns per dialogue (default 5: 10 calls)")
    parser.add_argument("--waves", type=int, default=4, help="dialogues per point = waves x concurrency")
    parser.add_argument("--repeat", type=int, default=2, help="runs per point; the best is reported")
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 8, 32, 128])
    args = parser.parse_args()
    os.environ.setdefault("ANTHROPIC_API_KEY", "dummy-key-for-the-fake-server")
    os.environ.setdefault("OPENAI_API_KEY", "dummy-key-for-the-fake-server")
    warnings.filterwarnings("ignore", message="The model .* is deprecated")
    print(f"cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.2f} at start; "
          f"{LATENCY_S * 1000:.0f} ms latency, {args.turns} turns = {2 * args.turns} calls per dialogue")
    points = []
    with tempfile.TemporaryDirectory(prefix="sim-throughput-") as tmp_name:
        tmp = Path(tmp_name)
        with LLMClient("offline", progress=False) as offline:
            generate_benchmark(GenerationConfig(n_users=20), client=offline, output_dir=tmp / "bench",
                               run_dir=tmp / "generation")
        bench = load_benchmark(tmp / "bench")
        print(f"benchmark: {bench}, settings {SETTINGS}")
        # the child process imports this module by name to find the reply function
        reply = importlib.import_module(Path(__file__).stem).short_reply
        with FakeLLMServer(latency_s=LATENCY_S, reply=reply, process=True) as server:
            for path in args.paths:
                for concurrency in args.concurrency:
                    point = measure(bench, path, server, concurrency, args, tmp)
                    print(f"  {path} C={concurrency}: {point.fraction:.0%} of ideal", flush=True)
                    points.append(point)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    report(points, args.turns)


if __name__ == "__main__":
    main()
