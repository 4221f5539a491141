"""Official judge prompts through Message Batches: the same calls and records as online, each official
call asked once (the official script sends no format reminder), turn-level personalization the kit's."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_batches import FakeBatches
from support.fake_server import FakeLLMServer
from support.records import put
from support.scripted_judge import MODEL, context_for, dialogue, judge_reply

from personalens_utils import prompt_sets
from personalens_utils.judging import JudgingConfig, run_judging
from personalens_utils.llm import LLMClient
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore


def official_context(record: Dialogue) -> dict[str, Any]:
    return {**context_for(record), "user_id": record.user_id}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=judge_reply) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        yield fake


def judge(store: RunStore, code: Path, **options: Any) -> None:
    with LLMClient("anthropic", use_cache=False, progress=False, retry_base_s=0.01) as llm:
        run_judging(store, llm, official_context,
                    JudgingConfig(judge_model=MODEL, offline_dialogues=True, **options,
                                  prompts=prompt_sets.prompt_set("official", code)))


def test_official_batch_judging_matches_online_and_never_reminds(server, official_code, tmp_path):
    dialogues = [dialogue(0), dialogue(1, "MUMBLE"), dialogue(2, "SILENT")]
    online_bodies: Counter[str] = Counter()

    def recording(api: str, body: dict[str, Any]) -> str:
        online_bodies[json.dumps(body, sort_keys=True)] += 1
        return judge_reply(api, body)

    server.reply = recording
    online = RunStore(tmp_path / "online")
    put(online, Dialogue, dialogues)
    judge(online, official_code)
    server.reply = judge_reply
    batches = FakeBatches(polls_in_progress=0).install(server)
    batched = RunStore(tmp_path / "batch")
    put(batched, Dialogue, dialogues)
    judge(batched, official_code, batch=True)

    sent = Counter(
        json.dumps(r["params"], sort_keys=True) for b in batches.batches.values() for r in b["requests"]
    )
    assert sent == online_bodies
    official = [json.loads(body) for body in online_bodies if json.loads(body)["max_tokens"] == 4000]
    assert len(official) == 3 * 6 and all(len(body["messages"]) == 1 for body in official)
    records = {r["id"]: r for r in batched.records(Judgment)}
    assert records == {r["id"]: r for r in online.records(Judgment)}
    by_key = {(r["dialogue_id"], r["dimension"]): r for r in records.values()}
    mumbled = by_key["d001", "coherence_user"]
    assert (mumbled["status"], mumbled["attempts"], mumbled.get("prompt_set")) == ("missing", 1, "official")
    assert by_key["d002", "naturalness_user"]["status"] == "missing"
    assert by_key["d000", "personalization"]["score"] == 3
    turn = by_key["d000", "turn_personalization"]
    assert "prompt_set" not in turn and turn["status"] == "ok"
    assert len(batches.created) == 1, "no batch of format reminders"
