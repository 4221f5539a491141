"""The cacheable share of input tokens over a simulated run of official scenarios, simulation and judging.

    python benchmarks/prompt_cache_share.py [DATA_DIR] [--archive X.tar.xz] [--users sample_50] [--limit 10]
                                            [--settings base base+all]

The dialogues and judgments are made by the offline backend (so the dialogue lengths are the offline
simulation's, not a model's); every request is recorded as the anthropic backend would send it.
For each request the stable prefix is what `llm.backends.anthropic.cache_marked` marks with a cache
breakpoint (the system prompt, or the system prompt and the profile head of the first message).
Tokens are the offline estimate (words x 4/3). Printed per call kind:

- input: all input tokens; marked: the share inside a marked prefix;
- cacheable: the share in prefixes at least the model's minimum cacheable length;
- read: the share a cache would serve (every sighting of a cacheable prefix after its first), and
  the input cost with caching relative to without, at the models' prices (writes cost 1.25x).

The read share assumes cached prefixes stay warm while they are reused (Anthropic keeps an entry
five minutes after its last use); a run's calls on one dialogue, and on one user's dialogues, come
close together. Without DATA_DIR the data comes from $PERSONALENS_DATA, data/personalens/ or the
archive in ../shared/data, extracted to a temporary folder.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the `support` package

from support.official_data import official_data_for_script

from personalens_utils import judging
from personalens_utils.data import load_benchmark, resolve_users
from personalens_utils.llm import LLMClient, Request, Response, registry
from personalens_utils.llm.backends.anthropic import cache_marked, min_cacheable_tokens, stable_prefix
from personalens_utils.llm.offline import OFFLINE_LABEL, OfflineBackend, count_tokens
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation


@dataclass
class _Sums:
    requests: int = 0
    input: int = 0
    marked: int = 0
    cacheable: int = 0
    read: int = 0
    cost: float = 0.0
    cost_cached: float = 0.0


class Recording(OfflineBackend):
    """The offline backend, noting for each request its input tokens and its stable prefix."""

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self.sums: defaultdict[str, _Sums] = defaultdict(_Sums)
        self._seen: set[tuple[str, str]] = set()

    async def acomplete(self, request: Request, model: str) -> Response:
        self._note(request, model)
        return self.respond(request, model)

    def _note(self, request: Request, model: str) -> None:
        total = count_tokens(request.system + "".join(m.content for m in request.messages))
        system, prefix = stable_prefix(request)
        marked_system, marked_messages = cache_marked(request, model)
        marked = isinstance(marked_system, list) or isinstance(marked_messages[0]["content"], list)
        tokens = count_tokens(system + prefix) if marked else 0
        cacheable = tokens if tokens >= min_cacheable_tokens(model) else 0
        key = (model, system + prefix)
        read = cacheable if key in self._seen else 0
        if cacheable:
            self._seen.add(key)
        sums = self.sums[str(request.kind)]
        sums.requests += 1
        sums.input += total
        sums.marked += tokens
        sums.cacheable += cacheable
        sums.read += read
        sums.cost += registry.cost_usd(model, registry.Usage(input_tokens=total)) or 0.0
        cached = registry.Usage(input_tokens=total - cacheable, cache_read_tokens=read,
                                cache_write_tokens=cacheable - read)
        sums.cost_cached += registry.cost_usd(model, cached) or 0.0


def _measure(data_dir: Path, users: list[int], settings: list[str]) -> None:
    started = time.perf_counter()
    bench = load_benchmark(data_dir, users=users)
    backend = Recording()
    with tempfile.TemporaryDirectory() as run_dir:
        store = RunStore(run_dir)
        client = LLMClient(backend, max_concurrency=16, progress=False)
        summary = run_simulation(bench, store, client, SimulationConfig(settings=settings))
        report = judging.run_judging(store, client, judging.benchmark_contexts(bench))
    print(f"{OFFLINE_LABEL}: {len(users)} users, {len(bench.scenarios)} scenarios x settings {settings} "
          f"-> {summary.stored} dialogues, {report.stored} judgments "
          f"({time.perf_counter() - started:.0f} s)")
    minimum = [min_cacheable_tokens(m) for m in ("Claude 3 Sonnet", "Claude 3.5 Sonnet")]
    print("models: simulation Claude 3 Sonnet, judge Claude 3.5 Sonnet (minimum cacheable prefix "
          f"{minimum[0]} and {minimum[1]} tokens)")
    print(f"{'calls':<16}{'requests':>9}{'input tok':>12}{'marked':>8}{'cacheable':>10}{'read':>7}"
          f"{'cost':>7}")
    total = _Sums()
    for kind, sums in sorted(backend.sums.items()):
        _row(kind, sums)
        for name in vars(total):
            setattr(total, name, getattr(total, name) + getattr(sums, name))
    _row("all", total)
    print(f"cacheable share of input tokens: {total.cacheable / total.input:.1%} "
          f"(read from the cache: {total.read / total.input:.1%}); "
          f"input cost with caching: {total.cost_cached / total.cost:.1%} of the cost without")


def _row(name: str, s: _Sums) -> None:
    print(f"{name:<16}{s.requests:>9,}{s.input:>12,}{s.marked / s.input:>8.1%}"
          f"{s.cacheable / s.input:>10.1%}{s.read / s.input:>7.1%}{s.cost_cached / s.cost:>7.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", nargs="?", type=Path, help="official benchmark folder")
    parser.add_argument("--archive", type=Path, help="official .tar.xz to extract into a temporary folder")
    parser.add_argument("--users", default="sample_50", help="sample name (default sample_50)")
    parser.add_argument("--limit", type=int, default=10, help="first N users of the sample (0: all)")
    parser.add_argument("--settings", nargs="+", default=["base", "base+all"], help="assistant settings")
    args = parser.parse_args()
    users = resolve_users(args.users) or []
    users = users[: args.limit] if args.limit else users
    with official_data_for_script(args.data_dir, args.archive) as data_dir:
        if data_dir is None:
            print("SKIPPED: no official data found (pass DATA_DIR or --archive, or set PERSONALENS_DATA)")
        else:
            _measure(data_dir, users, args.settings)


if __name__ == "__main__":
    main()
