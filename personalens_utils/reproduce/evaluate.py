"""`make evaluate ASSISTANT=<spec>`: your assistant beside the latest reproduction's reference assistants.

The reproduction (`runs/LATEST`) stays as `make reproduce` left it. Its store (and notebook 07's) is
copied into the evaluation's own folder, `runs/<run>/<pass>/evaluations/<assistant>/`, so every stored
dialogue and judgment is reused and the only calls made are the new assistant's (and the judges' on its
dialogues). Notebooks 03-07 then run there with the reproduction's own parameters, and the folder gets
Tables 3, 4 (the new assistant's settings), 12, 13, Figures 4, 5, the radar chart, the judge report
card (07), the paired differences of the new assistant against every reference (Table D1), and INDEX.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from personalens_utils.assistants import AssistantSpec
from personalens_utils.assistants.python import PYTHON, SPEC_FORM, row_label
from personalens_utils.base.errors import KitError, full_traceback_wanted
from personalens_utils.base.paths import LatestRun, latest_run, runs_dir
from personalens_utils.labels.sampling import SampleDesign, read_manifest, shared_equally
from personalens_utils.labels.sheets import MANIFEST_NAME
from personalens_utils.measures.scores import load_scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.reproduce.index import INDEX, PAPER_ITEMS, reason
from personalens_utils.reproduce.notebooks import (
    RunnerError,
    StepResult,
    failure_line,
    run_notebook,
    runner_step,
)
from personalens_utils.reproduce.settings import Settings
from personalens_utils.runstore.records import stored_types
from personalens_utils.runstore.store import ReproductionStore, RunStore, start_from
from personalens_utils.simulation.settings import AssistantSetting, SettingError, hidden_note
from personalens_utils.trust.differences import differences_table

SHARED = ("backend", "benchmark_dir", "users", "task_types", "max_concurrency", "request_timeout_s",
          "call_deadline_s", "seed", "backend_seed", "prompt_set", "official_code", "scoring")
"""Parameters every notebook of the evaluation takes from the reproduction's executed notebooks."""
STAGES = ("03_simulation", "04_judging", "05_ablation", "06_analysis", "07_trust")
"""07 last: its own store is a copy of the evaluation's store once 03-06 wrote it (see `evaluate`). Not 10:
an evaluation places one assistant among the references under the reproduction's user agent; whether that
holds under other user agents is notebook 10's question, asked with it among `assistant_models`."""
TRUST_STORE = "trust_store"
"""Notebook 07's own store in its output folder (notebooks/07_trust.ipynb)."""
ANNOTATION = "annotation"
"""Notebook 06's folder of Table 5's annotation sample, in its output folder."""
COMPARED_SETTING = "base"
"""The setting the evaluation's tables compare in: the one the reproduction simulated its assistants in."""
DIFFERENCES = "tableD1"
"""The step that writes Table D1 after the notebooks (`differences`)."""
TABLE_D1 = OutputId("table", "D1", notebook=DIFFERENCES, name="Table D1",
                    what="the new assistant minus each reference, paired on the scenarios both hold",
                    models="judged")
ITEMS = (*(item for item in PAPER_ITEMS if item.notebook in STAGES), TABLE_D1)
"""The tables and figures an evaluation makes: its notebooks' paper items, and Table D1."""


class EvaluationError(KitError):
    """`make evaluate` cannot start: no reproduction, or one it cannot read; the message says what to do."""

    says_all = True


@dataclass
class Evaluation:
    """One evaluation: the assistant as given and as its records name it, where it went, what ran."""

    spec: str
    model: str
    reproduction: LatestRun
    folder: Path
    settings: tuple[str, ...] = (COMPARED_SETTING,)
    steps: list[StepResult] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    new_records: dict[str, int] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Every notebook and Table D1 made."""
        done = {step.notebook for step in self.steps if step.ok}
        return done >= {*STAGES, DIFFERENCES} and all(step.ok for step in self.steps)

    @property
    def store(self) -> Path:
        return self.folder / "store"


def executed_parameters(folder: Path, notebook: str) -> dict[str, Any]:
    """The parameters papermill ran `notebook` with in a reproduction's folder (its executed copy)."""
    found = sorted(folder.glob(f"{notebook}*.ipynb"))
    if not found:
        raise EvaluationError(f"{folder} holds no executed {notebook}: the reproduction did not finish it; "
                              "run `make reproduce` again")
    return dict(nbformat.read(found[0], as_version=4).metadata.get("papermill", {}).get("parameters", {}))


def run_spec(spec: AssistantSpec, text: str) -> str:
    """The spec the notebooks are given: a Python assistant by its stored target (a file by its absolute
    path, found from any folder), any other assistant as the user wrote it."""
    return f"{PYTHON}:{spec.model}" if spec.backend == PYTHON else text


def plan(reproduction: LatestRun, folder: Path, model_spec: str,
         settings: Sequence[str] = (COMPARED_SETTING,)) -> list[tuple[str, dict[str, Any]]]:
    """The notebooks of an evaluation and their parameters, from the reproduction's own; `settings` are
    those notebook 03 simulates the new assistant in."""
    params = {name: executed_parameters(reproduction.folder, name) for name in STAGES}
    references = list(reproduction.assistant_models)
    common = {key: params["06_analysis"][key] for key in SHARED if key in params["06_analysis"]}
    common.update(benchmark_dir=str(reproduction.benchmark), run_dir=str(folder / "store"),
                  output_dir=str(folder))

    def given(name: str, *keys: str) -> dict[str, Any]:
        return {key: params[name][key] for key in keys if key in params[name]}

    both = [*references, model_spec]
    return [
        ("03_simulation", {**common, **given("03_simulation", "user_model"), "assistant_model": model_spec,
                           "settings": list(settings), "output_dir": str(folder / "simulation")}),
        ("04_judging", {**common, **given("04_judging", "judge_model"), "assistant_models": [model_spec],
                        "settings": list(settings)}),  # 03's dialogues; 05 judges its own
        ("05_ablation", {**common, **given("05_ablation", "user_model", "judge_model", "ablation_users"),
                         "assistant_model": model_spec}),
        ("06_analysis", {**common, **given("06_analysis", "user_model", "judge_model", "second_judge_model",
                                           "annotation_sheets"),
                         "assistant_models": both, "focus_model": model_spec,
                         **annotation_size(reproduction.folder)}),
        ("07_trust", {**common, **given("07_trust", "user_model", "judge_model", "second_judge_model",
                                        "probe_users", "probe_tasks", "repeats", "judge_samples",
                                        "annotation_sheets"),
                      "assistant_models": both}),
    ]


def annotation_size(reproduction: Path) -> dict[str, int]:
    """Notebook 06's `annotation_size` for the evaluation: the reproduction's sample grown by one
    assistant's share. Table 5's sample draws each assistant apart (`labels.sampling.draw_sample`), so each
    reference keeps the dialogues the reproduction drew (its second judge's scores are reused) and only
    the new assistant's are judged. Nothing when the reproduction's sample was not drawn that way (one
    made before it was): 06 then draws as the reproduction said."""
    manifest = reproduction / ANNOTATION / MANIFEST_NAME
    if not manifest.is_file():
        return {}
    drawn = read_manifest(manifest)
    design = SampleDesign.from_manifest(drawn)
    if not drawn.get("apart") or design.by != "assistant_model":
        return {}
    strata = len(design.strata)
    return {"annotation_size": shared_equally(int(drawn["n"]), strata) * (strata + 1)}


def _ids(*stores: Path) -> dict[str, set[str]]:
    """Every record id of each table the stores hold (a run store and its notebook 07 store)."""
    found: dict[str, set[str]] = {}
    for store in (s for s in stores if s.is_dir()):
        opened = RunStore(store)
        for kind in stored_types():
            if (store / f"{kind.table}.jsonl").is_file():
                found.setdefault(kind.table, set()).update(record.id for record in opened.read(kind))
    return found


def evaluation_settings(given: Sequence[str]) -> tuple[str, ...]:
    """The settings 03 simulates the new assistant in: `COMPARED_SETTING` first (the tables compare
    there), then those given, each checked; `EvaluationError` names one that is not a setting."""
    found = [COMPARED_SETTING]
    for text in given:
        try:
            name = AssistantSetting.parse(text).name
        except SettingError as exc:
            raise EvaluationError(f"--settings {text!r}: {exc}") from exc
        if name not in found:
            found.append(name)
    return tuple(found)


def evaluate(spec_text: str, settings: Sequence[str] = ()) -> Evaluation:
    """Put the assistant `spec_text` names beside the latest reproduction's assistants; see the module.

    A rerun on the same reproduction continues in the same folder: what the earlier run stored is kept
    and only what is missing is made. Its INDEX.md says the evaluation is under way until the run ends,
    and names the failed step when the runner itself fails (a `RunnerError`)."""
    reproduction = latest_run()
    if reproduction is None:
        raise EvaluationError(f"no finished reproduction ({runs_dir() / 'LATEST'} is missing or names a "
                              "folder that is gone): run `make reproduce` first, then `make evaluate`")
    backend = executed_parameters(reproduction.folder, "06_analysis").get("backend", "offline")
    spec = AssistantSpec.parse(spec_text, backend, what="ASSISTANT")
    if spec.model in reproduction.assistant_models:
        raise EvaluationError(f"ASSISTANT={spec_text!r} is one of the reproduction's assistants already")
    label = row_label(spec.model)
    slug = "".join(c if c.isalnum() else "_" for c in label).strip("_")
    folder = reproduction.folder / "evaluations" / slug
    model_spec = run_spec(spec, spec_text)
    result = Evaluation(spec_text, spec.model, reproduction, folder, evaluation_settings(settings))
    steps = plan(reproduction, folder, model_spec, result.settings)
    print(f"[evaluate] {label} beside {', '.join(reproduction.assistant_models)} of the reproduction "
          f"{reproduction.folder}; outputs: {folder}", flush=True)
    whole = AssistantSetting.parse("base+all").name
    remedy = (f"its {whole} dialogues (--settings) are simulated and judged too" if whole in result.settings
              else f"make evaluate ARGS='--settings {whole}' simulates and judges it in {whole} too")
    for line in hidden_note(spec, result.settings, remedy):
        print(f"[evaluate] {line}; the tables compare setting {COMPARED_SETTING}, the references'",
              flush=True)
    mark_index(result)
    try:
        _run(result, steps)
        with runner_step(f"writing {folder / INDEX}"):
            write_index(result)
    except RunnerError as exc:
        mark_index(result, stopped=exc)
        raise
    return result


def _run(result: Evaluation, steps: list[tuple[str, dict[str, Any]]]) -> None:
    """The notebooks in order, then Table D1; after a failed notebook the later ones are recorded as
    not run."""
    reproduction, folder = result.reproduction, result.folder
    with runner_step(f"copying the reproduction's store {reproduction.store} into {result.store}"):
        start_from(reproduction.store, result.store, extending=True)  # a rerun extends its own copy
        before = _ids(reproduction.store, reproduction.folder / TRUST_STORE)
    settings = Settings(run=reproduction.folder.parent.name)
    failed: StepResult | None = None
    for number, (notebook, params) in enumerate(steps, 1):
        if failed is not None:
            result.steps.append(StepResult(notebook, None, 0.0, False, f"{failed.notebook} failed",
                                           skipped=True))
            continue
        started = time.perf_counter()
        print(f"[evaluate] [{number}/{len(steps)}] {notebook}", flush=True)
        if notebook == "07_trust":  # its own store starts from the reproduction's 07 and 03-06's new work
            earlier = [p for p in (reproduction.folder / TRUST_STORE,) if p.is_dir()]
            with runner_step(f"preparing notebook 07's store {folder / TRUST_STORE}"):
                ReproductionStore(result.store, folder / TRUST_STORE).extend_with(earlier)
        step = run_notebook(settings, notebook, folder, params)
        result.steps.append(step)
        result.written += [p for p in step.written if p not in result.written]
        if not step.ok:
            failed = step
            continue
        print(f"[evaluate] [{number}/{len(steps)}] {notebook} done in {time.perf_counter() - started:.0f}s",
              flush=True)
    with runner_step(f"counting the new records of {result.store}"):
        after = _ids(result.store, folder / TRUST_STORE)
    result.new_records = {table: len(ids - before.get(table, set())) for table, ids in after.items()}
    result.steps.append(_differences_step(result, dict(steps)["06_analysis"]))
    result.written += [p for p in result.steps[-1].written if p not in result.written]


def _differences_step(result: Evaluation, analysis: dict[str, Any]) -> StepResult:
    """Table D1 as a step of its own: made whenever the new assistant's dialogues were judged (03 and 04
    finished), whatever became of 05-07, and reported like a notebook when it cannot be made."""
    judged = [step for step in result.steps if step.notebook in ("03_simulation", "04_judging")]
    missing = next((step for step in judged if not step.ok), None)
    if missing is not None:
        return StepResult(DIFFERENCES, None, 0.0, False, f"{missing.notebook} failed", skipped=True)
    started = time.perf_counter()
    print("[evaluate] Table D1 (paired differences)", flush=True)
    try:
        written = differences(result, analysis)
    except Exception as exc:  # reported in the summary and INDEX.md like a failed notebook
        message = failure_line(exc)
        print(f"[evaluate] Table D1 FAILED: {message}", flush=True)
        return StepResult(DIFFERENCES, None, time.perf_counter() - started, False, message)
    return StepResult(DIFFERENCES, None, time.perf_counter() - started, True, written=tuple(written))


def differences(result: Evaluation, analysis: dict[str, Any]) -> list[Path]:
    """Table D1: the new assistant minus each reference, paired on the scenarios both hold."""
    tidy = load_scores(RunStore(result.store), judge_model=analysis.get("judge_model"),
                       user_model=analysis.get("user_model"), judge_prompt_set=analysis.get("prompt_set"),
                       scoring=analysis.get("scoring", "strict"))
    models = [*result.reproduction.assistant_models, result.model]
    table = differences_table(tidy, models=models, seed=analysis.get("seed", 0), against=result.model)
    return sorted(table.save(result.folder, TABLE_D1, "paired_differences").values())


def _heading(result: Evaluation) -> list[str]:
    return [f"# Evaluation of `{row_label(result.model)}`", "",
            f"- assistant: `{result.spec}` (its records carry `{result.model}`)",
            f"- beside: {', '.join(f'`{m}`' for m in result.reproduction.assistant_models)} of the "
            f"reproduction `{result.reproduction.folder}`, whose dialogues and judgments were reused as "
            "they were",
            f"- settings it was simulated in: {', '.join(result.settings)} (the tables compare "
            f"{COMPARED_SETTING}, the references' setting)"]


def mark_index(result: Evaluation, stopped: Exception | None = None) -> Path:
    """<evaluation>/INDEX.md while the evaluation is under way (`stopped` None), or after the runner
    stopped before writing the index: an earlier evaluation's index no longer describes the folder."""
    state = ("**Under way**: this file is rewritten when the evaluation ends. If the command is no longer "
             "running, it stopped before writing its index." if stopped is None else
             f"**Stopped**: {stopped}\n\nNothing here is an index of this folder.")
    rerun = "A rerun of the same `make evaluate` continues in this folder, keeping what is stored."
    index = result.folder / INDEX
    result.folder.mkdir(parents=True, exist_ok=True)
    index.write_text("\n".join([*_heading(result), "", state, "", rerun, ""]), encoding="utf-8")
    return index


def write_index(result: Evaluation) -> Path:
    """<evaluation>/INDEX.md: the assistant, the reproduction it stands beside, what ran, what it wrote,
    and each table or figure an evaluation makes that this one did not, with the reason."""
    root = result.folder
    missing = [(item, reason(item, result.steps, "an evaluation")) for item in ITEMS
               if not any(f.parent.parent == root and f.name.startswith(item.stem) for f in result.written)]
    lines = [
        *_heading(result),
        "- new records, here and in 07's store (only the new assistant's dialogues and their judgments): "
        + (", ".join(f"{table} {n}" for table, n in sorted(result.new_records.items())) or "none"),
        "",
        "| step | executed copy | time | result |",
        "| --- | --- | --- | --- |",
        *(f"| {s.notebook} | `{s.executed.relative_to(root) if s.executed else '-'}` | {s.seconds:.0f} s "
          f"| {s.outcome} |" for s in result.steps),
        "",
        "## Outputs",
        "",
        *(f"- `{path.relative_to(root)}`" for path in result.written if path.suffix in (".csv", ".pdf", ".md")
          and path.is_relative_to(root)),
        "",
        *(["## Not made", "", *(f"- **{item.name}** ({item.what}): {why}" for item, why in missing), "",
           "A rerun of the same `make evaluate` continues in this folder: what is stored is kept and only "
           "what is missing is made.", ""] if missing else []),
    ]
    index = root / INDEX
    root.mkdir(parents=True, exist_ok=True)
    index.write_text("\n".join(lines), encoding="utf-8")
    return index


def main(argv: Sequence[str] | None = None) -> int:
    """Evaluate one assistant; 0 when every notebook finished, and where the outputs are either way."""
    parser = argparse.ArgumentParser(prog="python -m personalens_utils.reproduce.evaluate",
                                     description="Put your assistant beside the latest reproduction's.")
    parser.add_argument("--assistant", required=True, help=f"an assistant spec: {SPEC_FORM}, or a model")
    parser.add_argument("--settings", default="",
                        help=f"comma list of settings notebook 03 also simulates the assistant in (e.g. "
                        f"base+all); the tables compare {COMPARED_SETTING}, the setting of the references")
    args = parser.parse_args(argv)
    try:
        result = evaluate(args.assistant, [s.strip() for s in args.settings.split(",") if s.strip()])
    except KitError as exc:
        if full_traceback_wanted():
            raise
        print(f"[evaluate] {exc.short()}", file=sys.stderr)
        return 1
    for step in result.steps:
        if not step.ok:
            print(f"[evaluate] {step.notebook} {step.outcome}", file=sys.stderr)
    print(f"[evaluate] outputs: {result.folder} (index: {result.folder / INDEX})")
    return 0 if result.finished else 1


if __name__ == "__main__":
    sys.exit(main())
