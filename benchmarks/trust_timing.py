"""Timings of the trust statistics at realistic sizes (issue 22, parts 2 and 3).

    python benchmarks/trust_timing.py [--mixedlm-limit 120]

- one cluster-bootstrap interval (2000 resamples) over 122,133 judgments of 1,500 users, the size of
  the paper's full run, and one paired difference between two assistants over 61,000 shared scenarios;
- the variance decomposition by hierarchical ANOVA and by statsmodels MixedLM on designs of growing
  size with repeats (users x 10 tasks x 3 simulation samples x 3 judge samples), MixedLM stopping at
  the first size that takes longer than --mixedlm-limit seconds; ANOVA also on 122,133 judgments.
Each time is the best of the repeats shown. Scores are simulated with known variance components
(tests/support/trust_design.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.trust_design import Truth, simulate

from personalens_utils.measures.bootstrap import cluster_ci, paired_difference
from personalens_utils.measures.design import SCORE, USER
from personalens_utils.trust.variance import decompose_design

TRUTH = Truth(user=1.0, task=0.5, sample=0.3, judge=0.2, user_arm=0.1, task_arm=0.2)


def best_of(repeats: int, call: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixedlm-limit", type=float, default=120.0)
    args = parser.parse_args()

    full = simulate(TRUTH, users=1500, tasks=82, repeats=1, judge_samples=1, seed=0).head(122_133)
    print(f"cluster_ci, {len(full)} judgments of {full[USER].nunique()} users, 2000 resamples: "
          f"{best_of(3, lambda: cluster_ci(full[SCORE], full[USER])):.3f} s")
    pair = simulate(TRUTH, users=1500, tasks=41, repeats=1, judge_samples=1, effects={"A": 0.0, "B": 0.1})
    print(f"paired_difference, {len(pair) // 2} shared scenarios: "
          f"{best_of(3, lambda: paired_difference(pair, 'B', 'A')):.3f} s")
    print(f"ANOVA decomposition, {len(full)} judgments (1 sample, 1 judge sample): "
          f"{best_of(3, lambda: decompose_design(full)):.3f} s")
    for users in (10, 25, 50, 100, 200, 400):
        design = simulate(TRUTH, users=users, tasks=10, repeats=3, judge_samples=3, seed=1)
        anova = best_of(3, lambda d=design: decompose_design(d))
        mixed = best_of(1, lambda d=design: decompose_design(d, method="mixedlm"))
        print(f"{users} users x 10 x 3 x 3 = {len(design)} judgments: ANOVA {anova:.3f} s, "
              f"MixedLM {mixed:.1f} s")
        if mixed > args.mixedlm_limit:
            break


if __name__ == "__main__":
    main()
