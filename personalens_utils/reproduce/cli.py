"""The command line of a reproduction: `python -m personalens_utils.reproduce` (what `make reproduce` runs).

Every option is read and checked before any notebook starts: each problem is one line, and the
command exits with code 1, as it does for any error of the kit's own (`errors.KitError`), which it
prints as one message (the traceback with PERSONALENS_TRACEBACK=1).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from personalens_utils.assistants.python import SPEC_FORM as PYTHON_SPEC_FORM
from personalens_utils.assistants.reference_assistants import FOCUS_ASSISTANT
from personalens_utils.assistants.retrieval import SPEC as RETRIEVAL_SPEC
from personalens_utils.base.errors import KitError, full_traceback_wanted
from personalens_utils.base.paths import (
    cache_dir,
    find_official_data,
    is_benchmark,
    project_root,
    runs_dir,
    unwritable,
)
from personalens_utils.data import MD, SAMPLES, SD
from personalens_utils.generation.parsing import MD_DOMAIN_RANGE
from personalens_utils.generation.runner import GenerationConfig
from personalens_utils.judging import SCORING_RULES
from personalens_utils.llm.options import ClientOptions
from personalens_utils.llm.registry import KNOWN_BACKENDS
from personalens_utils.llm.specs import ModelSpec, SpecError
from personalens_utils.prompt_sets import PROMPT_SETS
from personalens_utils.prompt_sets.official.templates import OfficialCodeError
from personalens_utils.reference.schema import load_schema
from personalens_utils.reproduce.pipeline import OUTPUT_FOLDERS, failures, reproduce
from personalens_utils.reproduce.settings import (
    ANTHROPIC_ASSISTANTS,
    MAX_CONCURRENCY,
    PASSES,
    Settings,
    role_models,
    role_spec,
)

ALL_USERS = "all"
BATCH_BACKENDS = ("anthropic", "openai")
"""The backends whose batch API `--batch` sends notebooks 03 and 04 through (Bedrock batch inference is
not supported)."""
OPTIONS = {"user agent": "--user-model", "ablation assistant": "--ablation-model", "judge": "--judge-model",
           "second judge": "--second-judge-model", "reviewer": "--reviewer-model",
           "compared assistant": "--compare-assistant"}
"""The option that names each role's model (every other role is one of --assistant-models)."""
TASK_TYPES = (SD, MD)
"""Single- and multi-domain tasks (`--task-types`)."""
CONCURRENCY_FORM = "N, BACKEND=N or both, comma separated (e.g. 16,openai=1)"
"""How `--max-concurrency` is written; a BACKEND may also be an endpoint, openai@VAR."""


class OptionError(KitError):
    """An option of the command line that cannot be used; the message names it."""

    says_all = True


def _items(text: str) -> tuple[str, ...]:
    """A comma list of the command line, without blanks."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _concurrency(text: str) -> int | dict[str, int]:
    """`--max-concurrency`: one bound for every backend ("8"), or bounds per backend with a default for
    the others ("16,openai=1"; without N, `MAX_CONCURRENCY`). A mapping names every known backend, since
    the notebooks give one it leaves out 8, not the default asked for. Bounds below 1 are left for
    `problems` to report with the other options."""
    default: int | None = None
    named: dict[str, int] = {}
    for item in _items(text):
        key, _, number = item.rpartition("=")
        key = key.strip()
        try:
            bound = int(number)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a whole number or BACKEND=N; write "
                                             f"{CONCURRENCY_FORM}") from None
        if not key:
            if default is not None:
                raise argparse.ArgumentTypeError(f"{text!r}: give one N for every backend, not two")
            default = bound
            continue
        backend, at, var = key.partition("@")
        if backend not in KNOWN_BACKENDS or (at and (backend != "openai" or not var.isidentifier())):
            raise argparse.ArgumentTypeError(f"{text!r}: {key!r} is not a backend; use "
                                             f"{', '.join(KNOWN_BACKENDS)} or openai@VAR")
        if key in named:
            raise argparse.ArgumentTypeError(f"{text!r}: {key} is given twice")
        named[key] = bound
    if not named:
        if default is None:
            raise argparse.ArgumentTypeError(f"{text!r}: write {CONCURRENCY_FORM}")
        return default
    return {**dict.fromkeys(KNOWN_BACKENDS, MAX_CONCURRENCY if default is None else default), **named}


class _Parser(argparse.ArgumentParser):
    """argparse that raises `OptionError` (one line, exit code 1) instead of printing its usage."""

    def error(self, message: str) -> NoReturn:
        raise OptionError(message)


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = _Parser(
        prog="python -m personalens_utils.reproduce",
        description="Run notebooks 01-06 with papermill and write runs/<run>/INDEX.md.",
    )
    parser.add_argument("--run", default="default", help="name of the run folder under runs/")
    parser.add_argument(
        "--backend", default="offline", choices=KNOWN_BACKENDS,
        help="offline (default), anthropic, openai or bedrock",
    )
    parser.add_argument("--benchmark-dir", type=Path, help="official-layout benchmark for the official pass")
    parser.add_argument(
        "--passes",
        help="comma list of passes: generated (a fresh small benchmark) and/or official (the data found). "
        "Default: both on the offline backend; on a paid backend the official data if found, else generated",
    )
    parser.add_argument("--users", default="sample_50", help="users of the official pass: sample_30/50/100")
    parser.add_argument(
        "--ablation-users", type=int, default=20, help="how many of those users the six-setting ablation uses"
    )
    parser.add_argument("--generated-users", type=int, default=20, help="size of the generated benchmark")
    parser.add_argument(
        "--domains", metavar="A,B,C", help="generated pass: comma list of the domains notebook 01 writes "
        "tasks for (default every domain of the kit), e.g. Events,Music,Travel",
    )
    parser.add_argument(
        "--sd-tasks-per-domain", type=int, metavar="N", help="generated pass: single-domain tasks per domain "
        f"(default {GenerationConfig.sd_tasks_per_domain}); 0 with --task-types MD",
    )
    parser.add_argument(
        "--md-tasks", type=int, metavar="N", help="generated pass: multi-domain tasks, each over "
        f"{MD_DOMAIN_RANGE[0]}-{MD_DOMAIN_RANGE[1]} of the domains (default {GenerationConfig.md_tasks}); "
        "0 with --task-types SD",
    )
    parser.add_argument(
        "--task-types", metavar="SD,MD",
        help="comma list of the task types simulated, judged and reported: SD and/or MD (default both)",
    )
    parser.add_argument(
        "--assistant-models",
        help="comma list of assistants for Table 3; each a model on --backend or a spec: backend:model, "
        f"openai@VAR:model, {PYTHON_SPEC_FORM}",
    )
    parser.add_argument("--ablation-model", help="the assistant of the ablation (Table 4); a spec too")
    parser.add_argument(
        "--focus-model", help=f"assistant of Figures 4, 5 and Table 13 (offline: {FOCUS_ASSISTANT}; with "
        "--assistant-models that leave it out: the first of them)"
    )
    parser.add_argument("--user-model", help="the user agent's model, or a spec backend:model")
    parser.add_argument("--judge-model", help="the judge's model, or a spec backend:model")
    parser.add_argument("--second-judge-model", help="judge for judge-judge agreement when no annotations")
    parser.add_argument("--reviewer-model", help="who blames each failure in notebook 09 (never the judge)")
    parser.add_argument(
        "--compare-assistant",
        help=f"your assistant (e.g. {RETRIEVAL_SPEC}): "
        "notebook 05 compares it with the ablation assistant on the same scenarios "
        "(Table 3, table3_own_assistant)",
    )
    parser.add_argument("--annotations", help="glob of filled annotation sheets (CSV) for Table 5")
    parser.add_argument(
        "--max-concurrency", type=_concurrency, default=MAX_CONCURRENCY, metavar="N[,BACKEND=N...]",
        help=f"model calls in flight per backend (default {MAX_CONCURRENCY}): {CONCURRENCY_FORM}, N for "
        "the backends not named; openai=1 for a local server that answers one call at a time",
    )
    parser.add_argument("--request-timeout-s", type=float, default=ClientOptions.request_timeout_s,
                        help="seconds a model call waits for an answer before retrying (notebooks 03-05)")
    parser.add_argument("--call-deadline-s", type=float, default=ClientOptions.call_deadline_s,
                        help="seconds a model call may take in all, retries included (notebooks 03-05)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of bootstrap, permutation, Self-BLEU and annotation samples"
    )
    parser.add_argument("--backend-seed", type=int, default=0, help="seed of the offline backend")
    parser.add_argument("--prompt-set", default="kit", choices=PROMPT_SETS,
                        help="kit (default): the kit's prompts; official: the authors' prompts, read from "
                        "--official-code or $PERSONALENS_CODE")
    parser.add_argument("--official-code", type=Path, help="a clone of the official PersonaLens code")
    parser.add_argument("--scoring", default="strict", choices=SCORING_RULES,
                        help="strict (default): the kit's answer parser; official: the official gather "
                        "script's reading (notebooks 04 and 06)")
    parser.add_argument(
        "--demographics-seed", type=int, default=0, help="seed of the generated benchmark's demographics"
    )
    parser.add_argument("--batch", action="store_true",
                        help="simulate (03) and judge (04) through the backend's batch API, at batch prices: "
                        "anthropic (Message Batches) or openai (Batch API)")
    args = parser.parse_args(argv)
    settings = Settings(
        argv=tuple(sys.argv[1:] if argv is None else argv),
        run=args.run,
        backend=args.backend,
        benchmark_dir=args.benchmark_dir,
        official_users=args.users,
        ablation_users=args.ablation_users,
        generated_users=args.generated_users,
        domains=tuple(dict.fromkeys(_items(args.domains))) if args.domains else None,
        sd_tasks_per_domain=args.sd_tasks_per_domain,
        md_tasks=args.md_tasks,
        max_concurrency=args.max_concurrency,
        request_timeout_s=args.request_timeout_s,
        call_deadline_s=args.call_deadline_s,
        seed=args.seed,
        backend_seed=args.backend_seed,
        demographics_seed=args.demographics_seed,
        annotations=args.annotations,
        prompt_set=args.prompt_set,
        official_code=args.official_code,
        scoring=args.scoring,
        batch=args.batch,
    )
    if args.passes:
        settings.passes = _items(args.passes)
    elif args.backend != "offline":
        settings.passes = ("official",) if (args.benchmark_dir or find_official_data()) else ("generated",)
    if args.task_types:
        settings.task_types = _items(args.task_types)
    if args.backend != "offline":
        settings.assistant_models = ANTHROPIC_ASSISTANTS
        settings.user_model = settings.judge_model = "Claude Sonnet 4.5"
        settings.ablation_model, settings.second_judge_model = "Claude Haiku 4.5", "Claude Haiku 4.5"
        settings.reviewer_model = "Claude Haiku 4.5"
        settings.focus_model = None
    if args.assistant_models:
        settings.assistant_models = _items(args.assistant_models)
        if settings.focus_model not in settings.assistant_models:  # Figures 4, 5 need an assistant 04 judged
            settings.focus_model = settings.assistant_models[0]
    for name in ("ablation_model", "focus_model", "user_model", "judge_model", "second_judge_model",
                 "reviewer_model", "compare_assistant"):
        if getattr(args, name):
            setattr(settings, name, getattr(args, name))
    return settings


def problems(settings: Settings) -> list[str]:
    """Everything wrong with the options, one line each, found before any notebook starts."""
    found = [f"--passes {p!r}: unknown pass; use {' and/or '.join(PASSES)}"
             for p in settings.passes if p not in PASSES]
    if not settings.passes:
        found.append(f"--passes: name at least one pass ({' and/or '.join(PASSES)})")
    if settings.batch and settings.backend not in BATCH_BACKENDS:
        found.append(f"--batch: the {settings.backend} backend has no batch API; use --backend "
                     f"{' or '.join(BATCH_BACKENDS)}")
    bounds = settings.max_concurrency
    if low := ([f"{key}={n}" for key, n in bounds.items() if n < 1] if isinstance(bounds, dict)
               else [str(bounds)] if bounds < 1 else []):
        found.append(f"--max-concurrency {', '.join(low)}: give a number of at least 1")
    for option, value in (("--ablation-users", settings.ablation_users),
                          *((("--generated-users", settings.generated_users),)
                            if "generated" in settings.passes else ())):
        if value < 1:
            found.append(f"{option} {value}: give a number of at least 1")
    try:
        ClientOptions(request_timeout_s=settings.request_timeout_s, call_deadline_s=settings.call_deadline_s)
    except ValueError as exc:
        found.append(f"--request-timeout-s/--call-deadline-s: {exc}")
    for option, value in (("--seed", settings.seed), ("--backend-seed", settings.backend_seed),
                          ("--demographics-seed", settings.demographics_seed)):
        if value < 0:
            found.append(f"{option} {value}: a seed is a number of at least 0")
    if settings.official_users not in (*SAMPLES, ALL_USERS):
        found.append(f"--users {settings.official_users!r}: use one of {', '.join(SAMPLES)} or {ALL_USERS}")
    if settings.benchmark_dir is not None and not is_benchmark(settings.benchmark_dir):
        found.append(f"--benchmark-dir {settings.benchmark_dir}: no benchmark there (profile/ and task/)")
    if settings.annotations and not glob.glob(settings.annotations):
        found.append(f"--annotations {settings.annotations!r}: no file matches")
    if not settings.assistant_models:
        found.append("--assistant-models: name at least one assistant for Table 3")
    elif settings.focus not in (*settings.assistant_models, settings.ablation_model):
        found.append(f"--focus-model {settings.focus!r}: use one of the assistants (--assistant-models) or "
                     "the ablation assistant, whose dialogues the run makes")
    return (found + _generation_problems(settings) + _folder_problems(settings) + _spec_problems(settings)
            + _prompt_problems(settings))


def _generation_problems(settings: Settings) -> list[str]:
    """The task types, and the options that size the generated benchmark: those are refused when no
    generated pass runs; else the domains must be the kit's, a task type simulated needs tasks, and
    multi-domain tasks need enough domains (notebook 01 would stop on any of these)."""
    found = [f"--task-types {kind!r}: unknown task type; use {' and/or '.join(TASK_TYPES)}"
             for kind in settings.task_types if kind not in TASK_TYPES]
    if not settings.task_types:
        found.append(f"--task-types: name at least one ({' and/or '.join(TASK_TYPES)})")
    counts = {SD: ("--sd-tasks-per-domain", settings.sd_tasks_per_domain),
              MD: ("--md-tasks", settings.md_tasks)}
    given = [option for option, value in (("--domains", settings.domains), *counts.values())
             if value is not None]
    if "generated" not in settings.passes:
        return found + [f"{option}: it sizes the generated benchmark, and --passes "
                        f"{','.join(settings.passes)} makes none; add generated to --passes or leave it out"
                        for option in given]
    known = load_schema().domain_names
    found += [f"--domains {name!r}: unknown domain; use one of {', '.join(known)}"
              for name in settings.domains or () if name not in known]
    for kind, (option, value) in counts.items():
        least = 1 if kind in settings.task_types else 0
        if value is not None and value < least:
            found.append(f"{option} {value}: give at least {least}"
                         + (f" ({kind} is among --task-types)" if least else ""))
    md_tasks = GenerationConfig.md_tasks if settings.md_tasks is None else settings.md_tasks
    if md_tasks and settings.domains and len(settings.domains) < MD_DOMAIN_RANGE[0]:
        found.append(f"--domains {','.join(settings.domains)}: a multi-domain task spans at least "
                     f"{MD_DOMAIN_RANGE[0]} domains; name more, or give --task-types SD --md-tasks 0")
    return found


def _folder_problems(settings: Settings) -> list[str]:
    """Every folder the run writes, checked before the first notebook (so before any model call): the
    run's folder and runs/ (runs/LATEST), the published tables/ and figures/, and the response cache
    when a network backend is called."""
    folders = {f"--run {settings.run!r}": settings.root, "runs/LATEST": runs_dir(),
               **{f"the published {sub}/": project_root() / sub for sub in OUTPUT_FOLDERS}}
    if settings.backend != "offline":
        folders["the response cache (PERSONALENS_CACHE)"] = cache_dir()
    return [f"{what}: cannot write {folder} ({blocked} is read-only or not a folder); nothing was run"
            for what, folder in folders.items() if (blocked := unwritable(folder)) is not None]


def _spec_problems(settings: Settings) -> list[str]:
    """Each role's spec read as the notebooks will read it, its endpoint variable set, and a key for
    every role on the anthropic backend."""
    found, keyless = [], []
    for role, text in role_models(settings).items():
        option = OPTIONS.get(role, "--assistant-models")
        try:
            spec = role_spec(settings, role, text, option)
            model = spec if isinstance(spec, ModelSpec) else spec.spec
            if model is not None:
                model.backend_options()
        except SpecError as exc:
            found.append(str(exc))
            continue
        if model is not None and not any(c.isalnum() for c in spec.model):
            found.append(f"{option}={text!r}: {spec.model!r} is not a model name; write a model on "
                         f"--backend or a spec such as 'anthropic:claude-sonnet-4-5'")
        elif spec.backend == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
            keyless.append(role)
    if keyless:
        found.append(f"the anthropic backend ({', '.join(keyless)}) needs ANTHROPIC_API_KEY in the "
                     "environment: export ANTHROPIC_API_KEY=<your key> and run again")
    return found


def _prompt_problems(settings: Settings) -> list[str]:
    try:
        settings.prompts()
    except OfficialCodeError as exc:
        return [str(exc)]
    return []


def main(argv: Sequence[str] | None = None) -> int:
    """Check the options, run the reproduction, say what failed; 0 when every notebook finished."""
    try:
        settings = parse_args(argv)
        if found := problems(settings):
            for line in found:
                print(f"[reproduce] {line}", file=sys.stderr)
            return 1
        results, index = reproduce(settings)
    except KitError as exc:
        if full_traceback_wanted():
            raise
        print(f"[reproduce] {exc.short()}", file=sys.stderr)
        return 1
    steps = [s for r in results for s in r.steps]
    not_ok = failures(results)
    failed = [s for s in not_ok if not s.skipped]
    ok = sum(s.ok for s in steps)
    print(f"[reproduce] ran {ok + len(failed)} notebook(s): {ok} ok, {len(failed)} failed"
          + (f", {len(not_ok) - len(failed)} not run" if len(not_ok) > len(failed) else "")
          + f"; index: {index}")
    for step in not_ok:
        print(f"[reproduce]   {step.notebook}: {step.outcome}")
    return 1 if not_ok else 0
