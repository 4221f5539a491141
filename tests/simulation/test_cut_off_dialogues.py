"""A dialogue counts the replies that stopped at the token limit, and a dialogue without any is stored
as the line it always was (the reproduction compares stored bytes)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx2
import orjson
import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants import assistant_on
from personalens_utils.llm import LLMClient
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import AssistantSetting, ScenarioContext, simulate_dialogue

CUT_REPLY = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "local_model" / "length.json")
                       .read_text())
"""A real local model's reply cut at max_tokens (finish_reason "length")."""
LINE_BEFORE_CUT_OFF = [
    "id", "scenario_id", "user_id", "task_id", "task_type", "domains", "user_model", "assistant_model",
    "assistant_setting", "prompt_version", "backend", "user_backend", "user_model_id", "assistant_backend",
    "assistant_model_id", "status", "error", "turns", "n_turns", "usage", "cost_usd", "retries",
]
"""The keys of a kit dialogue's stored line, in order, as they were before replies were counted."""


@pytest.fixture(scope="module")
def ctx() -> ScenarioContext:
    bench = tiny_benchmark()
    return ScenarioContext.of(bench.scenario("user0/SD-Alarm-task-1"), bench.user(0))


def stored_line(dialogue: Dialogue, root: Path) -> bytes:
    store = RunStore(root)
    store.append(dialogue)
    return store.path(Dialogue).read_bytes()


def test_replies_cut_at_the_token_limit_are_counted_in_the_stored_dialogue(
    ctx: ScenarioContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    local = LLMClient("openai", base_url="http://127.0.0.1:8077/v1", use_cache=False, progress=False,
                      cache_dir=str(tmp_path / "cache"), http_client=httpx2.AsyncClient(
                          transport=httpx2.MockTransport(lambda _: httpx2.Response(200, json=CUT_REPLY))))
    user = LLMClient("offline", progress=False)
    try:
        dialogue = asyncio.run(simulate_dialogue(user, ctx, AssistantSetting.parse("base"), user_model="u",
                                                 assistant=assistant_on(local, "smollm2"), max_turns=2))
    finally:
        local.close()
        user.close()
    assert dialogue.status == "turn_cap" and dialogue.n_turns == 2
    assert dialogue.cut_off == 2, "both assistant replies were cut; the offline user's never are"
    line = orjson.loads(stored_line(dialogue, tmp_path / "run"))
    assert list(line)[-2:] == ["retries", "cut_off"] and line["cut_off"] == 2
    assert Dialogue.from_json(line).cut_off == 2


def test_a_dialogue_without_cut_replies_is_stored_as_before(ctx: ScenarioContext, tmp_path: Path) -> None:
    user = LLMClient("offline", progress=False)
    try:
        dialogue = asyncio.run(simulate_dialogue(user, ctx, AssistantSetting.parse("base"), user_model="u",
                                                 assistant="a"))
    finally:
        user.close()
    assert dialogue.cut_off == 0
    stored = stored_line(dialogue, tmp_path / "run")
    line = orjson.loads(stored)
    assert list(line) == LINE_BEFORE_CUT_OFF
    again = Dialogue.from_json(line)
    assert again.cut_off == 0 and orjson.dumps(again.to_json()) + b"\n" == stored
