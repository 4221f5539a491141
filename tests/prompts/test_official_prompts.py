"""`prompt_set="official"` sends what the official PersonaLens code sends.

The official scripts (from the shared archive, run in-process on a private copy with boto3 replaced
by a recorder: tests/support/official_code.py) simulate and judge a sample of scenarios: two users,
single- and multi-domain tasks, every assistant setting, a Claude, a Llama and a Mistral assistant.
Every model answer is a function of the prompt alone, so the kit, given the same answers, must make
the same calls in the same order: system text and messages equal character for character,
temperature and max_tokens equal, for every user-agent turn (opening, middle, the capped end),
assistant turn and judge dimension. Llama and Mistral get a raw prompt string from the official code
(InvokeModel native bodies); the kit sends chat messages instead, and the test checks that the
official string is exactly the model's chat framing around the kit's system text and message.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.official_code import (
    Call,
    FakeBedrock,
    copy_code,
    evaluate,
    generate,
    subset_data,
    user_system_prompt,
)
from support.roles import user_of

from personalens_utils.data import Benchmark, load_benchmark
from personalens_utils.export.official import read_dialogue_file
from personalens_utils.judging import DIMENSIONS, benchmark_contexts, dimension_requests
from personalens_utils.llm import Request, Response, Usage
from personalens_utils.prompt_sets import OfficialPromptSet, ScenarioContext
from personalens_utils.prompt_sets.official.templates import OfficialPromptError, load_official_prompts
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, plan_dialogues
from personalens_utils.simulation.loop import simulate_dialogue
from personalens_utils.simulation.settings import AssistantSetting

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

USERS = (7, 66)
SD_EVERY, MD_EVERY = 9, 5
"""Every 9th single-domain and every 5th multi-domain task of each user's task files."""
USER_MODEL, JUDGE_MODEL = "Claude 3 Sonnet", "Claude 3.5 Sonnet"
ASSISTANTS = {
    "claude-3-sonnet-v1": "Claude 3 Sonnet",
    "llama-3-1-8b-instruct-v1": "Llama 3.1 8B Instruct",
    "mistral-7b-instruct-v2": "Mistral 7B Instruct",
}
"""Official short name (the scripts' -m) -> the kit's registry name."""
FLAGS = {
    "vanilla": (False, False, False),
    "base": (False, False, False),
    "base+D": (True, False, False),
    "base+I": (False, True, False),
    "base+S": (False, False, True),
    "base+all": (True, True, True),
}
"""Kit setting -> the official -d, -p, -si flags (vanilla: the base run with the vanilla prompt pair)."""
LLAMA_FRAME = (
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>\n"
    "<|start_header_id|>user<|end_header_id|>\n\n{message}<|eot_id|>\n"
    "<|start_header_id|>assistant<|end_header_id|>"
)
MISTRAL_FRAME = "<s>[INST]{system}{message}[/INST]"
"""Each model's instruction format around a system text and one user message (Meta's, Mistral's)."""


def _key(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def scripted_reply(user_system: str):
    """Answers from the prompt alone: the user agent opens (sometimes with spaces or a stray TERMINATE),
    asks on, and ends in one of several TERMINATE forms, or never (one dialogue in four runs to the cap);
    the assistant's replies carry spaces a script may strip; the judge gives every label."""

    def reply(system: str | None, text: str) -> str:
        if system == "":
            return "Explanation: fine.\nVERDICT: True\nPersonalization Score: 3\nNaturalness Score: 4"
        if system != user_system:
            return f" Option {text.count('User: ')}: a suggestion that fits.\n"
        seen = text.count("[ASSISTANT]:")
        key = _key(text.split("[USER]:")[0])
        if seen == 0:
            return ["Can you help me plan this?", "  Hi there, I need a hand. ", "Help me out? TERMINATE"][
                key % 3
            ]
        if key % 4 != 0 and seen >= 1 + key % 3:
            return [
                "Perfect, thanks! TERMINATE",
                "  TERMINATE",
                " Great.\nTERMINATE\n",
                "'TERMINATE' thanks!",
            ][seen % 4]
        return f"Could you suggest something other than option {seen}? "

    return reply


@dataclass
class ScriptedClient:
    """The kit's side: an LLMClient stand-in answering each request with the same scripted reply."""

    reply: Any
    backend_name: str = "bedrock"
    endpoint: str = ""
    """The default endpoint of its backend (`LLMClient.endpoint`): nothing but the model names the role."""

    def __post_init__(self) -> None:
        self.requests: list[Request] = []

    async def acomplete(self, request: Request, **_: Any) -> Response:
        self.requests.append(request)
        text = self.reply(request.system, request.messages[-1].content)
        return Response(
            text=text, usage=Usage(), backend=self.backend_name, model=request.model, latency_s=0.0
        )


@dataclass
class World:
    code: Path
    prompts: OfficialPromptSet
    bench: Benchmark
    tasks: dict[tuple[int, str], list[str]]
    """(user, "SD"/"MD") -> the task ids kept, in the order of the user's task file."""
    data: Path
    user_system: str


@pytest.fixture(scope="module")
def world(official_code: Path, official_data: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("official_prompts")
    code = copy_code(official_code, root / "code")
    tasks = {}
    for user in USERS:
        for kind, name, every in (("SD", "tasks.json", SD_EVERY), ("MD", "tasks_md.json", MD_EVERY)):
            listed = [
                t["task_id"]
                for t in json.loads((official_data / "profile" / f"user{user}" / name).read_text()).values()
            ]
            tasks[user, kind] = listed[::every]
    bench = load_benchmark(official_data, users=list(USERS))
    system = user_system_prompt(code, root, FakeBedrock(reply=lambda *_: ""))
    return World(code, OfficialPromptSet(load_official_prompts(code)), bench, tasks, official_data, system)


def workdir(world: World, tmp_path: Path) -> Path:
    for user in USERS:
        subset_data(world.data, tmp_path, user, world.tasks[user, "SD"], world.tasks[user, "MD"])
    return tmp_path


def kit_view(request: Request) -> tuple[Any, ...]:
    return (
        request.system,
        [(m.role, m.content) for m in request.messages],
        request.temperature,
        request.max_tokens,
    )


def official_view(call: Call) -> tuple[Any, ...]:
    body = call.body
    assert set(body) == {"anthropic_version", "max_tokens", "temperature", "system", "messages"}
    for message in body["messages"]:
        assert [block["type"] for block in message["content"]] == ["text"]
    messages = [(m["role"], m["content"][0]["text"]) for m in body["messages"]]
    return body["system"], messages, body["temperature"], body["max_tokens"]


def assert_same_call(call: Call, request: Request, where: str) -> None:
    if not call.native:
        assert kit_view(request) == official_view(call), where
        return
    (message,) = request.messages
    assert message.role == "user", where
    frame = LLAMA_FRAME if "max_gen_len" in call.body else MISTRAL_FRAME
    assert frame.format(system=request.system, message=message.content) == call.body["prompt"], where
    assert request.temperature == call.body["temperature"], where
    assert request.max_tokens == call.body.get("max_gen_len", call.body.get("max_tokens")), where


def assert_same_calls(calls: Sequence[Call], requests: Sequence[Request], what: str) -> None:
    assert len(requests) == len(calls), (
        f"{what}: the kit made {len(requests)} calls, the official code {len(calls)}"
    )
    for index, (call, request) in enumerate(zip(calls, requests, strict=True)):
        assert_same_call(call, request, f"{what}, call {index + 1} ({request.kind})")


def kit_dialogue(
    world: World, user: int, task_id: str, setting: str, assistant: str
) -> tuple[Dialogue, list]:
    client = ScriptedClient(scripted_reply(world.user_system))
    scenario = world.bench.scenario(f"user{user}/{task_id}")
    ctx = ScenarioContext.of(scenario, world.bench.user(user))
    dialogue = asyncio.run(
        simulate_dialogue(
            client,
            ctx,
            AssistantSetting.parse(setting),
            user_model=USER_MODEL,
            assistant=assistant,
            prompts=world.prompts,
        )
    )
    return dialogue, client.requests


def folder_name(assistant: str, setting: str) -> str:
    d, p, s = FLAGS[setting]
    return assistant + "_d" * d + "_p" * p + "_s" * s


def run_both(world: World, tmp_path: Path, kind: str, setting: str, assistant: str) -> list[Dialogue]:
    """The official script and the kit on the same scenarios; their calls compared; the kit's dialogues."""
    work = workdir(world, tmp_path)
    bedrock = FakeBedrock(reply=scripted_reply(world.user_system))
    dialogues = []
    for user in USERS:
        calls = generate(
            world.code,
            work,
            bedrock,
            user_id=user,
            md=kind == "MD",
            flags=FLAGS[setting],
            assistant=assistant,
            vanilla=setting == "vanilla",
        )
        requests = []
        for task_id in world.tasks[user, kind]:
            dialogue, made = kit_dialogue(world, user, task_id, setting, ASSISTANTS[assistant])
            requests += made
            dialogues.append(dialogue)
            saved = json.loads(
                (
                    work
                    / "output"
                    / "dialogue"
                    / f"user{user}"
                    / folder_name(assistant, setting)
                    / f"{task_id}_dialogue.json"
                ).read_text()
            )
            assert [t.as_dict() for t in dialogue.turns] == saved["dialogue"], f"user{user}/{task_id}"
        assert_same_calls(calls, requests, f"user{user} {kind} {setting} {assistant}")
    return dialogues


CASES = [
    *((kind, setting, "claude-3-sonnet-v1") for kind in ("SD", "MD") for setting in FLAGS),
    ("SD", "base", "llama-3-1-8b-instruct-v1"),
    ("MD", "base+all", "llama-3-1-8b-instruct-v1"),
    ("SD", "base+D", "mistral-7b-instruct-v2"),
    ("SD", "base+I", "mistral-7b-instruct-v2"),
]


@pytest.mark.parametrize(("kind", "setting", "assistant"), CASES)
def test_the_kit_makes_the_official_dialogue_calls(world, tmp_path, kind, setting, assistant):
    dialogues = run_both(world, tmp_path, kind, setting, assistant)
    assert {d.prompt_set for d in dialogues} == {"official"}
    assert {d.prompt_version for d in dialogues} == {world.prompts.version}
    if (kind, setting, assistant) == ("SD", "base", "claude-3-sonnet-v1"):
        # the sample reaches every branch of the loop: TERMINATE and the cap, an opening left as written
        assert {d.status for d in dialogues} == {"terminated", "turn_cap"}
        assert any(d.turns[0].content != d.turns[0].content.strip() for d in dialogues)


JUDGE_RUNS = [
    ("SD", "base", "claude-3-sonnet-v1"),
    ("MD", "base+all", "claude-3-sonnet-v1"),
    ("SD", "base+S", "llama-3-1-8b-instruct-v1"),
]
OFFICIAL_DIMENSIONS = [
    ("task_completion", False, "task_completion"),
    ("personalization", False, "personalization"),
    ("naturalness", False, "naturalness_user"),
    ("naturalness", True, "naturalness_assistant"),
    ("coherence", False, "coherence_user"),
    ("coherence", True, "coherence_assistant"),
]
"""The official script's -d (and -a) -> the kit's dimension."""


@pytest.mark.parametrize(("kind", "setting", "assistant"), JUDGE_RUNS)
def test_the_kit_makes_the_official_judge_calls(world, tmp_path, kind, setting, assistant):
    work = workdir(world, tmp_path)
    bedrock = FakeBedrock(reply=scripted_reply(world.user_system))
    context_for = benchmark_contexts(world.bench)
    folder = folder_name(assistant, setting)
    for user in USERS:
        generate(
            world.code,
            work,
            bedrock,
            user_id=user,
            md=kind == "MD",
            flags=FLAGS[setting],
            assistant=assistant,
        )
        dialogues = [
            read_dialogue_file(
                work / "output" / "dialogue" / f"user{user}" / folder / f"{t}_dialogue.json",
                benchmark=world.bench,
            )
            for t in world.tasks[user, kind]
        ]
        for flag, on_assistant, name in OFFICIAL_DIMENSIONS:
            calls = evaluate(
                world.code,
                work,
                bedrock,
                user_id=user,
                folder=folder,
                dimension=flag,
                assistant=on_assistant,
                md=kind == "MD",
            )
            requests = [
                r
                for d in dialogues
                for r in dimension_requests(DIMENSIONS[name], context_for(d), JUDGE_MODEL, world.prompts)
            ]
            assert_same_calls(calls, requests, f"user{user} {kind} {folder} judge {name}")


def test_a_call_the_official_code_never_makes_is_refused_before_the_run(world, tmp_path):
    run = RunStore(tmp_path / "run")
    for setting, assistant, problem in (
        ("base+D+I", "Claude 3 Sonnet", r"no assistant prompt for setting 'base\+D\+I'"),
        ("vanilla", "Llama 3.1 8B Instruct", r"defines no \['LLAMA_SYSTEM_PROMPT_VANILLA'"),
    ):
        config = SimulationConfig(settings=[setting], assistant_model=assistant, prompts=world.prompts)
        with pytest.raises(OfficialPromptError, match=problem):
            plan_dialogues(world.bench, run, config, user=user_of(config, "offline"))
