"""Prompt caching: stable heads first, one breakpoint after them, cache reads and writes in the books."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from support.fake_server import FakeLLMServer, last_user_text
from support.records import dialogue_json, put
from support.scripted_judge import MODEL, TASK, context_for, dialogue, judge_reply
from support.tiny_benchmark import HISTORY, rich_scenario

from personalens_utils.judging import DIMENSIONS, JudgingConfig, dimension_requests, run_judging
from personalens_utils.llm import LLMClient, Request, registry
from personalens_utils.llm.backends.anthropic import AnthropicBackend
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.llm.prompt_cache import CACHE_PREFIX_KEY, min_cacheable_tokens, stable_prefix
from personalens_utils.prompt_templates.dialogue import USER_SYSTEM
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import AssistantSetting, assistant_request, user_request
from personalens_utils.simulation.loop import simulate_dialogue

TWO_TURNS = dialogue(0)["turns"]


def head(request: Request) -> str:
    system, prefix = stable_prefix(request)
    assert not system and prefix, "judge prompts carry their stable head in the first message"
    assert request.messages[0].content.startswith(prefix)
    return prefix


def rich_context_for(dialogue_record: Dialogue) -> dict[str, Any]:
    return context_for(dialogue_record) | {"interactions": {"Music": HISTORY}}


def judge_context(turns: list[dict[str, str]]) -> dict[str, Any]:
    users = sum(t["role"] == "user" for t in turns)
    return rich_context_for(Dialogue.from_json(dialogue_json("d", turns=turns, n_turns=users)))


def test_personalization_calls_share_one_head_with_the_profile_and_nothing_that_changes() -> None:
    calls = [
        *dimension_requests(DIMENSIONS["personalization"], judge_context(TWO_TURNS), MODEL),
        *dimension_requests(DIMENSIONS["turn_personalization"], judge_context(TWO_TURNS), MODEL),
        *dimension_requests(DIMENSIONS["personalization"], judge_context(dialogue(1, "X")["turns"]), MODEL),
    ]
    assert len(calls) == 4
    heads = {head(r) for r in calls}
    assert len(heads) == 1, "dialogue- and turn-level calls on one profile repeat the same head"
    (shared,) = heads
    for fact in ("jazz, blues", "Spotify", "35-44 years old", TASK["task_description"], "4 - EXCEPTIONAL"):
        assert fact in shared
    for changing in ("Could you make me a playlist", "assistant turn", "Personalization Score: <1-4>"):
        assert changing not in shared
    assert "assistant turn 2" in calls[2].messages[0].content


@pytest.mark.parametrize("name", ["task_completion", "naturalness_user", "coherence_assistant"])
def test_quality_and_completion_heads_are_the_same_for_every_dialogue(name: str) -> None:
    one = dimension_requests(DIMENSIONS[name], judge_context(TWO_TURNS), MODEL)[0]
    other = dimension_requests(DIMENSIONS[name], judge_context(dialogue(2, "Hi!")["turns"]), MODEL)[0]
    assert head(one) == head(other) and "playlist" not in head(one) and "Hi!" not in head(one)
    assert one.messages[0].content != other.messages[0].content


def test_user_agent_prefix_is_the_profile_repeated_word_for_word_on_every_turn() -> None:
    ctx = rich_scenario("SD")
    turns: list[dict[str, str]] = []
    prefixes = set()
    for k in range(3):
        request = user_request(ctx, turns, "m")
        system, prefix = stable_prefix(request)
        assert system == USER_SYSTEM and request.messages[0].content.startswith(prefix)
        assert "Lyon, France" in prefix and "USER:" not in prefix and "# Your" not in prefix
        prefixes.add(prefix)
        turns += [{"role": "user", "content": f"message {k}"}, {"role": "assistant", "content": f"reply {k}"}]
    assert len(prefixes) == 1


def test_the_cache_hint_changes_neither_the_cache_key_nor_the_offline_answer() -> None:
    ctx = rich_scenario("MD")
    turns = [{"role": "user", "content": "Could you plan my weekend?"},
             {"role": "assistant", "content": "Sure"}]
    requests = [user_request(ctx, [], "m"), user_request(ctx, turns, "m"),
                *dimension_requests(DIMENSIONS["turn_personalization"], judge_context(TWO_TURNS), "m")]
    backend = OfflineBackend(seed=3)
    for request in requests:
        bare = replace(request, context={k: v for k, v in request.context.items() if k != CACHE_PREFIX_KEY})
        assert request.cache_key("offline", "m") == bare.cache_key("offline", "m")
        assert backend.respond(request, "m").text == backend.respond(bare, "m").text


def test_anthropic_body_has_one_breakpoint_after_a_prefix_long_enough_to_cache() -> None:
    backend = AnthropicBackend(base_url="http://127.0.0.1:9")
    judge = dimension_requests(DIMENSIONS["personalization"], judge_context(TWO_TURNS), MODEL)[0]
    model = registry.resolve(MODEL, "anthropic")
    params, extra, _ = backend.message_params(judge, model)
    blocks = params["messages"][0]["content"]
    assert [b.get("cache_control") for b in blocks] == [{"type": "ephemeral"}, None]
    assert blocks[0]["text"] == head(judge)
    assert "".join(b["text"] for b in blocks) == judge.messages[0].content
    assert "system" not in params and extra == {"temperature": 0.0}

    chat = [{"role": "user", "content": "hi"}]
    assistant = assistant_request(AssistantSetting.parse("base+all"), rich_scenario("SD"), chat, MODEL)
    params, _, _ = backend.message_params(assistant, model)
    marked = {"type": "text", "text": assistant.system, "cache_control": {"type": "ephemeral"}}
    assert params["system"] == [marked]
    assert params["messages"] == [{"role": "user", "content": "hi"}]

    plain = assistant_request(AssistantSetting.parse("base"), rich_scenario("SD"), chat, MODEL)
    assert backend.message_params(plain, model)[0]["system"] == plain.system  # far below 1,024 tokens
    haiku = registry.resolve("Claude Haiku 4.5", "anthropic")  # 4,096 tokens at least
    assert isinstance(backend.message_params(judge, haiku)[0]["messages"][0]["content"], str)
    off = AnthropicBackend(base_url="http://127.0.0.1:9", prompt_caching=False)
    assert isinstance(off.message_params(judge, model)[0]["messages"][0]["content"], str)
    assert (min_cacheable_tokens("Claude 3 Haiku"), min_cacheable_tokens(model),
            min_cacheable_tokens("some-new-model")) == (2048, 1024, 1024)


@pytest.fixture
def caching_server(monkeypatch: pytest.MonkeyPatch):
    def reply(api: str, body: dict[str, Any]) -> str:
        if "Personalization Score:" in last_user_text(api, body) or "VERDICT" in last_user_text(api, body):
            return judge_reply(api, body)
        if body.get("system") == USER_SYSTEM:
            return "Thanks, that's all. TERMINATE" if "ASSISTANT:" in last_user_text(api, body) else "Hello?"
        return "Here you are."

    with FakeLLMServer(reply=reply, prompt_cache_min_tokens=200) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        yield server


def test_cache_reads_and_writes_reach_the_usage_books_and_the_cost(caching_server, tmp_path) -> None:
    store = RunStore(tmp_path / "run")
    put(store, Dialogue, [dialogue(0), dialogue(1)])
    shared = head(dimension_requests(DIMENSIONS["personalization"], judge_context(TWO_TURNS), MODEL)[0])
    with LLMClient("anthropic", use_cache=False, progress=False) as client:
        run_judging(store, client, rich_context_for,
                    JudgingConfig(judge_model=MODEL, offline_dialogues=True,
                                  dimensions=["personalization", "turn_personalization"]))
        books = client.usage_frame("judging")
    words = len(shared.split())
    calls = 2 * (1 + 2)  # two dialogues: the dialogue-level call and one per assistant turn
    assert books["calls"].sum() == calls
    assert books["cache_write_tokens"].sum() == words, "the first call writes the shared head"
    assert books["cache_read_tokens"].sum() == (calls - 1) * words, "every later call reads it"
    model = registry.resolve(MODEL, "anthropic")
    spent = books["cost_usd"].sum()
    usage = registry.Usage(*(int(books[c].sum()) for c in ("input_tokens", "output_tokens",
                                                          "cache_read_tokens", "cache_write_tokens")))
    assert spent == pytest.approx(registry.cost_usd(model, usage))
    uncached = registry.Usage(usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
                              usage.output_tokens)
    assert spent < 0.6 * registry.cost_usd(model, uncached)


def test_dialogue_records_carry_the_cache_usage_of_their_calls(caching_server) -> None:
    with LLMClient("anthropic", use_cache=False, progress=False) as client:
        ctx, setting = rich_scenario("SD"), AssistantSetting.parse("base")
        (dialogue,) = client.run_all([simulate_dialogue(client, ctx, setting, user_model=MODEL,
                                                        assistant=MODEL)])
    record = dialogue.to_json()
    assert record["status"] == "terminated" and record["n_turns"] == 2
    assert record["usage"]["cache_write_tokens"] > 0 and record["usage"]["cache_read_tokens"] > 0
