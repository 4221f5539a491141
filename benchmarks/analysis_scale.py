"""Results at the paper's scale: analysis tables, explorer and judging plan on 122,133 judged dialogues.

    python benchmarks/analysis_scale.py [--dialogues 122133] [--store DIR] [--repeat 2]
                                        [--only analysis,explorer,plan]

Builds a synthetic run store shaped like a full PersonaLens run (the paper's 98,115 SD and 24,018
MD dialogues, Table 13's turn counts, texts of realistic length, judgments in all seven dimensions
with a few missing and errored ones; user agent and assistant "Claude 3 Sonnet", judge "Claude 3.5
Sonnet", backend "synthetic"), then measures three things, each in a fresh child process that
reports every step's wall time and its peak resident memory (getrusage ru_maxrss of itself and of
any children it waited for):

- analysis: what notebook 06 computes from the store: `load_scores`, the missing rates, Tables 3,
  4, 12 and 13 (saved as CSV; their digests let two runs be compared byte for byte) and Figures 4,
  5 and the radar chart (drawn, not saved). Left out, as they need the benchmark's profiles or a
  second judge: the session's user scope, Table 5 and the judge sanity check (no reference
  assistants in the store); Table 11 reads the model registry, not the store;
- explorer: the catalog of the store, every filter's values, the first page of the dialogue list
  and one dialogue's page (`_explorer_open`);
- plan: what a resume of judging plans (`plan_judging` for all seven dimensions, everything already
  judged) and the users whose profiles judging would load (`judged_users`).

Each step shows its wall time and the process's CPU time meanwhile (on a busy machine the wall time
grows, the CPU time much less); module imports are timed apart and left out of each total (a notebook
has them already). Targets
at up to 122,133 dialogues: analysis < 30 s and < 1 GiB, explorer < 2 s and < 500 MB, plan < 5 s;
above that (e.g. --dialogues 1221330, ten times the paper) every measurement < 4 GiB peak. Prints
one line per step, a JSON summary line and "met"/"NOT MET" per target; exits 1 if one is not met.
The store is kept with --store DIR (reused when it already holds the asked number of dialogues;
the measurements only read it, though code that keeps a columnar copy beside it may write one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from personalens_utils.judging import ALL_DIMENSIONS, DIMENSIONS
from personalens_utils.llm.role import Role
from personalens_utils.runstore.identity import Variant, dialogue_id, judgment_id
from personalens_utils.session.analysis import TABLE3, TABLE4, TABLE12, TABLE13

PAPER_DIALOGUES = 122_133
PAPER_MD = 24_018
TURNS = {"SD": 4.74, "MD": 5.64}
USER_CHARS, ASSISTANT_CHARS = 200, 450
"""About 150 tokens per turn (Table 13), a third of them the user's."""
RAW_CHARS = {"task_completion": 400, "personalization": 1600, "turn_personalization": 1000}
"""Judge answer lengths: the personalization rubric asks for observations, justification and suggestions;
turn-level personalization answers once per assistant turn; quality dimensions default to 600."""
USAGE = {"input_tokens": 9000, "output_tokens": 700, "cache_read_tokens": 0, "cache_write_tokens": 0}
MODEL, JUDGE, BACKEND = "Claude 3 Sonnet", "Claude 3.5 Sonnet", "synthetic"
ROLE, JUDGE_ROLE = Role.of(MODEL, BACKEND), Role.of(JUDGE, BACKEND)
DOMAINS = ("Alarm", "Books", "Calendar", "Events", "Hotels", "Media", "Movies", "Music", "Restaurants")
SETTING = "base"
FIGURE5_DOMAINS = ("Movies", "Music", "Messaging")
"""Notebook 06's defaults (the synthetic store has no Messaging dialogues; that series stays empty)."""
GIB, MB = 2**30, 10**6
LARGE_PEAK = 4 * GIB
"""Above the paper's size only memory is held to a target: every measurement under 4 GiB."""


@dataclass(frozen=True)
class Target:
    """The most a measurement may take at the paper's size: seconds (its counted steps) and peak bytes."""

    seconds: float
    peak: float | None = None
    peak_label: str = ""


TARGETS = {
    "analysis": Target(30.0, GIB, "1 GiB"),
    "explorer": Target(2.0, 500 * MB, "500 MB"),
    "plan": Target(5.0),
}
TITLES = {"analysis": "analysis tables", "explorer": "explorer open", "plan": "plan of a resume"}

CHILD = """
import json, resource, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import analysis_scale
clock = analysis_scale.Clock()
facts = analysis_scale.MEASUREMENTS[sys.argv[2]](Path(sys.argv[3]), clock)
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
steps = [[s.name, s.seconds, s.cpu_s, s.counted] for s in clock.steps]
print("RESULT " + json.dumps({"steps": steps, "peak_kib": peak, "facts": facts}))
"""
"""Runs one measurement in a fresh interpreter; its last line holds the steps, the peak and the facts."""


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


@dataclass(frozen=True)
class Step:
    """One step of a measurement: its wall time, the CPU time of the whole process meanwhile (all
    threads; beside the wall time it shows how much a busy machine slowed the step), and whether it
    counts to the total (module imports do not)."""

    name: str
    seconds: float
    cpu_s: float
    counted: bool = True


class Clock:
    """The steps of one measurement, in the order they ran."""

    def __init__(self) -> None:
        self.steps: list[Step] = []

    @contextmanager
    def step(self, name: str, *, counted: bool = True) -> Iterator[None]:
        start, cpu = time.perf_counter(), time.process_time()
        yield
        self.steps.append(Step(name, time.perf_counter() - start, time.process_time() - cpu, counted))


def _digests(out: Path) -> dict[str, str]:
    """A short sha256 of every CSV written under `out`, so runs of two versions compare byte for byte."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted(out.rglob("*.csv"))}


def _analysis_tables(root: Path, clock: Clock) -> dict[str, Any]:
    """Notebook 06's tables and figures from the store, as its cells compute them."""
    with clock.step("imports", counted=False):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from personalens_utils import analysis
        from personalens_utils.analysis import dialogue_stats
        from personalens_utils.measures import scores
        from personalens_utils.runstore.store import RunStore
    store, models = RunStore(root), [MODEL]
    with tempfile.TemporaryDirectory(prefix="analysis-scale-out-") as tmp:
        out = Path(tmp)
        with clock.step("load_scores"):
            tidy = scores.load_scores(store, judge_model=JUDGE, user_model=MODEL, judge_prompt_set="kit",
                                      scoring="strict")
        with clock.step("missing_rates"):
            scores.missing_rates(tidy)
        with clock.step("table3"):
            table3 = analysis.table3(tidy, setting=SETTING, models=models, seed=0)
            table3.save(out, TABLE3, "assistant_models")
            table3.save_data(out, TABLE3, "assistant_models_data")
        with clock.step("table4"):
            analysis.table4(tidy, assistant_model=MODEL, seed=0).save(out, TABLE4, "ablation")
        with clock.step("table12"):
            of_models = analysis.rows_of(tidy, tidy["assistant_model"].isin(models))
            analysis.table12(of_models, setting=SETTING, seed=0).save(out, TABLE12, "user_agent")
        with clock.step("table13"):
            dialogues = dialogue_stats.dialogues_frame(store)
            dialogues = dialogues[dialogues["user_model"] == MODEL]
            dialogue_stats.table13(dialogues, assistant_model=MODEL, assistant_setting=SETTING,
                                   task_types=["SD", "MD"]).save(out, TABLE13, "dialogue_stats")
        with clock.step("figure4"):
            figures = {"figure4": analysis.figure4(tidy, assistant_model=MODEL, setting=SETTING, seed=0)}
        with clock.step("figure5"):
            figures["figure5"] = analysis.figure5(
                scores.turn_frame(tidy), assistant_model=MODEL, setting=SETTING, domains=FIGURE5_DOMAINS,
                backend_names=scores.backends(tidy), seed=0)
        with clock.step("radar"):
            of_models = analysis.rows_of(tidy, tidy["assistant_model"].isin(models))
            figures["radar"] = analysis.radar_chart(of_models, setting=SETTING, seed=0)
        for name, figure in figures.items():
            plt.close(figure.figure)
            if figure.data is not None:
                figure.data.to_csv(out / f"{name}_data.csv", index=False)
        return {"judgment_rows": len(tidy), "judged_dialogues": int(tidy["dialogue_id"].nunique()),
                "without_score": int(tidy["score"].isna().sum()), "csv_sha256": _digests(out),
                "skipped": "session user scope, Table 5 (profiles, second judge), judge sanity check "
                           "(no reference assistants), Table 11 (registry only)"}


def _explorer_open(root: Path, clock: Clock) -> dict[str, Any]:
    """Open the explorer on the store: the catalog, every filter's values, the first page of the list
    (`widgets.SHOWN` lines, the page the explorer asks the catalog for) and the first dialogue's page."""
    with clock.step("imports", counted=False):
        from personalens_utils.explore import Catalog, Filters, dialogue_page
        from personalens_utils.explore.widgets import FILTERS, SHOWN
        from personalens_utils.runstore.store import RunStore
    with clock.step("catalog"):
        catalog = Catalog(RunStore(root))
    with clock.step("filter values"):
        values = {name: catalog.values(name) for name, _ in FILTERS}
    with clock.step("first page"):
        page = [(Catalog.label(d), d.id) for d in catalog.select(Filters(), limit=SHOWN).dialogues]
    with clock.step("dialogue view"):
        html = dialogue_page(catalog.view(page[0][1], JUDGE))
    return {"filter_values": {name: len(v) for name, v in values.items()}, "first_page": len(page),
            "view_chars": len(html)}


def _plan_resume(root: Path, clock: Clock) -> dict[str, Any]:
    """Plan a resume of judging by the store's own judge on all seven dimensions (nothing left to do),
    and list the users whose profiles the judging would load."""
    with clock.step("imports", counted=False):
        from personalens_utils.judging import JudgingConfig
        from personalens_utils.judging.plan import judged_users, plan_judging
        from personalens_utils.runstore.store import RunStore
    store = RunStore(root)
    config = JudgingConfig(judge_model=JUDGE, dimensions=ALL_DIMENSIONS, retry_errors=False)
    with clock.step("plan_judging"):
        plan = plan_judging(store, config, JUDGE_ROLE)
    with clock.step("judged_users"):
        users = judged_users(store, judge=JUDGE_ROLE)
    return {"judgeable_dialogues": len(plan.to_judge), "judgments_to_do": plan.judgments, "users": len(users)}


MEASUREMENTS: dict[str, Callable[[Path, Clock], dict[str, Any]]] = {
    "analysis": _analysis_tables, "explorer": _explorer_open, "plan": _plan_resume}


@dataclass(frozen=True)
class Result:
    """One measurement's run: counted seconds, peak bytes, its steps, and what it found (or why it failed)."""

    seconds: float
    peak: float
    steps: list[Step]
    facts: dict[str, Any]
    process_s: float
    failure: str = ""


def measure(kind: str, root: Path) -> Result:
    """Run the measurement `kind` on the store in a fresh interpreter."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, str(Path(__file__).resolve().parent), kind, str(root)],
                         capture_output=True, text=True)
    process_s = time.perf_counter() - start
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        return Result(float("nan"), float("nan"), [], {}, process_s,
                      f"exit status {out.returncode}: {tail}")
    found = json.loads(lines[-1].removeprefix("RESULT "))
    steps = [Step(*step) for step in found["steps"]]
    return Result(sum(s.seconds for s in steps if s.counted), found["peak_kib"] * 1024, steps, found["facts"],
                  process_s)


def _gib(peak: float) -> str:
    return f"{peak / GIB:.2f} GiB ({peak / MB:,.0f} MB)"


def _show(kind: str, run: int, repeat: int, result: Result, columnar: bool) -> None:
    label = f"{TITLES[kind]} [{run}/{repeat}]"
    if result.failure:
        print(f"{label}: FAILED after {result.process_s:.1f} s, {result.failure}")
        return
    for s in result.steps:
        print(f"{label}  {s.name:<14} {s.seconds:8.2f} s  (CPU {s.cpu_s:7.2f} s)"
              + ("" if s.counted else "  not counted"))
    cpu = sum(s.cpu_s for s in result.steps if s.counted)
    copy = "present" if columnar else "absent"
    print(f"{label}  {'total':<14} {result.seconds:8.2f} s  (CPU {cpu:7.2f} s)  peak RSS "
          f"{_gib(result.peak)}; process {result.process_s:.1f} s; columnar copy {copy} before; "
          f"load average {os.getloadavg()[0]:.1f}; " + json.dumps(result.facts))


def _worst(results: list[Result]) -> tuple[float, float]:
    """The longest counted time and the highest peak of the runs that finished (NaN: none did)."""
    done = [r for r in results if not r.failure]
    if not done:
        return float("nan"), float("nan")
    return max(r.seconds for r in done), max(r.peak for r in done)


def _checks(kind: str, results: list[Result], n_dialogues: int) -> list[tuple[str, bool]]:
    """(target in words, met) for the worst of a measurement's runs; a failed run meets none."""
    failed = any(r.failure for r in results)
    worst_s, worst_peak = _worst(results)
    title = TITLES[kind]
    if n_dialogues > PAPER_DIALOGUES:
        return [(f"{title} peak < 4 GiB ({_gib(worst_peak)})", not failed and worst_peak < LARGE_PEAK)]
    target = TARGETS[kind]
    checks = [(f"{title} < {target.seconds:.0f} s ({worst_s:.2f} s)",
               not failed and worst_s < target.seconds)]
    if target.peak is not None:
        checks.append((f"{title} peak < {target.peak_label} ({_gib(worst_peak)})",
                       not failed and worst_peak < target.peak))
    return checks


def run(root: Path, n_dialogues: int, repeat: int, kinds: list[str]) -> bool:
    if _ready(root, n_dialogues):
        print(f"reusing the store in {root}")
    else:
        start = time.perf_counter()
        build(root, n_dialogues)
        print(f"built a synthetic store of {n_dialogues:,} dialogues in {time.perf_counter() - start:.0f} s")
    sizes = {p.name: p.stat().st_size / GIB for p in sorted(root.glob("*.jsonl"))}
    print("store: " + ", ".join(f"{name} {gib:.2f} GiB" for name, gib in sizes.items())
          + f"; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    summary: dict[str, Any] = {"dialogues": n_dialogues, "store": str(root)}
    checks: list[tuple[str, bool]] = []
    for kind in kinds:
        results = []
        for i in range(repeat):
            columnar = (root / "_columnar").exists()
            results.append(measure(kind, root))
            _show(kind, i + 1, repeat, results[-1], columnar)
        worst_steps: dict[str, float] = {}
        for result in results:
            for s in result.steps:
                worst_steps[s.name] = round(max(worst_steps.get(s.name, 0.0), s.seconds), 2)
        worst_s, worst_peak = _worst(results)
        summary[kind] = {"worst_s": round(worst_s, 2), "worst_peak_gib": round(worst_peak / GIB, 3),
                         "steps": worst_steps, "facts": results[-1].facts,
                         **({"failures": [r.failure for r in results if r.failure]}
                            if any(r.failure for r in results) else {})}
        checks += _checks(kind, results, n_dialogues)
    print(json.dumps(summary))
    for words, met in checks:
        print(f"target {words}: {'met' if met else 'NOT MET'}")
    return all(met for _, met in checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dialogues", type=int, default=PAPER_DIALOGUES)
    parser.add_argument("--store", type=Path, help="keep (and reuse) the synthetic store in this folder")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each measurement (default 2)")
    parser.add_argument("--only", default=",".join(MEASUREMENTS),
                        help=f"measurements to make, comma-separated (default {','.join(MEASUREMENTS)})")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(MEASUREMENTS))
    if unknown or not kinds:
        parser.error(f"--only takes some of {list(MEASUREMENTS)}, got {args.only!r}")
    if args.store is not None:
        ok = run(args.store, args.dialogues, args.repeat, kinds)
    else:
        with tempfile.TemporaryDirectory(prefix="analysis-scale-") as tmp:
            ok = run(Path(tmp), args.dialogues, args.repeat, kinds)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
