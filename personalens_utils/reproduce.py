"""One command that regenerates the paper's tables and figures: notebooks 01-06 under papermill.

`python -m personalens_utils.reproduce --run NAME` (what `make reproduce` calls) runs the notebooks
in pipeline order from one parameter set, once per benchmark "pass": a small benchmark generated
on the spot, and the official data when the kit finds it. Executed notebooks, run stores, tables
and figures of a pass go to `runs/<run>/<pass>/`; the main pass's tables and figures are copied to
the top-level `tables/` and `figures/`, and `runs/LATEST` names that pass, so the notebooks on their
default parameters work on its benchmark and run store. `runs/<run>/INDEX.md` lists every table and
figure of the paper with the file that reproduces it, or the reason it was not reproduced.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import papermill

from personalens_utils.analysis.scores import load_dialogues, load_judgments

from .judging import SCORING_RULES
from .llm import registry
from .llm.offline.reference import DESIGNED_ORDER
from .llm.specs import ModelSpec, SpecError
from .paths import find_official_data, project_root, runs_dir, write_latest
from .prompting import PROMPT_SETS
from .prompts.official import OfficialCodeError, load_official_prompts
from .store import RunStore

NOTEBOOKS = ("01_generation", "02_validation", "03_simulation", "04_judging", "05_ablation", "06_analysis")
OFFLINE_ASSISTANTS = DESIGNED_ORDER
"""Offline, Table 3 compares reference assistants of a known order (llm/offline/reference.py)."""
OFFLINE_ABLATION = "ref-follows-setting"
"""The offline ablation assistant: it uses exactly the context each setting gives."""
OFFLINE_FOCUS = "ref-past-interactions"
"""The offline assistant of Figures 4, 5 and Table 13: its per-domain scores vary with the summaries."""
ANTHROPIC_ASSISTANTS = ("Claude Haiku 4.5", "Claude Sonnet 4.5")


@dataclass(frozen=True)
class PaperItem:
    """One table or figure of the paper, the file stem that reproduces it and the notebook that writes it."""

    name: str
    stem: str
    notebook: str
    what: str
    models: str  # which models made it: see `_models`


PAPER_ITEMS = (
    PaperItem("Table 1", "table1_", "02_validation", "tasks and dialogues per domain", "none"),
    PaperItem("Table 3", "table3_", "06_analysis", "assistant models: TCR, P, Nat., Coh. (SD, MD)", "judged"),
    PaperItem("Table 4", "table4_", "05_ablation", "ablation over assistant settings", "ablation"),
    PaperItem("Table 5", "table5_", "06_analysis", "agreement of the judge with annotators", "judges"),
    PaperItem("Table 6", "table6_", "02_validation", "demographics, part 1", "none"),
    PaperItem("Table 7", "table7_", "02_validation", "demographics, part 2", "none"),
    PaperItem("Table 8", "table8_", "02_validation", "preference types, part 1", "none"),
    PaperItem("Table 9", "table9_", "02_validation", "preference types, part 2", "none"),
    PaperItem("Table 10", "table10_", "02_validation", "lexical diversity of dialogues", "simulated"),
    PaperItem("Table 11", "table11_", "06_analysis", "models: roles, backend ids, prices", "registry"),
    PaperItem("Table 12", "table12_", "06_analysis", "user agent naturalness and coherence", "judged"),
    PaperItem("Table 13", "table13_", "06_analysis", "dialogue statistics", "focus_dialogues"),
    PaperItem("Figure 3", "figure3_", "02_validation", "demographic distribution", "none"),
    PaperItem("Figure 4", "figure4_", "06_analysis", "per-domain TCR and P of one assistant", "focus"),
    PaperItem("Figure 5", "figure5_", "06_analysis", "turn-level personalization", "focus"),
    PaperItem(
        "Radar chart",
        "figure_radar",
        "06_analysis",
        "per-domain P, one polygon per model (extra)",
        "judged",
    ),
)
NOT_COMPUTED = (
    ("Table 2", "a comparison with other benchmarks taken from the literature; nothing to compute"),
    ("Figures 1, 2", "illustrations of the benchmark"),
    ("Figures 6-21", "prompts; the kit's own wording lives in personalens_utils/prompts"),
)


@dataclass
class Settings:
    """The one parameter set every notebook of a reproduction is run from."""

    run: str
    backend: str = "offline"
    user_model: str = "Claude 3 Sonnet"
    assistant_models: tuple[str, ...] = OFFLINE_ASSISTANTS
    ablation_model: str = OFFLINE_ABLATION
    focus_model: str | None = OFFLINE_FOCUS
    """The assistant of Figures 4, 5 and Table 13; None: the ablation assistant."""
    judge_model: str = "Claude 3.5 Sonnet"
    second_judge_model: str = "Claude 3.7 Sonnet"
    compare_assistant: str | None = None
    """An assistant (e.g. a `python:` spec) notebook 05 compares with the ablation assistant in Table 3."""
    official_users: str = "sample_50"
    ablation_users: int = 20
    generated_users: int = 20
    task_types: tuple[str, ...] = ("SD", "MD")
    max_concurrency: int = 16
    seed: int = 0
    """Sampling and resampling seed: bootstrap, permutation, Self-BLEU and annotation samples."""
    backend_seed: int = 0
    """Seed of the offline backend in every notebook that calls a model."""
    demographics_seed: int = 0
    """Seed of the demographics notebook 01 samples for the generated benchmark."""
    benchmark_dir: Path | None = None
    passes: tuple[str, ...] = ("generated", "official")
    annotations: str | None = None
    prompt_set: str = "kit"
    """Whose prompts notebooks 03-06 use: the kit's, or the official code's (docs/simulation.md)."""
    official_code: Path | None = None
    """The official code for `prompt_set="official"`; None: $PERSONALENS_CODE or found beside the data."""
    scoring: str = "strict"
    """How notebooks 04 and 06 read judge answers: the kit's parser, or the official one (docs/judging.md)."""
    argv: tuple[str, ...] = ()
    notebooks_dir: Path = field(default_factory=lambda: project_root() / "notebooks")

    @property
    def focus(self) -> str:
        return self.focus_model or self.ablation_model

    @property
    def root(self) -> Path:
        return runs_dir() / self.run


@dataclass
class StepResult:
    """One notebook run: ok, failed (message says why), or skipped because the notebook does not exist."""

    notebook: str
    executed: Path | None
    seconds: float
    ok: bool
    message: str = ""
    skipped: bool = False


@dataclass
class PassResult:
    name: str
    benchmark: str
    users: str
    ablation_users: str
    folder: Path
    steps: list[StepResult] = field(default_factory=list)
    started: float = field(default_factory=time.time)


def _declared(notebook: Path) -> set[str]:
    return set(papermill.inspect_notebook(str(notebook)))


def run_notebook(
    settings: Settings, name: str, out: Path, params: dict[str, Any], label: str = ""
) -> StepResult:
    """Execute one notebook with the parameters it declares; a failure is recorded, not raised."""
    source = settings.notebooks_dir / f"{name}.ipynb"
    if not source.is_file():
        print(f"[reproduce] {name}{label}: skipped, {source} does not exist", flush=True)
        return StepResult(name + label, None, 0.0, False, f"{source.name} does not exist yet", skipped=True)
    declared = _declared(source)
    passed = {k: v for k, v in params.items() if k in declared}
    out.mkdir(parents=True, exist_ok=True)
    executed = out / f"{name}{label}.ipynb"
    started = time.perf_counter()
    print(f"[reproduce] {name}{label}: {', '.join(f'{k}={v!r}' for k, v in passed.items())}", flush=True)
    try:
        _execute(source, executed, passed, settings.notebooks_dir, f"{name}{label}")
    except Exception as exc:  # a failed notebook is reported in INDEX.md; later steps still run
        seconds = time.perf_counter() - started
        summary = str(exc).strip().splitlines()
        message = next((line for line in reversed(summary) if line.strip()), type(exc).__name__)
        print(f"[reproduce] {name}{label} FAILED after {seconds:.0f}s: {message}", flush=True)
        return StepResult(name + label, executed, seconds, False, message[:400])
    seconds = time.perf_counter() - started
    print(f"[reproduce] {name}{label} done in {seconds:.0f}s", flush=True)
    return StepResult(name + label, executed, seconds, True)


KERNEL_START_FAILURE = "Kernel died before replying to kernel_info"
"""What papermill raises when a kernel cannot start, e.g. when another kernel took its port first."""


def _execute(source: Path, executed: Path, params: dict[str, Any], cwd: Path, name: str) -> None:
    """papermill, started again once if the kernel died before running anything (a port race
    between kernels starting at the same moment); any other failure is the notebook's own."""
    for attempt in (1, 2):
        try:
            papermill.execute_notebook(
                str(source), str(executed), parameters=params, kernel_name="python3", progress_bar=False,
                cwd=str(cwd),
            )
            return
        except Exception as exc:  # papermill re-raises the kernel client's RuntimeError as it is
            if attempt == 2 or KERNEL_START_FAILURE not in str(exc):
                raise
            print(f"[reproduce] {name}: the kernel did not start ({exc}); starting it again", flush=True)


def _slug(model: str) -> str:
    return "-" + "".join(c if c.isalnum() else "_" for c in model).strip("_").lower()


def role_specs(settings: Settings) -> dict[str, ModelSpec]:
    """Every role's model spec (`backend:model`, `python:...`, or a model on `--backend`); a spec that
    cannot be read stops the run before any notebook starts."""
    roles = {"user agent": settings.user_model,
             **{f"assistant {m}": m for m in settings.assistant_models},
             "ablation assistant": settings.ablation_model,
             "judge": settings.judge_model,
             "second judge": settings.second_judge_model,
             **({"compared assistant": settings.compare_assistant} if settings.compare_assistant else {})}
    return {role: ModelSpec.parse(text, settings.backend, what=role) for role, text in roles.items()}


def model_name(settings: Settings, text: str) -> str:
    """The model name a spec's records carry (notebook 06 selects stored records by name)."""
    return ModelSpec.parse(text, settings.backend).model


def run_pass(settings: Settings, name: str, benchmark_dir: Path | None) -> PassResult:
    """Run 01 (generated pass only) through 06 on one benchmark into runs/<run>/<name>/."""
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
    result = PassResult(
        name, str(bench), "all generated" if generated else str(users), ablation_users, folder
    )
    common = {
        "backend": settings.backend,
        "benchmark_dir": str(bench),
        "users": users,
        "task_types": list(settings.task_types),
        "run_dir": str(folder / "store"),
        "output_dir": str(folder),
        "max_concurrency": settings.max_concurrency,
        "seed": settings.seed,
        "backend_seed": settings.backend_seed,
        "user_model": settings.user_model,
        "judge_model": settings.judge_model,
        "prompt_set": settings.prompt_set,
        "official_code": str(settings.official_code) if settings.official_code else None,
        "scoring": settings.scoring,
    }
    if generated:
        result.steps.append(
            run_notebook(
                settings,
                "01_generation",
                folder,
                {
                    **common,
                    "n_users": settings.generated_users,
                    "demographics_seed": settings.demographics_seed,
                    "generated_dir": str(bench),
                    "run_dir": str(folder / "generation"),
                    "model": settings.user_model,
                },
            )
        )
    for model in settings.assistant_models:
        result.steps.append(
            run_notebook(
                settings,
                "03_simulation",
                folder,
                {**common, "assistant_model": model, "output_dir": str(folder / f"simulation{_slug(model)}")},
                _slug(model),
            )
        )
    for step in ("04_judging", "02_validation"):
        result.steps.append(run_notebook(settings, step, folder, common))
    result.steps.append(
        run_notebook(
            settings,
            "05_ablation",
            folder,
            {
                **common,
                "assistant_model": settings.ablation_model,
                "ablation_users": settings.ablation_users,
                "compare_assistant": settings.compare_assistant,
            },
        )
    )
    result.steps.append(
        run_notebook(
            settings,
            "06_analysis",
            folder,
            {
                **common,
                "user_model": model_name(settings, settings.user_model),
                "judge_model": model_name(settings, settings.judge_model),
                "assistant_models": [model_name(settings, m) for m in settings.assistant_models],
                "focus_model": model_name(settings, settings.focus),
                "second_judge_model": settings.second_judge_model,
                "annotation_sheets": settings.annotations,
            },
        )
    )
    return result


def produced(folder: Path, stem: str, since: float) -> list[Path]:
    """Files under tables/ and figures/ of a pass that start with `stem` and were written by this run."""
    hits = []
    for sub in ("tables", "figures"):
        for path in sorted((folder / sub).glob(f"{stem}*")):
            if path.stat().st_mtime >= since - 1:
                hits.append(path)
    return hits


def _caption(files: Sequence[Path]) -> str:
    csv = next((f for f in files if f.suffix == ".csv"), None)
    if csv is None:
        return ""
    first = csv.read_text(encoding="utf-8").splitlines()[:1]
    return first[0].lstrip("# ").strip() if first else ""


def _models(settings: Settings, kind: str, generated: bool) -> str:
    """Which models made an item: `kind` says whose dialogues and whose judgments it is computed from."""
    if kind == "registry":
        return "none called; written from personalens_utils/llm/registry.py"
    if kind == "none":
        source = (
            f"a benchmark notebook 01 generated on the {settings.backend} backend" if generated else "data"
        )
        return f"none at analysis time; computed from the benchmark ({source})"
    assistants = ", ".join(settings.assistant_models)
    user, judge = f"user {settings.user_model}", f"judge {settings.judge_model}"
    return {
        "simulated": f"assistants {assistants}; {user}",
        "judged": f"assistants {assistants}; {user}; {judge}",
        "focus": f"assistant {settings.focus}; {user}; {judge}",
        "focus_dialogues": f"assistant {settings.focus}; {user}",
        "ablation": f"assistant {settings.ablation_model} in six settings; {user}; {judge}",
        "judges": f"{judge}; annotators' sheets if given, else second judge {settings.second_judge_model}",
    }[kind]


def _reason(item: PaperItem, result: PassResult) -> str:
    steps = [s for s in result.steps if s.notebook.startswith(item.notebook)]
    if not steps:
        return f"{item.notebook} is not part of this pass"
    skipped = [s for s in steps if s.skipped]
    if skipped:
        return f"notebooks/{skipped[0].message}"
    failed = [s for s in steps if not s.ok]
    if failed:
        return f"{failed[0].notebook} failed: {failed[0].message}"
    return f"{item.notebook} ran but wrote no {item.stem}* file (see its executed copy)"


def store_summary(folder: Path) -> list[str]:
    """Markdown lines: a pass's stored dialogues per assistant, setting and task type, and its judgments."""
    store = RunStore(folder / "store")
    dialogues = load_dialogues(store)
    if dialogues.empty:
        return ["Run store: empty."]
    counts = dialogues.groupby(
        ["assistant_model", "assistant_setting", "task_type", "dialogue_status"]
    ).size()
    lines = ["Run store `store/` (dialogues by assistant, setting, task type and how they ended):", ""]
    lines += ["| assistant | setting | type | status | dialogues |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {m} | {st} | {t} | {status} | {n} |" for (m, st, t, status), n in counts.items()]
    judgments = load_judgments(store)
    if not judgments.empty:
        per = judgments.groupby(["judge_model", "judgment_status"]).size()
        lines += ["", "Judgments: " + "; ".join(f"{j} {status}: {n}" for (j, status), n in per.items())]
    return [*lines, ""]


def _all_outputs(res: PassResult) -> list[Path]:
    """Every table (Markdown) and figure (PNG) this run wrote anywhere in a pass's folder."""
    found = [*res.folder.rglob("tables/*.md"), *res.folder.rglob("figures/*.png")]
    return sorted(f for f in found if f.stat().st_mtime >= res.started - 1)


def _item_lines(settings: Settings, res: PassResult, item: PaperItem, files: list[Path]) -> list[str]:
    root = settings.root
    shown = ", ".join(f"`{f.relative_to(root)}`" for f in files if f.suffix in (".md", ".png"))
    step = next((s for s in res.steps if s.notebook.startswith(item.notebook) and s.executed), None)
    made = f"`{step.executed.relative_to(root)}`" if step and step.executed else item.notebook
    lines = [
        f"- **{item.name}** ({item.what}): {shown}",
        f"  - made by {made}; backend {settings.backend}; "
        f"models: {_models(settings, item.models, res.name == 'generated')}",
    ]
    caption = _caption(files)
    if caption:
        lines.append(f"  - caption: {caption}")
    return lines


def _called_lines(settings: Settings) -> list[str]:
    """When any role is not offline, the backend and id each role calls, so a retired paper model's
    successor (and a Python assistant's model) is on record."""
    specs = role_specs(settings)
    if all(spec.backend == "offline" for spec in specs.values()):
        return []
    lines = [line for role, spec in specs.items()
             for line in registry.role_lines({role: spec.model}, spec.backend)]
    return ["Called (see Table 11 for the paper's models):", "", *(f"- {line}" for line in lines), ""]


def _prompt_line(settings: Settings) -> str:
    if settings.prompt_set == "kit":
        return "Prompts: the kit's own (`prompt_set=kit`)."
    prompts = load_official_prompts(settings.official_code)
    return (f"Prompts: the official code's (`prompt_set=official`, read from `{prompts.folder}`, prompt "
            f"version `{prompts.version}`); turn-level personalization, which the official code never "
            "runs, with the kit's prompt.")


def _scoring_line(settings: Settings) -> str:
    other = "official" if settings.scoring == "strict" else "strict"
    return (f"Judge answers read under the `{settings.scoring}` scoring rule (docs/judging.md); Tables 3 and "
            f"12 show the `{other}` rule's mean after a cell wherever it differs.")


def write_index(settings: Settings, results: Sequence[PassResult], seconds: float) -> Path:
    """runs/<run>/INDEX.md: every paper table and figure, the file that reproduces it, or why not."""
    root = settings.root
    offline = settings.backend == "offline"
    lines = [
        f"# Reproduction `{settings.run}`",
        "",
        f"Backend: **{settings.backend}**."
        + (
            " The offline backend is a rule-based simulation, not a language model: its numbers show the "
            "pipeline at work, not findings about any model, and every table and figure says so. Its "
            "assistants are reference assistants built to rank in a known order on personalization and "
            f"task completion ({' < '.join(DESIGNED_ORDER)}; llm/offline/reference.py): a judge that "
            "does not recover that order in Table 3 is broken."
            if offline
            else ""
        ),
        "",
        f"Models: user agent {settings.user_model}; assistants {', '.join(settings.assistant_models)}; "
        f"ablation assistant {settings.ablation_model}; Figures 4, 5 assistant {settings.focus}; "
        f"judge {settings.judge_model}; second judge "
        f"(Table 5 without annotation sheets) {settings.second_judge_model}"
        + (f"; compared with the ablation assistant in notebook 05: {settings.compare_assistant}."
           if settings.compare_assistant else "."),
        "",
        _prompt_line(settings),
        "",
        _scoring_line(settings),
        "",
        *_called_lines(settings),
        f"Total time: {seconds / 60:.1f} min. Command: `python -m personalens_utils.reproduce "
        f"{' '.join(settings.argv)}`".rstrip()
        + "",
        "",
    ]
    for res in results:
        lines += [
            f"## Pass `{res.name}`",
            "",
            f"- benchmark: `{res.benchmark}`",
            f"- users of Tables 3, 5, 12, 13 and Figures 4, 5: {res.users}",
            f"- users of the six-setting ablation (Table 4): {res.ablation_users}",
            f"- folder: `{res.folder.relative_to(root)}/` (executed notebooks, store, tables, figures)",
            "",
            "### Reproduced",
            "",
        ]
        missing, matched = [], set()
        for item in PAPER_ITEMS:
            files = produced(res.folder, item.stem, res.started)
            matched.update(files)
            if files:
                lines += _item_lines(settings, res, item, files)
            else:
                missing.append((item, _reason(item, res)))
        lines.append("")
        if missing:
            lines += ["### Not reproduced", ""]
            lines += [f"- **{item.name}** ({item.what}): {why}" for item, why in missing]
            lines.append("")
        others = [f for f in _all_outputs(res) if f not in matched]
        if others:
            lines += ["### Other outputs", ""] + [f"- `{f.relative_to(root)}`" for f in others] + [""]
        lines += ["### Run store", "", *store_summary(res.folder)]
        lines += [
            "### Notebooks",
            "",
            "| notebook | executed copy | time | result |",
            "| --- | --- | --- | --- |",
        ]
        for step in res.steps:
            copy = f"`{step.executed.relative_to(root)}`" if step.executed and step.executed.exists() else "-"
            outcome = "ok" if step.ok else ("skipped: " if step.skipped else "FAILED: ") + step.message
            lines.append(f"| {step.notebook} | {copy} | {step.seconds:.0f} s | {outcome} |")
        lines.append("")
    lines += ["## Not computational", ""] + [f"- {name}: {why}" for name, why in NOT_COMPUTED] + [""]
    index = root / "INDEX.md"
    index.write_text("\n".join(lines), encoding="utf-8")
    return index


def publish(result: PassResult) -> list[Path]:
    """Copy a pass's tables and figures to the top-level tables/ and figures/ folders."""
    copied = []
    for sub in ("tables", "figures"):
        target = project_root() / sub
        target.mkdir(exist_ok=True)
        for path in sorted((result.folder / sub).glob("*")):
            if path.is_file() and path.stat().st_mtime >= result.started - 1:
                copied.append(Path(shutil.copy2(path, target / path.name)))
    return copied


def reproduce(settings: Settings) -> tuple[list[PassResult], Path]:
    started = time.perf_counter()
    settings.root.mkdir(parents=True, exist_ok=True)
    official = settings.benchmark_dir or find_official_data()
    results = []
    if "generated" in settings.passes:
        results.append(run_pass(settings, "generated", None))
    if "official" in settings.passes:
        if official is None:
            print(
                "[reproduce] official data not found ($PERSONALENS_DATA or data/personalens/): "
                "skipping the official pass",
                flush=True,
            )
        else:
            results.append(run_pass(settings, "official", Path(official)))
    if results:
        main = results[-1]
        n = len(publish(main))
        print(f"[reproduce] copied {n} table/figure files of pass {main.name!r} to tables/ and figures/")
        latest = write_latest(main.folder, Path(main.benchmark), runs=runs_dir(),
                              assistant_models=[model_name(settings, m) for m in settings.assistant_models],
                              focus_model=model_name(settings, settings.focus))
        print(f"[reproduce] {latest} points notebooks 02-06 on default parameters at pass {main.name!r}")
    index = write_index(settings, results, time.perf_counter() - started)
    return results, index


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(
        prog="python -m personalens_utils.reproduce",
        description="Run notebooks 01-06 with papermill and write runs/<run>/INDEX.md.",
    )
    parser.add_argument("--run", default="default", help="name of the run folder under runs/")
    parser.add_argument(
        "--backend", default="offline", help="offline (default), anthropic, openai or bedrock"
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
        "--assistant-models",
        help="comma list of assistants for Table 3; each a model on --backend or a spec: backend:model, "
        "openai@VAR:model, python:package.module:Name[?k=v&...]",
    )
    parser.add_argument("--ablation-model", help="the assistant of the ablation (Table 4); a spec too")
    parser.add_argument(
        "--focus-model", help="assistant of Figures 4, 5 and Table 13 (offline: ref-past-interactions)"
    )
    parser.add_argument("--user-model", help="the user agent's model, or a spec backend:model")
    parser.add_argument("--judge-model", help="the judge's model, or a spec backend:model")
    parser.add_argument("--second-judge-model", help="judge for judge-judge agreement when no annotations")
    parser.add_argument(
        "--compare-assistant",
        help="your assistant (e.g. python:personalens_utils.assistants.retrieval:RetrievalAssistant): "
        "notebook 05 compares it with the ablation assistant on the same scenarios "
        "(Table 3, table3_own_assistant)",
    )
    parser.add_argument("--annotations", help="glob of filled annotation sheets (CSV) for Table 5")
    parser.add_argument("--max-concurrency", type=int, default=16)
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
    args = parser.parse_args(argv)
    settings = Settings(
        argv=tuple(sys.argv[1:] if argv is None else argv),
        run=args.run,
        backend=args.backend,
        benchmark_dir=args.benchmark_dir,
        official_users=args.users,
        ablation_users=args.ablation_users,
        generated_users=args.generated_users,
        max_concurrency=args.max_concurrency,
        seed=args.seed,
        backend_seed=args.backend_seed,
        demographics_seed=args.demographics_seed,
        annotations=args.annotations,
        prompt_set=args.prompt_set,
        official_code=args.official_code,
        scoring=args.scoring,
    )
    if args.passes:
        settings.passes = tuple(p.strip() for p in args.passes.split(",") if p.strip())
    elif args.backend != "offline":
        settings.passes = ("official",) if (args.benchmark_dir or find_official_data()) else ("generated",)
    if args.backend != "offline":
        settings.assistant_models = ANTHROPIC_ASSISTANTS
        settings.user_model = settings.judge_model = "Claude Sonnet 4.5"
        settings.ablation_model, settings.second_judge_model = "Claude Haiku 4.5", "Claude Haiku 4.5"
        settings.focus_model = None
    if args.assistant_models:
        settings.assistant_models = tuple(m.strip() for m in args.assistant_models.split(",") if m.strip())
        if settings.focus_model not in settings.assistant_models:
            settings.focus_model = None
    for name in ("ablation_model", "focus_model", "user_model", "judge_model", "second_judge_model",
                 "compare_assistant"):
        if getattr(args, name):
            setattr(settings, name, getattr(args, name))
    unknown = set(settings.passes) - {"generated", "official"}
    if unknown:
        parser.error(f"unknown passes {sorted(unknown)}; use generated and/or official")
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    try:
        specs = role_specs(settings)
    except SpecError as exc:
        print(f"[reproduce] {exc}", file=sys.stderr)
        return 2
    on_anthropic = sorted(role for role, spec in specs.items() if spec.backend == "anthropic")
    if on_anthropic and not os.environ.get("ANTHROPIC_API_KEY"):
        print(f"[reproduce] the anthropic backend ({', '.join(on_anthropic)}) needs ANTHROPIC_API_KEY "
              "in the environment", file=sys.stderr)
        return 2
    if settings.prompt_set != "kit":
        try:
            load_official_prompts(settings.official_code)
        except OfficialCodeError as exc:
            print(f"[reproduce] {exc}", file=sys.stderr)
            return 2
    results, index = reproduce(settings)
    steps = [s for r in results for s in r.steps]
    failed = [s for s in steps if not s.ok and not s.skipped]
    skipped = [s for s in steps if s.skipped]
    missing = f", {len(skipped)} not run (their notebook file is missing)" if skipped else ""
    print(f"[reproduce] ran {sum(s.ok for s in steps)} notebook(s){missing}, {len(failed)} failed; "
          f"index: {index}")
    for step in [*skipped, *failed]:
        print(f"[reproduce]   {step.notebook}: {'skipped' if step.skipped else 'FAILED'}: {step.message}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
