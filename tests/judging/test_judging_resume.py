"""A judging process killed part-way (SIGKILL) resumes with no duplicates and no repeated work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from support.records import dialogue_json, put

from personalens_utils.judging import ALL_DIMENSIONS, run_judging
from personalens_utils.llm import Request, Response
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

N_DIALOGUES = 40

CONTEXT_CODE = """
TASK = {"task_id": "SD-Music-task-1", "task_type": "SD", "domains": ["Music"], "user_intent": "Find music.",
        "task_description": "The user wants a playlist.", "task_goal": "A playlist is made.",
        "relevant_preferences": ["Preferred Genres", "Platform Preference"]}
PREFS = {"Music": {"Preferred Genres": ["jazz", "blues"], "Platform Preference": ["Spotify"]}}

def context_for(dialogue):
    return {"task": TASK, "demographics": {}, "preferences": PREFS, "interactions": {},
            "situation": {"device": "Laptop"}, "dialogue": [t.as_dict() for t in dialogue.turns],
            "ended": dialogue.status}
"""
namespace: dict = {}
exec(CONTEXT_CODE, namespace)
context_for = namespace["context_for"]

CHILD = """
import asyncio, sys
from personalens_utils.judging import run_judging
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.runstore.store import RunStore
{context_code}

class Slow(OfflineBackend):
    async def acomplete(self, request, model):
        await asyncio.sleep(0.02)
        return self.respond(request, model)

client = LLMClient(Slow(), max_concurrency=2, progress=False, use_cache=False)
run_judging(RunStore(sys.argv[1]), client, context_for)
"""


def dialogues() -> list[dict]:
    out = []
    for i in range(N_DIALOGUES):
        turns = [
            {"role": "user", "content": "Could you make me a playlist?"},
            {"role": "assistant", "content": "Sure! Some jazz on Spotify?" if i % 2 else "Which genres?"},
            {"role": "user", "content": "Yes, jazz and blues on Spotify please."},
            {"role": "assistant", "content": "Done: a jazz and blues playlist on Spotify."},
        ]
        out.append(dialogue_json(f"d{i:03d}", scenario_id=f"user{i}/SD-Music-task-1", user_id=i,
                                 task_id="SD-Music-task-1", task_type="SD", domains=["Music"],
                                 status="terminated", turns=turns, n_turns=2))
    return out


class Counting(OfflineBackend):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    async def acomplete(self, request: Request, model: str) -> Response:
        self.seen.append((request.context["dialogue"][1]["content"], request.context["dimension"]))
        return self.respond(request, model)


@pytest.mark.slow
def test_killed_judging_resumes_without_duplicates(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    put(store, Dialogue, dialogues())
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(context_code=textwrap.dedent(CONTEXT_CODE)))
    child = subprocess.Popen([sys.executable, str(script), str(store.root)], start_new_session=True)
    path = store.path(Judgment)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if path.exists() and path.read_bytes().count(b"\n") >= 14:
                break
            if child.poll() is not None:
                pytest.fail(f"the judging process ended (code {child.returncode}) before it could be killed")
            time.sleep(0.01)
        else:
            pytest.fail("the judging process wrote nothing to kill it after")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    stored_before = {(r["dialogue_id"], r["dimension"]) for r in RunStore(store.root).records(Judgment)}
    expected = N_DIALOGUES * len(ALL_DIMENSIONS)
    assert 14 <= len(stored_before) < expected

    backend = Counting()
    run_judging(RunStore(store.root), LLMClient(backend, progress=False, use_cache=False), context_for)
    records = RunStore(store.root).records(Judgment)
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    assert len(records) == expected and len(lines) == expected, "every judgment stored exactly once"
    assert Counter((r["dialogue_id"], r["dimension"]) for r in records).most_common(1)[0][1] == 1
    assert {r["status"] for r in records} == {"ok"}
    # a dialogue's judgments are flushed together, so the rerun asks only for dialogues not yet stored
    per_dialogue = Counter(d for d, _ in stored_before)
    assert set(per_dialogue.values()) == {len(ALL_DIMENSIONS)}
    whole_dialogue_calls = [dim for _, dim in backend.seen if dim != "turn_personalization"]
    assert len(whole_dialogue_calls) == (N_DIALOGUES - len(per_dialogue)) * (len(ALL_DIMENSIONS) - 1)
