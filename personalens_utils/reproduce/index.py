"""runs/<run>/INDEX.md: every table and figure of the paper, the file this run wrote for it, or why not.

Only what the run's notebooks wrote is listed (each `StepResult.written`), never a file an earlier
run left in the same folder; a notebook that failed or did not run is marked so, and its items are
listed as not reproduced with the reason.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

from personalens_utils.assistants import AssistantSpec
from personalens_utils.assistants.reference_assistants import DESIGNED_ORDER
from personalens_utils.generation.runner import MANIFEST
from personalens_utils.llm.specs import KNOWN_BACKENDS, SpecParts
from personalens_utils.measures.scores import load_dialogues, load_judgments
from personalens_utils.outputs.ids import OutputId, listed
from personalens_utils.outputs.tables import read_caption
from personalens_utils.reproduce.notebooks import PassResult, StepResult
from personalens_utils.reproduce.settings import (
    PERSONA_USERS,
    ROBUSTNESS_STYLES,
    ROBUSTNESS_TASK_TYPES,
    ROBUSTNESS_USERS,
    TRUST_JUDGE_SAMPLES,
    TRUST_PROBE_TASKS,
    TRUST_PROBE_USERS,
    TRUST_REPEATS,
    Settings,
    audit_arms,
    role_models,
    role_specs,
)
from personalens_utils.runstore import run_card
from personalens_utils.runstore.store import RunStore
from personalens_utils.session import (
    analysis,
    benchmark_validation,
    persona_bench,
    robustness,
    trust,
    validity,
)

INDEX = "INDEX.md"


def _paper_order(item: OutputId) -> tuple[bool, float]:
    """The paper's order: tables, then figures, each by number; an extra without a number last."""
    return item.kind == "figure", item.number if isinstance(item.number, int) else math.inf


PAPER_ITEMS: tuple[OutputId, ...] = (
    *sorted(listed((*benchmark_validation.OUTPUTS, *analysis.ABLATION_OUTPUTS, *analysis.ANALYSIS_OUTPUTS)),
            key=_paper_order),
    *listed(trust.OUTPUTS),
    *listed(validity.OUTPUTS),
    *listed(robustness.OUTPUTS),
    *listed(persona_bench.OUTPUTS),
)
"""Every table and figure of the paper (and the kit's extras) INDEX.md lists, as their notebooks declare
them: the paper's own in its order, then the extras of notebooks 07, 09, 10 and 08."""
NOT_COMPUTED = (
    ("Table 2", "a comparison with other benchmarks taken from the literature; nothing to compute"),
    ("Figures 1, 2", "illustrations of the benchmark"),
    ("Figures 6-21", "prompts; the kit's own wording lives in personalens_utils/prompt_templates"),
)




def _caption(files: Sequence[Path]) -> str:
    md = next((f for f in files if f.suffix == ".md"), None)
    return "" if md is None else read_caption(md)


def _models(settings: Settings, kind: str, generated: bool) -> str:
    """Which models made an item: `kind` says whose dialogues and whose judgments it is computed from."""
    if kind == "registry":
        return "none called; written from personalens_utils/llm/registry.py"
    if kind == "persona":
        return (f"the PERSONA Bench offline predictor on {PERSONA_USERS} users of synthetic data "
                "(persona_bench/offline.py, persona_bench/synthetic.py)")
    if kind == "card":
        assistants = ", ".join(settings.assistant_models)
        return (f"judge {settings.judge_model} and second judge {settings.second_judge_model} on the "
                f"dialogues of {TRUST_PROBE_TASKS} tasks of each type of the first {TRUST_PROBE_USERS} users "
                f"(assistants {assistants}; user {settings.user_model}), as judged and under two probes")
    if kind == "repeats":
        assistants = ", ".join(settings.assistant_models)
        return (f"judge {settings.judge_model}, {TRUST_JUDGE_SAMPLES} judge samples of each of "
                f"{TRUST_REPEATS} simulation samples of the probe design's scenarios ({TRUST_PROBE_TASKS} "
                f"tasks of each type of the first {TRUST_PROBE_USERS} users; assistants {assistants}; user "
                f"{settings.user_model})")
    if kind == "grid":
        return (f"assistants {', '.join(settings.assistant_models)}; user {settings.user_model} played "
                f"{' and '.join(ROBUSTNESS_STYLES)} by rules (a demonstration, not a finding); judge "
                f"{settings.judge_model}; {'/'.join(ROBUSTNESS_TASK_TYPES)} tasks of the pass's first "
                f"{ROBUSTNESS_USERS} users, cooperative records reused from 03 and 04")
    if kind == "anchored":
        people = (f"annotators' sheets {settings.annotations}" if settings.annotations else
                  "SYNTHETIC annotators (seeded noise on the judge's scores, no people)")
        return f"judge {settings.judge_model}; user {settings.user_model}; {people}"
    if kind == "blame":
        return (f"reviewer {settings.reviewer_model} on judge {settings.judge_model}'s verdicts; "
                f"assistants {', '.join(settings.assistant_models)}; user {settings.user_model}")
    if kind == "audit_arms":
        pair = audit_arms(settings)
        arms = f"{DESIGNED_ORDER[0]} against {DESIGNED_ORDER[-1]}" if pair is None else " against ".join(pair)
        return f"{arms}; user {settings.user_model}; judge {settings.judge_model}"
    if kind == "audit":
        return f"none at analysis time; rules over the dialogues of user agent {settings.user_model}"
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


def reason(item: OutputId, steps: Sequence[StepResult], where: str = "this pass") -> str:
    """Why `item` has no file: the step that makes it failed or did not run (with its message), is not
    among `steps`, or ran and wrote none."""
    steps = [s for s in steps if s.notebook.startswith(item.notebook)]
    if not steps:
        return f"{item.notebook} is not part of {where}"
    failed = [s for s in steps if not s.ok]
    if failed:
        step = failed[0]
        return f"{step.notebook} {'did not run' if step.skipped else 'failed'}: {step.message}"
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
    return [*lines, "", card_line(store.root), ""]


def card_line(store_dir: Path) -> str:
    """One Markdown line pointing to the store's run card and saying its protocol (or why it is unread),
    and the tokens and seconds per call of each role a backend timed (a real model's: how fast it was)."""
    where = f"`{store_dir.name}/{run_card.CARD_FILE}`"
    try:
        card = run_card.read_card(store_dir)
    except run_card.RunCardError as exc:
        return f"Run card {where}: unreadable ({exc})."
    if not card:
        return f"Run card {where}: none (no stage wrote into this store since run cards exist)."
    protocol = card["protocol"]
    differs = f" ({'; '.join(protocol['differs'])})" if protocol.get("differs") else ""
    timed = [run_card.calls_text(role, block) for entry in [*card["simulations"], *card["judges"]]
             for role, block in run_card.entry_calls(entry) if block["timed_calls"]]
    speed = f" Model calls timed: {'; '.join(timed)}." if timed else ""  # offline calls never are
    kind = protocol.get("kind")
    return f"Run card {where} (what was run; docs/run_card.md): protocol **{kind}**{differs}.{speed}"


def _generated_size(res: PassResult) -> list[str]:
    """A Markdown line with the size of the benchmark notebook 01 generated in this pass, from the
    manifest it wrote; none when 01 did not finish (a manifest there is an earlier run's) or for given
    data."""
    manifest = Path(res.benchmark) / MANIFEST
    if not any(s.notebook == "01_generation" and s.ok for s in res.steps) or not manifest.is_file():
        return []
    made = json.loads(manifest.read_text("utf-8"))
    config = made["config"]
    per_user = made["scenarios"] / made["users"] if made["users"] else 0.0
    return [f"- generated by 01: {made['users']} users; domains "
            f"{', '.join(config['domains']) if config['domains'] else 'all'}; "
            f"SD tasks per domain {config['sd_tasks_per_domain']}; MD tasks {config['md_tasks']}; "
            f"{made['scenarios']} scenarios ({per_user:.1f} per user)"]


def _shown(files: Sequence[Path]) -> list[Path]:
    """The files of a listing a reader opens: tables as Markdown, figures as PNG."""
    return [f for f in files if f.suffix in (".md", ".png")]


def produced(res: PassResult, stem: str) -> list[Path]:
    """The tables and figures of a pass (its own tables/ and figures/) starting with `stem` that its
    finished notebooks wrote in this run."""
    return sorted(f for step in res.steps if step.ok for f in step.written
                  if f.parent.parent == res.folder and f.name.startswith(stem))


def _item_lines(settings: Settings, res: PassResult, item: OutputId, files: list[Path]) -> list[str]:
    root = settings.root
    shown = ", ".join(f"`{f.relative_to(root)}`" for f in _shown(files))
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
             for line in (spec.describe(role) if isinstance(spec, AssistantSpec) else [spec.describe(role)])]
    return ["Called (see Table 11 for the paper's models):", "", *(f"- {line}" for line in lines), ""]


def _prompt_line(settings: Settings) -> str:
    return f"Prompts: {settings.prompts().described()}."


def _scoring_line(settings: Settings) -> str:
    other = "official" if settings.scoring == "strict" else "strict"
    return (f"Judge answers read under the `{settings.scoring}` scoring rule (docs/judging.md); Tables 3 and "
            f"12 show the `{other}` rule's mean after a cell wherever it differs.")


def _outcome_lines(results: Sequence[PassResult]) -> list[str]:
    """Whether the last pass was published (`pipeline`: only when every notebook of it finished)."""
    if not results:
        return ["No pass ran: nothing was published.", ""]
    main = results[-1]
    if main.finished:
        return [f"Published: pass `{main.name}` (its tables and figures copied to `tables/` and `figures/`; "
                "`runs/LATEST` names it).", ""]
    stopped = [s.notebook for s in main.steps if not s.ok and not s.skipped]
    return [f"**Not published**: in pass `{main.name}`, {', '.join(stopped)} failed, so nothing was copied "
            "to `tables/` and `figures/` and `runs/LATEST` was left as it was.", ""]


def mark_index(settings: Settings, stopped: Exception | None = None) -> Path:
    """runs/<run>/INDEX.md while the run is under way (`stopped` None), or after the runner stopped
    before writing the index: an earlier run's index no longer describes the folder, so it goes."""
    if stopped is None:
        state = (f"**Under way** since {time.strftime('%Y-%m-%d %H:%M:%S')}: this file is rewritten when "
                 "the run ends. If the command is no longer running, it stopped before writing its index; "
                 "the executed notebooks in the pass folders show how far it got.")
    else:
        state = (f"**Stopped**: {stopped}\n\nNothing here is an index of this folder; the executed "
                 "notebooks in the pass folders show how far the run got.")
    command = " ".join(("python -m personalens_utils.reproduce", *settings.argv))
    index = settings.root / INDEX
    text = f"# Reproduction `{settings.run}`\n\n{state}\n\nCommand: `{command}`\n"
    index.write_text(text, encoding="utf-8")
    return index


def write_index(settings: Settings, results: Sequence[PassResult], seconds: float,
                published: Sequence[Path] = ()) -> Path:
    """runs/<run>/INDEX.md: every paper table and figure, the file that reproduces it, or why not, and
    the files published to the top-level tables/ and figures/."""
    root = settings.root
    offline = settings.backend == "offline"
    real = set(KNOWN_BACKENDS) - {"offline"}
    served = sorted({f"`{text}`" for text in role_models(settings).values()
                     if SpecParts.of(text).backend in real})
    lines = [
        f"# Reproduction `{settings.run}`",
        "",
        f"Backend: **{settings.backend}**."
        + (f" Some roles are played by a real model: {', '.join(served)}. What such a model says is its own; "
           "what the offline roles add to it (the other side of the dialogue, the scores) is the rules', "
           "and each caption says which roles are offline."
           if offline and served else "")
        + (
            " The offline backend is a rule-based simulation, not a language model: its numbers show the "
            "pipeline at work, not findings about any model, and every table and figure says so. Its "
            "assistants are reference assistants built to rank in a known order on personalization and "
            f"task completion ({' < '.join(DESIGNED_ORDER)}; assistants/reference_assistants.py): a judge "
            "that does not recover that order in Table 3 is broken."
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
        *_outcome_lines(results),
    ]
    for res in results:
        lines += [
            f"## Pass `{res.name}`",
            "",
            f"- benchmark: `{res.benchmark}`",
            *_generated_size(res),
            f"- users of Tables 3, 5, 12, 13 and Figures 4, 5: {res.users}",
            f"- task types: {', '.join(settings.task_types)}",
            f"- users of the six-setting ablation (Table 4): {res.ablation_users}",
            f"- folder: `{res.folder.relative_to(root)}/` (executed notebooks, store, tables, figures)",
            "",
            "### Reproduced",
            "",
        ]
        missing, matched = [], set()
        for item in PAPER_ITEMS:
            files = produced(res, item.stem)
            matched.update(files)
            if files:
                lines += _item_lines(settings, res, item, files)
            else:
                missing.append((item, reason(item, res.steps)))
        lines.append("")
        if missing:
            lines += ["### Not reproduced", ""]
            lines += [f"- **{item.name}** ({item.what}): {why}" for item, why in missing]
            lines.append("")
        others = [f for s in res.steps if s.ok for f in _shown(s.written) if f not in matched]
        if others:
            lines += ["### Other outputs", ""] + [f"- `{f.relative_to(root)}`" for f in others] + [""]
        partial = [f"- `{f.relative_to(root)}` ({s.notebook})" for s in res.steps if not s.ok
                   for f in _shown(s.written)]
        if partial:
            lines += ["### Written by notebooks that failed (not published)", "", *partial, ""]
        lines += ["### Run store", "", *store_summary(res.folder)]
        lines += [
            "### Notebooks",
            "",
            "| notebook | executed copy | time | result |",
            "| --- | --- | --- | --- |",
        ]
        for step in res.steps:
            copy = f"`{step.executed.relative_to(root)}`" if step.executed and step.executed.exists() else "-"
            lines.append(f"| {step.notebook} | {copy} | {step.seconds:.0f} s | {step.outcome} |")
        lines.append("")
    lines += ["## Published", ""]
    lines += ([f"The top-level `tables/` and `figures/` hold these {len(published)} files of pass "
               f"`{results[-1].name}`, and nothing else (besides their README.md):", ""]
              + [f"- `{path.parent.name}/{path.name}`" for path in published]
              if published else ["Nothing: the top-level `tables/` and `figures/` were left as they were."])
    lines += ["", "## Not computational", ""] + [f"- {name}: {why}" for name, why in NOT_COMPUTED] + [""]
    index = root / INDEX
    index.write_text("\n".join(lines), encoding="utf-8")
    return index
