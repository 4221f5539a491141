"""Official mode: the authors' unchanged prompt makers, run on the user's copy of their code, and their
prompts sent as their evaluators send them.

Each prompt maker reads `merged_posts_remapped.json` and writes its JSONL files in its working
folder, so the kit runs an untouched copy of the script in a temporary folder that holds the dataset
under that name, and collects what it writes: no line of the authors' code is edited or stored in
the kit. Their evaluators send each prompt as the only user message, with no system text; the
call parameters below are theirs (LLMEvaluators/3.1/GPT.py, 3.2/GPT.py, 3.3/GPT4.1.py). One thing
is not reproduced: for 3.3 the authors ask for ten candidates (`n=10`) and keep the one closest to
the truth by SBERT; the kit asks once (docs/persona_bench.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personalens_utils.base.errors import KitError
from personalens_utils.persona_bench.data import DATA_FILE, PersonaDataError, find_dataset, iter_users
from personalens_utils.persona_bench.items import SETTINGS, TASKS, PersonaItem, _check, clean, dataset_id
from personalens_utils.prompt_sets.official.templates import OFFICIAL_PROMPTS
from personalens_utils.runstore.identity import Variant

OFFICIAL = Variant(OFFICIAL_PROMPTS, OFFICIAL_PROMPTS)
"""Items the authors' prompt makers wrote (their version: "official")."""
CODE_ENV = "PERSONA_BENCH_CODE"

MAKERS: dict[tuple[str, str], tuple[str, str]] = {
    ("3.1", "P-Conv"): ("3.1PromptMaker.py", "WithConversationPrompts_ScorePrediction_Refactored.jsonl"),
    ("3.1", "P-NonConv"): (
        "3.1PromptMaker.py",
        "WithoutConversationPrompts_ScorePrediction_Refactored.jsonl",
    ),
    ("3.1", "NP-Conv"): (
        "3.1_RandPrompt.py",
        "WithConversationPrompts_ScorePrediction_PseudoRandomContext.jsonl",
    ),
    ("3.2", "P-Conv"): ("3.2PromptMaker.py", "WithConversationPrompts_ExactScorePrediction.jsonl"),
    ("3.2", "P-NonConv"): ("3.2PromptMaker.py", "WithoutConversationPrompts_ExactScorePrediction.jsonl"),
    ("3.2", "NP-Conv"): (
        "3.2_RandPrompt.py",
        "WithConversationPrompts_PseudoRandomContext_ExactScorePrediction.jsonl",
    ),
    ("3.3", "P-Conv"): ("3.3PromptMaker.py", "WithConversationPrompts_BodyPrediction_v2.jsonl"),
    ("3.3", "P-NonConv"): ("3.3PromptMaker.py", "WithoutConversationPrompts_BodyPrediction_v2.jsonl"),
    ("3.3", "NP-Conv"): ("3.3_RandPrompt.py", "WithPseudoRandomConversationPrompts_BodyPrediction.jsonl"),
}
"""(task, setting) -> (the authors' prompt maker, the file it writes for that setting)."""


@dataclass(frozen=True)
class CallParams:
    """How the authors' evaluator calls the model for one task."""

    max_tokens: int
    temperature: float
    candidates: int = 1


CALLS = {"3.1": CallParams(10, 0.0), "3.2": CallParams(25, 0.0), "3.3": CallParams(256, 0.7, candidates=10)}


class OfficialCodeError(KitError, RuntimeError):
    """The authors' code is not where it was looked for, or one of its scripts failed."""


def find_code(path: str | os.PathLike[str] | None = None) -> Path:
    """The root of the user's copy of the authors' code (holding PromptMakers/), from `path` or
    `$PERSONA_BENCH_CODE`."""
    given = path if path is not None else os.environ.get(CODE_ENV)
    if not given:
        raise OfficialCodeError(
            f"official mode needs the authors' PERSONA Bench code: pass its folder or set "
            f"${CODE_ENV} (docs/persona_bench.md)"
        )
    root = Path(given)
    if not (root / "PromptMakers").is_dir():
        raise OfficialCodeError(f"{root} does not hold the authors' code: PromptMakers/ is missing")
    return root


def make_official_prompts(
    out_dir: str | os.PathLike[str],
    *,
    code: str | os.PathLike[str] | None = None,
    data: str | os.PathLike[str] | None = None,
    tasks: Sequence[str] = TASKS,
    settings: Sequence[str] = SETTINGS,
    timeout_s: float = 3600,
) -> dict[tuple[str, str], Path]:
    """Run the authors' prompt makers (unchanged copies, in a temporary folder holding the dataset
    under their file name) and move the files they write into `out_dir`; returns them by (task, setting)."""
    _check(tasks, settings)
    root, file, out = find_code(code), find_dataset(data), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    wanted = {key: MAKERS[key] for key in MAKERS if key[0] in tasks and key[1] in settings}
    for script in sorted({s for s, _ in wanted.values()}):
        with tempfile.TemporaryDirectory(prefix="persona-maker-") as scratch:
            work = Path(scratch)
            shutil.copy2(root / "PromptMakers" / script, work / script)
            (work / DATA_FILE).symlink_to(file.resolve())
            done = subprocess.run(
                [sys.executable, script],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
            if done.returncode != 0:
                raise OfficialCodeError(
                    f"the authors' {script} failed (exit {done.returncode}): {done.stderr.strip()[-800:]}"
                )
            for (_, _), (maker, name) in wanted.items():
                if maker == script:
                    if not (work / name).is_file():
                        raise OfficialCodeError(f"the authors' {script} wrote no {name}")
                    shutil.move(work / name, out / name)
    return {key: out / name for key, (_, name) in wanted.items()}


def read_official_items(
    prompt_dir: str | os.PathLike[str],
    *,
    data: str | os.PathLike[str] | None = None,
    tasks: Sequence[str] = TASKS,
    settings: Sequence[str] = SETTINGS,
) -> Iterator[PersonaItem]:
    """The items of the prompt files the authors' makers wrote (see `make_official_prompts`), streamed.

    The user of a 3.1/3.2 line is read from its post reference (`[task_]u<n>p<m>`: the n-th user of the
    dataset); 3.3 lines name it. A line that lacks what the authors' evaluator reads is an error
    naming the file and line.
    """
    _check(tasks, settings)
    file = find_dataset(data)
    names = [u.name for u in iter_users(file)] if any(t in tasks for t in ("3.1", "3.2")) else []
    dataset = dataset_id(file)
    for (task, setting), (_, name) in MAKERS.items():
        if task not in tasks or setting not in settings:
            continue
        path = Path(prompt_dir) / name
        if not path.is_file():
            raise OfficialCodeError(f"{path} is missing: run make_official_prompts first")
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                yield _item(task, setting, json.loads(line), names, dataset, f"{path}:{n}", n)


def _item(
    task: str, setting: str, line: dict[str, Any], names: list[str], dataset: str, where: str, n: int
) -> PersonaItem:
    if task == "3.3":
        prompt, truth, user = line.get("prompt"), line.get("true_label"), line.get("user")
        domain, target = line.get("subreddit"), f"{line.get('user')}#{n}"
    else:
        job = line.get("prediction_task") or {}
        prompt, truth, domain = job.get("prompt_text"), job.get("true_label"), job.get("subreddit")
        target = job.get("target_reply_id")
        found = re.fullmatch(r"(?:task_)?u(\d+)p\d+", str(job.get("target_post_reference_id")))
        user = names[int(found.group(1)) - 1] if found and int(found.group(1)) <= len(names) else None
    missing = [
        k
        for k, v in (
            ("prompt", prompt),
            ("true_label", truth),
            ("user", user),
            ("subreddit", domain),
            ("target", target),
        )
        if v is None or v == ""
    ]
    if missing:
        raise PersonaDataError(f"{where}: the authors' prompt line lacks {missing}")
    truth_value: str | float = (
        float(truth) if task == "3.2" else clean(str(truth)).lower() if task == "3.1" else str(truth)
    )
    return PersonaItem(
        dataset,
        OFFICIAL,
        task,
        setting,
        str(user),
        str(domain),
        str(target),
        truth_value,
        str(prompt),
        {"task": task, "setting": setting},
    )
