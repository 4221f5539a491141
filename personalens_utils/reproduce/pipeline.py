"""A reproduction's order of work: the notebooks of each pass, what each needs, and what is published.

A notebook runs only when every notebook it reads from finished; a failure stops its dependants,
which are recorded as not run. A pass's tables and figures are copied to the top-level `tables/` and
`figures/`, and `runs/LATEST` names it, only when every one of its notebooks finished: a failed run
publishes nothing and leaves the previous reproduction the notebooks' default.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personalens_utils.base.paths import find_official_data, project_root, runs_dir, write_latest
from personalens_utils.data import DEFAULT_SAMPLE, resolve_users
from personalens_utils.reproduce.index import INDEX, mark_index, write_index
from personalens_utils.reproduce.notebooks import (
    OUTPUT_FOLDERS,
    PARAMETERS_LOG,
    PassResult,
    RunnerError,
    StepResult,
    run_notebook,
    runner_step,
)
from personalens_utils.reproduce.settings import (
    PERSONA_USERS,
    ROBUSTNESS_REPEATS,
    ROBUSTNESS_STYLES,
    ROBUSTNESS_TASK_TYPES,
    ROBUSTNESS_USERS,
    TRUST_JUDGE_SAMPLES,
    TRUST_PROBE_TASKS,
    TRUST_PROBE_USERS,
    TRUST_REPEATS,
    Settings,
    assistant_name,
    audit_arms,
    model_name,
    role_specs,
)
from personalens_utils.runstore import run_card
from personalens_utils.session.parameters import ALL_USERS


@dataclass(frozen=True)
class Step:
    """One notebook run of a pass: its parameters, and the steps whose results it reads."""

    notebook: str
    params: dict[str, Any]
    label: str = ""
    needs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.notebook + self.label


def _slug(model: str) -> str:
    return "-" + "".join(c if c.isalnum() else "_" for c in model).strip("_").lower()


SIMULATED_SETTINGS = ("base",)
"""The settings notebook 03 simulates Table 3's assistants in (its default), and so those 04 judges: 05
runs after 04 and judges its own dialogues, so a rerun's 04 must not judge what 05 left in the store."""


def plan_pass(settings: Settings, folder: Path, bench: Path, users: Any, generated: bool) -> list[Step]:
    """The notebooks of one pass in order. 01 makes the benchmark every other notebook reads; 03 makes
    the dialogues 02 (Table 10) and 04 read; 06 reads the judgments of 04 and 05; 07 probes the judge on
    04's judgments of a small design (`TRUST_PROBE_USERS` x `TRUST_PROBE_TASKS`), repeats it
    (`TRUST_REPEATS` x `TRUST_JUDGE_SAMPLES`) for the variance decomposition and the power plan, and audits
    03's dialogues; 09 checks 04's judgments against (synthetic) annotators, blames failures and audits
    the tasks (on 05's settings unless the blind and full reference assistants ran); 10, last and only when
    every role is offline (on real models the grid costs money), runs a small robustness grid reusing 03's
    and 04's records."""
    common = {
        "backend": settings.backend,
        "benchmark_dir": str(bench),
        "users": users,
        "task_types": list(settings.task_types),
        "run_dir": str(folder / "store"),
        "output_dir": str(folder),
        "max_concurrency": settings.max_concurrency,
        "request_timeout_s": settings.request_timeout_s,
        "call_deadline_s": settings.call_deadline_s,
        "seed": settings.seed,
        "backend_seed": settings.backend_seed,
        "user_model": settings.user_model,
        "judge_model": settings.judge_model,
        "prompt_set": settings.prompt_set,
        "official_code": str(settings.official_code) if settings.official_code else None,
        "scoring": settings.scoring,
    }
    steps = []
    if generated:
        steps.append(Step("01_generation", {
            **common,
            "n_users": settings.generated_users,
            **settings.generation_sizes(),
            "demographics_seed": settings.demographics_seed,
            "generated_dir": str(bench),
            "run_dir": str(folder / "generation"),
            "model": settings.user_model,
        }))
    benchmark = tuple(s.name for s in steps)
    simulations = tuple(
        Step("03_simulation",
             {**common, "assistant_model": model, "output_dir": str(folder / f"simulation{_slug(model)}"),
              "settings": list(SIMULATED_SETTINGS),
              "batch": settings.batch},
             _slug(model), benchmark)
        for model in settings.assistant_models
    )
    dialogues = (*benchmark, *(s.name for s in simulations))
    judging = Step("04_judging", {**common, "batch": settings.batch,  # 03's dialogues only (see below)
                                  "assistant_models": list(settings.assistant_models),
                                  "settings": list(SIMULATED_SETTINGS)}, needs=dialogues)
    ablation = Step("05_ablation", {
        **common,
        "assistant_model": settings.ablation_model,
        "ablation_users": settings.ablation_users,
        "compare_assistant": settings.compare_assistant,
    }, needs=benchmark)
    analysis = Step("06_analysis", {
        **common,
        "user_model": model_name(settings, settings.user_model),
        "judge_model": model_name(settings, settings.judge_model),
        "assistant_models": [assistant_name(settings, m) for m in settings.assistant_models],
        "focus_model": assistant_name(settings, settings.focus),
        "second_judge_model": settings.second_judge_model,
        "annotation_sheets": settings.annotations,
    }, needs=(*dialogues, judging.name, ablation.name))
    trust = Step("07_trust", {
        **common,
        "user_model": model_name(settings, settings.user_model),
        "second_judge_model": settings.second_judge_model,
        "assistant_models": [assistant_name(settings, m) for m in settings.assistant_models],
        "probe_users": TRUST_PROBE_USERS,
        "probe_tasks": TRUST_PROBE_TASKS,
        "repeats": TRUST_REPEATS,
        "judge_samples": TRUST_JUDGE_SAMPLES,
        "annotation_sheets": settings.annotations,
    }, needs=(*dialogues, judging.name))
    validity = Step("09_validity", {
        **common,
        "user_model": model_name(settings, settings.user_model),
        "reviewer_model": settings.reviewer_model,
        "assistant_models": [assistant_name(settings, m) for m in settings.assistant_models],
        "annotation_sheets": settings.annotations,
        **_audit_arms(settings),
    }, needs=(*dialogues, judging.name, *((ablation.name,) if audit_arms(settings) else ())))
    persona = [Step("08_persona_bench", {
        "backend": "offline",
        "synthetic_users": PERSONA_USERS,
        "persona_data": str(folder / "persona_bench"),
        "output_dir": str(folder),
        "seed": settings.seed,
        "backend_seed": settings.backend_seed,
        "n_resamples": 100,
    })] if generated else []
    robustness = [Step("10_robustness", {
        **{name: common[name] for name in ("backend", "backend_seed", "benchmark_dir", "run_dir",
                                           "output_dir", "max_concurrency", "seed", "prompt_set",
                                           "official_code")},
        "users": _first_users(users, settings),
        "task_types": list(ROBUSTNESS_TASK_TYPES),
        "assistant_models": list(settings.assistant_models),
        "user_models": [settings.user_model],
        "user_styles": list(ROBUSTNESS_STYLES),
        "judge_models": [settings.judge_model],
        "repeats": ROBUSTNESS_REPEATS,
    }, needs=(*dialogues, judging.name))] if _offline(settings) else []
    return [*steps, *simulations, judging, Step("02_validation", common, needs=dialogues), ablation, analysis,
            trust, validity, *persona, *robustness]


def _first_users(users: Any, settings: Settings) -> list[int]:
    """Notebook 10's users: the first `ROBUSTNESS_USERS` of the pass's (a generated benchmark numbers its
    users from 0; every official user is in the default sample, so "all" starts there)."""
    if users is None:
        return list(range(min(ROBUSTNESS_USERS, settings.generated_users)))
    return (resolve_users(DEFAULT_SAMPLE if users == ALL_USERS else users) or [])[:ROBUSTNESS_USERS]


def _offline(settings: Settings) -> bool:
    return all(spec.backend == "offline" for spec in role_specs(settings).values())


def _audit_arms(settings: Settings) -> dict[str, str]:
    arms = audit_arms(settings)
    return {} if arms is None else {"blind_assistant": arms[0], "full_assistant": arms[1]}


def run_pass(settings: Settings, name: str, benchmark_dir: Path | None) -> PassResult:
    """Run 01 (generated pass only) through 07 and 09 (and 08 in the generated pass) on one benchmark into
    runs/<run>/<name>/; a notebook whose input a failed notebook should have made is not run."""
    folder = settings.root / name
    folder.mkdir(parents=True, exist_ok=True)
    generated = benchmark_dir is None
    bench = folder / "benchmark" if generated else benchmark_dir
    users: Any = None if generated else settings.official_users
    ablation_users = (
        f"first {settings.ablation_users} users of the benchmark"
        if generated
        else f"first {settings.ablation_users} users of {settings.official_users}"
    )
    result = PassResult(name, str(bench), "all generated" if generated else str(users), ablation_users,
                        folder)
    done: dict[str, StepResult] = {}
    steps = plan_pass(settings, folder, bench, users, generated)
    (folder / PARAMETERS_LOG).write_text("", encoding="utf-8")  # this pass's parameters only
    print(f"[reproduce] pass {name!r}: {len(steps)} notebooks; their parameters in "
          f"{folder / PARAMETERS_LOG}", flush=True)
    for k, step in enumerate(steps, 1):
        counter = f"[{k}/{len(steps)}] "
        missing = [need for need in step.needs if not done[need].ok]
        if missing:
            why = f"{missing[0]} {'failed' if not done[missing[0]].skipped else 'did not run'}"
            print(f"[reproduce] {counter}{step.name}: not run, {why}", flush=True)
            done[step.name] = StepResult(step.name, None, 0.0, False, why, skipped=True)
        else:
            done[step.name] = run_notebook(settings, step.notebook, folder, step.params, step.label,
                                           counter=counter)
        result.steps.append(done[step.name])
    _note_scoring(settings, folder, done)
    return result


def _note_scoring(settings: Settings, folder: Path, done: dict[str, StepResult]) -> None:
    """Record on the pass's store card the scoring rule its analysis (06) read the answers under, so the
    card's `protocol` says whether the reproduction followed the authors' scoring too."""
    store = folder / "store"
    if "06_analysis" in done and done["06_analysis"].ok and store.is_dir():
        run_card.update_card(store, scoring=settings.scoring)


KEPT = "README.md"
"""The one file of the top-level tables/ and figures/ that no publish replaces (it says what they are)."""


def publish(result: PassResult) -> list[Path]:
    """Make the top-level tables/ and figures/ hold exactly the tables and figures the finished notebooks
    of a pass wrote in this run: whatever an earlier publish (or anyone) left there goes first, so a file
    found there is one this run made."""
    copied = []
    finished = [step for step in result.steps if step.ok]
    for sub in OUTPUT_FOLDERS:
        target = project_root() / sub
        target.mkdir(exist_ok=True)
        for old in sorted(target.iterdir()):
            if old.name == KEPT:
                continue
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink()
        for path in sorted(p for step in finished for p in step.written if p.parent == result.folder / sub):
            copied.append(Path(shutil.copy2(path, target / path.name)))
    return copied


def reproduce(settings: Settings) -> tuple[list[PassResult], Path]:
    """Run every pass, publish the last one if it finished, and write runs/<run>/INDEX.md.

    The index of an earlier run in the same folder is replaced by a note that this run is under way
    before any notebook starts, and by one naming the failed step if the runner itself fails (a
    `RunnerError`), so an index that no longer describes the folder never outlives the run."""
    started = time.perf_counter()
    settings.root.mkdir(parents=True, exist_ok=True)
    mark_index(settings)
    try:
        return _reproduce(settings, started)
    except RunnerError as exc:
        mark_index(settings, stopped=exc)
        raise


def _reproduce(settings: Settings, started: float) -> tuple[list[PassResult], Path]:
    official = settings.benchmark_dir or find_official_data()
    results = []
    if "generated" in settings.passes:
        with runner_step("pass 'generated'"):
            results.append(run_pass(settings, "generated", None))
    if "official" in settings.passes:
        if official is None:
            print(
                "[reproduce] official data not found ($PERSONALENS_DATA or data/personalens/): "
                "skipping the official pass",
                flush=True,
            )
        else:
            with runner_step("pass 'official'"):
                results.append(run_pass(settings, "official", Path(official)))
    with runner_step(f"publishing pass {results[-1].name!r}" if results else "publishing"):
        published = _publish(results[-1], settings) if results else []
    with runner_step(f"writing {settings.root / INDEX}"):
        index = write_index(settings, results, time.perf_counter() - started, published)
    return results, index


def _publish(main: PassResult, settings: Settings) -> list[Path]:
    if not main.finished:
        print(f"[reproduce] pass {main.name!r} did not finish: nothing copied to tables/ and figures/, "
              "runs/LATEST unchanged", flush=True)
        return []
    published = publish(main)
    print(f"[reproduce] tables/ and figures/ now hold the {len(published)} table/figure files of pass "
          f"{main.name!r}, and nothing else (INDEX.md lists them)")
    latest = write_latest(main.folder, Path(main.benchmark), runs=runs_dir(),
                          assistant_models=[assistant_name(settings, m) for m in settings.assistant_models],
                          focus_model=assistant_name(settings, settings.focus))
    print(f"[reproduce] {latest} points notebooks 02-06 on default parameters at pass {main.name!r}")
    return published


def failures(results: Sequence[PassResult]) -> list[StepResult]:
    """The notebooks that failed or did not run, in order."""
    return [step for res in results for step in res.steps if not step.ok]
