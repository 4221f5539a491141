"""What PersonaLens costs per assistant: live, through batch APIs, and through batch APIs with prompt caching.

    python benchmarks/cost_estimate.py [DATA_DIR] [--archive X.tar.xz] [--backend anthropic] [--settings base]

Every figure comes from the kit's own estimator (`llm.budget`, through `estimate_simulation` and
`estimate_judging`) with the notebooks' default models and settings (user agent and assistant Claude 3
Sonnet, judge Claude 3.5 Sonnet, each priced as the successor a real backend calls; setting `base`
unless `--settings` says otherwise; all seven judge dimensions):

- simulation: `estimate_simulation` over the scenarios (the paper's Table 13 dialogue lengths), for the
  50-user sample and for the whole benchmark;
- judging: `estimate_judging` needs the dialogues, so those of the 50-user sample are made on the offline
  backend first (their lengths are the offline simulation's); the whole benchmark's judging is that
  estimate per SD and per MD dialogue times the benchmark's SD and MD dialogues.

Printed per role (user agent, assistant, judge) and in total: live, batch, batch + prompt caching, in USD,
and batch + caching as a share of live. Without DATA_DIR the data comes from $PERSONALENS_DATA,
data/personalens/ or the archive in ../shared/data, extracted to a temporary folder.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the `support` package

from support.official_data import official_data_for_script
from support.roles import judge_of, user_of

from personalens_utils import judging
from personalens_utils.data import load_benchmark
from personalens_utils.llm import LLMClient
from personalens_utils.llm.budget import PRICE_COLUMNS, CostEstimate
from personalens_utils.llm.offline import OFFLINE_LABEL, OfflineBackend
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, estimate_simulation, run_simulation
from personalens_utils.simulation.runner import dialogue_frame

ROLES = {"user_turn": "user agent", "assistant_turn": "assistant", "judge": "judge"}
TASK_TYPES = ("SD", "MD")


def _by_role(*estimates: CostEstimate, scale: float = 1.0) -> pd.DataFrame:
    """The estimates' priced rows summed per role, times `scale`."""
    rows = pd.concat([e.table[e.table["stage"] != "total"] for e in estimates], ignore_index=True)
    return rows.groupby("kind")[PRICE_COLUMNS].sum() * scale


def _judging(store: RunStore, bench, backend: str) -> dict[str, CostEstimate]:
    """The judging estimate of the stored dialogues, one per task type."""
    contexts = judging.benchmark_contexts(bench)
    configs = {kind: judging.JudgingConfig(offline_dialogues=True,
                                           select=judging.dialogue_filter(task_types=[kind]))
               for kind in TASK_TYPES}
    return {kind: judging.estimate_judging(store, contexts, config, judge=judge_of(config, backend))
            for kind, config in configs.items()}


def _print(title: str, costs: pd.DataFrame) -> float:
    """One scope's table; returns batch + caching as a share of live."""
    costs = costs.reindex([k for k in ROLES if k in costs.index])
    costs.loc["total"] = costs.sum()
    print(f"\n{title}")
    print(f"{'role':<12}{'live':>12}{'batch':>12}{'batch+cache':>13}{'share':>8}")
    for kind, row in costs.iterrows():
        print(f"{ROLES.get(str(kind), str(kind)):<12}{row['live_usd']:>12,.2f}{row['batch_usd']:>12,.2f}"
              f"{row['batch_cached_usd']:>13,.2f}{row['batch_cached_usd'] / row['live_usd']:>8.1%}")
    return float(costs.loc["total", "batch_cached_usd"] / costs.loc["total", "live_usd"])


def _measure(data_dir: Path, backend: str, settings: list[str]) -> None:
    started = time.perf_counter()
    config = SimulationConfig(settings=settings)
    user = user_of(config, backend)
    sample = load_benchmark(data_dir, users="sample_50")
    with tempfile.TemporaryDirectory() as run_dir:
        store = RunStore(run_dir)
        simulation = estimate_simulation(sample, store, config, user=user)
        with LLMClient(OfflineBackend(), max_concurrency=16, progress=False) as client:
            made = run_simulation(sample, store, client, config)
        judged = _judging(store, sample, backend)
        stored = dialogue_frame(store)["task_type"].value_counts()
        per_dialogue = {kind: _by_role(judged[kind], scale=1 / stored[kind]) for kind in TASK_TYPES}
    whole = load_benchmark(data_dir, users=None)
    with tempfile.TemporaryDirectory() as run_dir:
        whole_simulation = estimate_simulation(whole, RunStore(run_dir), config, user=user)
    counts = whole.scenarios["task_type"].value_counts()
    whole_judging = sum(per_dialogue[kind] * counts[kind] for kind in TASK_TYPES)
    print(f"models: user agent {config.user_model}, assistant {config.assistant_model}, judge "
          f"{judging.JudgingConfig().judge_model} on the {backend} backend (the successors of retired "
          f"models priced); setting {', '.join(map(str, config.settings))}; USD at list prices")
    print(f"judge prompts built from {made.stored} dialogues of sample_50 made by the {OFFLINE_LABEL}")
    shares = [
        _print(f"sample_50: {len(sample.scenarios):,} scenarios",
               _by_role(simulation, *judged.values())),
        _print(f"whole benchmark: {len(whole.scenarios):,} scenarios "
               f"({counts['SD']:,} SD, {counts['MD']:,} MD; judging scaled per SD and MD dialogue)",
               pd.concat([_by_role(whole_simulation), whole_judging])),
    ]
    print(f"\nbatch + caching over live: {', '.join(f'{s:.1%}' for s in shares)} "
          f"({time.perf_counter() - started:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", nargs="?", type=Path, help="official benchmark folder")
    parser.add_argument("--archive", type=Path, help="official .tar.xz to extract into a temporary folder")
    parser.add_argument("--backend", default="anthropic",
                        help="where the models are priced (default anthropic)")
    parser.add_argument("--settings", nargs="+", default=["base"], help="assistant settings (default base)")
    args = parser.parse_args()
    with official_data_for_script(args.data_dir, args.archive) as data_dir:
        if data_dir is None:
            print("SKIPPED: no official data found (pass DATA_DIR or --archive, or set PERSONALENS_DATA)")
        else:
            _measure(data_dir, args.backend, args.settings)


if __name__ == "__main__":
    main()
