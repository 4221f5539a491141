"""Analysis at the paper's scale: load time and peak memory for 122,133 judged dialogues.

    python benchmarks/analysis_scale.py [--dialogues 122133] [--store DIR] [--repeat 2]

Builds a synthetic run store shaped like a full PersonaLens run (the paper's 98,115 SD and 24,018
MD dialogues, Table 13's turn counts, texts of realistic length, judgments in all seven dimensions
with a few missing and errored ones), then loads it the way notebook 06 does
(`metrics.scores.load_scores`) in a fresh child process, which reports its wall time and peak
resident memory (getrusage). The store is kept with --store DIR (reused when it already holds the
asked number of dialogues). Targets: under 60 s and under 4 GiB.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from personalens_utils.identity import Role, Variant, dialogue_id, judgment_id
from personalens_utils.judging import ALL_DIMENSIONS, DIMENSIONS

PAPER_DIALOGUES = 122_133
PAPER_MD = 24_018
TURNS = {"SD": 4.74, "MD": 5.64}
USER_CHARS, ASSISTANT_CHARS = 200, 450
"""About 150 tokens per turn (Table 13), a third of them the user's."""
RAW_CHARS = {"task_completion": 400, "personalization": 1600, "turn_personalization": 1000}
"""Judge answer lengths: the personalization rubric asks for observations, justification and suggestions;
turn-level personalization answers once per assistant turn; quality dimensions default to 600."""
MAX_SECONDS, MAX_GIB = 60.0, 4.0
USAGE = {"input_tokens": 9000, "output_tokens": 700, "cache_read_tokens": 0, "cache_write_tokens": 0}
MODEL, JUDGE = "Claude 3 Sonnet", "Claude 3.5 Sonnet"
ROLE, JUDGE_ROLE = Role.of(MODEL, "synthetic"), Role.of(JUDGE, "synthetic")
DOMAINS = ("Alarm", "Books", "Calendar", "Events", "Hotels", "Media", "Movies", "Music", "Restaurants")

CHILD = """
import resource, sys, time
from personalens_utils.analysis.scores import load_scores
start = time.perf_counter()
tidy = load_scores(sys.argv[1])
elapsed = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(elapsed, peak_kib, len(tidy), tidy["dialogue_id"].nunique(), int(tidy["score"].isna().sum()))
"""


def _texts(rng: random.Random) -> list[str]:
    words = [w for w in Path(__file__).read_text().split() if w.isalpha()]  # any English-looking words
    return [" ".join(rng.choices(words, k=400)) for _ in range(64)]


def _text(rng: random.Random, pool: list[str], chars: int) -> str:
    n = max(20, int(rng.gauss(chars, chars / 4)))
    return rng.choice(pool)[:n]


def _turns(rng: random.Random, task_type: str) -> int:
    mean = TURNS[task_type]
    return max(2, min(20, round(rng.expovariate(1 / (mean - 2))) + 2))


def build(root: Path, n_dialogues: int, seed: int = 0) -> None:
    """Write dialogues.jsonl and judgments.jsonl for `n_dialogues` synthetic dialogues."""
    rng = random.Random(seed)
    pool = _texts(rng)
    n_md = round(n_dialogues * PAPER_MD / PAPER_DIALOGUES)
    root.mkdir(parents=True, exist_ok=True)
    with (root / "dialogues.jsonl").open("wb") as dfh, (root / "judgments.jsonl").open("wb") as jfh:
        for i in range(n_dialogues):
            task_type = "MD" if i < n_md else "SD"
            domains = rng.sample(DOMAINS, 3) if task_type == "MD" else [rng.choice(DOMAINS)]
            task_id = f"MD-task-{i % 25 + 1}" if task_type == "MD" else f"SD-{domains[0]}-task-{i % 9 + 1}"
            scenario = f"user{i // 82}/{task_id}-{i}"
            did = dialogue_id(scenario, "base", user=ROLE, assistant=ROLE, variant=Variant("v1"))
            n_turns = _turns(rng, task_type)
            turns = []
            for _ in range(n_turns):
                turns.append({"role": "user", "content": _text(rng, pool, USER_CHARS)})
                turns.append({"role": "assistant", "content": _text(rng, pool, ASSISTANT_CHARS)})
            status = "error" if rng.random() < 0.005 else ("terminated" if rng.random() < 0.9 else "turn_cap")
            dfh.write(orjson.dumps({
                "id": did, "scenario_id": scenario, "user_id": i // 82, "task_id": task_id,
                "task_type": task_type, "domains": domains, "user_model": MODEL, "assistant_model": MODEL,
                "assistant_setting": "base", "prompt_version": "v1", "backend": "synthetic",
                "user_backend": "synthetic", "user_model_id": MODEL, "assistant_backend": "synthetic",
                "assistant_model_id": MODEL, "status": status,
                "error": "RetriesExhaustedError: synthetic" if status == "error" else None, "turns": turns,
                "n_turns": n_turns, "usage": USAGE, "cost_usd": 0.04, "retries": 0}) + b"\n")
            if status == "error":
                continue
            for name in ALL_DIMENSIONS:
                jfh.write(orjson.dumps(_judgment(rng, pool, did, name, n_turns)) + b"\n")


def _judgment(rng: random.Random, pool: list[str], did: str, name: str, n_turns: int) -> dict:
    dim = DIMENSIONS[name]
    status = "missing" if rng.random() < 0.01 else ("error" if rng.random() < 0.002 else "ok")
    turn_scores = None
    if dim.turn_level:
        turn_scores = [rng.randint(dim.low, dim.high) for _ in range(n_turns)]
        score = sum(turn_scores) / n_turns
        raw = " ".join(_text(rng, pool, RAW_CHARS[name]) for _ in range(n_turns))
    else:
        score = float(rng.randint(dim.low, dim.high))
        raw = _text(rng, pool, RAW_CHARS.get(name, 600))
    ok = status == "ok"
    return {"id": judgment_id(did, name, judge=JUDGE_ROLE, variant=Variant("v2")), "dialogue_id": did,
            "dimension": name,
            "judge_model": JUDGE, "prompt_version": "v2", "backend": "synthetic", "judge_model_id": JUDGE,
            "status": status,
            "score": score if ok else None, "turn_scores": turn_scores if ok else None,
            "explanation": raw[: len(raw) * 3 // 5], "raw": "" if status == "error" else raw,
            "attempts": 2 if status == "missing" else 1}


def _ready(root: Path, n_dialogues: int) -> bool:
    path = root / "dialogues.jsonl"
    if not path.exists():
        return False
    with path.open("rb") as fh:
        return sum(1 for _ in fh) == n_dialogues


def measure(root: Path) -> tuple[float, float, int, int, int]:
    """Load the store in a fresh interpreter: (seconds, peak GiB, rows, dialogues, missing scores)."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(root)], capture_output=True, text=True, check=True)
    elapsed, peak_kib, rows, dialogues, missing = out.stdout.split()
    return float(elapsed), int(peak_kib) / 2**20, int(rows), int(dialogues), int(missing)


def run(root: Path, n_dialogues: int, repeat: int) -> bool:
    if _ready(root, n_dialogues):
        print(f"reusing the store in {root}")
    else:
        start = time.perf_counter()
        build(root, n_dialogues)
        print(f"built a synthetic store of {n_dialogues:,} dialogues in {time.perf_counter() - start:.0f} s")
    sizes = {p.name: p.stat().st_size / 2**30 for p in sorted(root.glob("*.jsonl"))}
    print("store: " + ", ".join(f"{name} {gib:.2f} GiB" for name, gib in sizes.items()))
    results = [measure(root) for _ in range(repeat)]
    for elapsed, peak, rows, dialogues, missing in results:
        print(f"load_scores: {elapsed:5.1f} s, peak RSS {peak:.2f} GiB; {rows:,} judgment rows of "
              f"{dialogues:,} dialogues ({missing:,} without a score)")
    worst_time = max(r[0] for r in results)
    worst_peak = max(r[1] for r in results)
    ok = worst_time < MAX_SECONDS and worst_peak < MAX_GIB
    print(json.dumps({"dialogues": n_dialogues, "worst_load_s": round(worst_time, 1),
                      "worst_peak_gib": round(worst_peak, 2)}))
    print(f"targets < {MAX_SECONDS:.0f} s and < {MAX_GIB:.0f} GiB: {'met' if ok else 'NOT MET'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dialogues", type=int, default=PAPER_DIALOGUES)
    parser.add_argument("--store", type=Path, help="keep (and reuse) the synthetic store in this folder")
    parser.add_argument("--repeat", type=int, default=2, help="loads to measure (default 2)")
    args = parser.parse_args()
    if args.store is not None:
        ok = run(args.store, args.dialogues, args.repeat)
    else:
        with tempfile.TemporaryDirectory(prefix="analysis-scale-") as tmp:
            ok = run(Path(tmp), args.dialogues, args.repeat)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
