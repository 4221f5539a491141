"""Running the official PersonaLens scripts in-process with no network: a stand-in for boto3 records
every InvokeModel body the official code builds and answers with a scripted reply.

The official modules are imported from a copy of the code (never from the shared, read-only one),
their `main` and their evaluation script are run as they are, against a data folder holding a chosen
subset of a user's tasks. Only boto3 (and diskcache, so nothing is cached on disk) are replaced.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import runpy
import shutil
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

Reply = Callable[[str | None, str], str]
"""(system text, or None for a raw-prompt model; the text the model reads) -> its answer."""


@dataclass
class Call:
    """One InvokeModel call the official code made: the Bedrock model id and the JSON body."""

    model_id: str
    body: dict[str, Any]

    @property
    def native(self) -> bool:
        """A Llama/Mistral raw-prompt body rather than Claude's messages."""
        return "prompt" in self.body


@dataclass
class FakeBedrock:
    """What `boto3.Session().client("bedrock-runtime")` returns: records bodies, answers by `reply`."""

    reply: Reply
    calls: list[Call] = field(default_factory=list)

    def invoke_model(self, body: str, modelId: str, **_: Any) -> dict[str, Any]:
        data = json.loads(body)
        self.calls.append(Call(modelId, data))
        if "messages" in data:
            text = self.reply(data["system"], data["messages"][-1]["content"][0]["text"])
            answer: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
        elif "max_gen_len" in data:
            answer = {"generation": self.reply(None, data["prompt"])}
        else:
            answer = {"outputs": [{"text": self.reply(None, data["prompt"])}]}
        return {"body": io.BytesIO(json.dumps(answer).encode())}


def fake_boto3(bedrock: FakeBedrock) -> types.ModuleType:
    module = types.ModuleType("boto3")

    class Session:
        def client(self, service: str, region_name: str | None = None) -> FakeBedrock:
            assert service == "bedrock-runtime", service
            return bedrock

    module.Session = Session  # type: ignore[attr-defined]
    return module


def fake_diskcache() -> types.ModuleType:
    module = types.ModuleType("diskcache")
    module.Cache = lambda *_args, **_kw: {}  # type: ignore[attr-defined]
    return module


def copy_code(code: Path, target: Path) -> Path:
    """A private copy of the official code, so nothing is written into the shared one."""
    return Path(shutil.copytree(code, target, ignore=shutil.ignore_patterns("__pycache__", "output")))


def subset_data(data: Path, target: Path, user_id: int, sd_tasks: list[str], md_tasks: list[str]) -> None:
    """`target/data/profile/user<N>/` with the user's profile and only the chosen tasks, in file order."""
    folder = target / "data" / "profile" / f"user{user_id}"
    folder.mkdir(parents=True, exist_ok=True)
    source = data / "profile" / f"user{user_id}"
    shutil.copy(source / "profile.json", folder / "profile.json")
    for name, wanted in (("tasks.json", sd_tasks), ("tasks_md.json", md_tasks)):
        tasks = json.loads((source / name).read_text())
        kept = {key: task for key, task in tasks.items() if task["task_id"] in wanted}
        (folder / name).write_text(json.dumps(kept, indent=4))


@contextmanager
def official_process(code: Path, workdir: Path, bedrock: FakeBedrock) -> Iterator[pytest.MonkeyPatch]:
    """The official scripts' world: their folder on sys.path, `workdir` as the working directory
    (data/ and output/ there), boto3 and diskcache replaced; all undone and their modules forgotten
    afterwards."""
    before = set(sys.modules)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(code))
        patch.chdir(workdir)
        patch.setenv("DATA_DIR", str(workdir))
        patch.setitem(sys.modules, "boto3", fake_boto3(bedrock))
        patch.setitem(sys.modules, "diskcache", fake_diskcache())
        try:
            yield patch
        finally:
            for name in set(sys.modules) - before:
                if name.split(".")[0] in ("src", "util"):
                    del sys.modules[name]


def generate(
    code: Path,
    workdir: Path,
    bedrock: FakeBedrock,
    *,
    user_id: int,
    md: bool,
    flags: tuple[bool, bool, bool],
    assistant: str,
    vanilla: bool = False,
) -> list[Call]:
    """Run the official dialogue script's `main` for one user; returns the calls it made.

    `vanilla` swaps the official Claude vanilla prompt pair in for the base pair, the way the paper's
    vanilla ablation runs the script (it has no flag for it).
    """
    first = len(bedrock.calls)
    with official_process(code, workdir, bedrock) as patch:
        module = importlib.import_module("src.generate_dialogue_md" if md else "src.generate_dialogue")
        if vanilla:
            patch.setattr(module, "CLAUDE_SYSTEM_PROMPT", module.CLAUDE_SYSTEM_PROMPT_VANILLA)
            patch.setattr(module, "CLAUDE_TASK_PROMPT", module.CLAUDE_TASK_PROMPT_VANILLA)
        d, p, s = flags
        args = argparse.Namespace(
            model_id_user="claude-3-sonnet-v1",
            model_id_asst=assistant,
            bedrock_region="us-east-1",
            demographic=d,
            past_interaction_summary=p,
            situation=s,
        )
        module.main(user_id, args)
    return bedrock.calls[first:]


def user_system_prompt(code: Path, workdir: Path, bedrock: FakeBedrock) -> str:
    """The official user agent's system text (tells the scripted reply who is asking)."""
    with official_process(code, workdir, bedrock):
        return importlib.import_module("src.generate_dialogue").UserPromptTemplate().system_prompt


def evaluate(
    code: Path,
    workdir: Path,
    bedrock: FakeBedrock,
    *,
    user_id: int,
    folder: str,
    dimension: str,
    assistant: bool = False,
    md: bool = False,
) -> list[Call]:
    """Run the official evaluation script unchanged on one user's dialogues in `output/dialogue/`."""
    first = len(bedrock.calls)
    argv = [
        "evaluate_dialogue.py",
        "-s",
        str(user_id),
        "-e",
        str(user_id),
        "-m",
        folder,
        "-d",
        dimension,
        *(["-a"] if assistant else []),
        *(["-md"] if md else []),
    ]
    with official_process(code, workdir, bedrock) as patch:
        patch.setattr(sys, "argv", argv)
        runpy.run_path(str(code / "src" / "evaluate_dialogue.py"), run_name="__main__")
    return bedrock.calls[first:]
