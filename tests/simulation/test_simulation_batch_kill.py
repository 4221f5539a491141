"""A batch simulation SIGKILLed between rounds (its third round's batch in flight): the rerun polls that
batch instead of submitting it again, submits no request whose answer is stored, and stores the
dialogues the live path stores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from support.fake_batches import FakeBatches
from support.fake_server import TESTS_DIR, FakeLLMServer
from support.records import dialogue_lines
from support.scripted_models import dialogue_config, dialogue_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.llm import LLMClient
from personalens_utils.runstore.records import Batch, BatchEntry, Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import run_simulation

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

CHILD = """
import sys
sys.path.insert(0, {tests!r})
from support.scripted_models import dialogue_config
from support.tiny_benchmark import tiny_benchmark
from personalens_utils.llm import LLMClient
from personalens_utils.simulation import run_simulation

client = LLMClient("anthropic", use_cache=False, progress=False)
run_simulation(tiny_benchmark(n_users=3, seed=3), sys.argv[1], client,
               dialogue_config(batch=True, poll_interval_s=0.02))
"""


def test_a_batch_simulation_killed_between_rounds_resumes_without_asking_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = tiny_benchmark(n_users=3, seed=3)
    store = RunStore(tmp_path / "batch")
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD.format(tests=str(TESTS_DIR))))
    with FakeLLMServer(reply=dialogue_reply) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        with LLMClient("anthropic", use_cache=False, progress=False) as live:
            run_simulation(bench, tmp_path / "live", live, dialogue_config())
        batches = FakeBatches(polls_in_progress=0).install(server)
        batches.hold_from = 3
        child = subprocess.Popen([sys.executable, str(script), str(store.root)], start_new_session=True)
        deadline = time.monotonic() + 120
        try:
            while not (len(batches.created) >= 3 and batches.retrieved[batches.created[2]] >= 3):
                if child.poll() is not None:
                    pytest.fail(f"the simulation ended (code {child.returncode}) before the kill")
                if time.monotonic() > deadline:
                    pytest.fail("the simulation never reached its third round")
                time.sleep(0.01)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
        before = list(batches.created)
        assert [b["id"] for b in RunStore(store.root).records(Batch)] == before, "recorded on acceptance"
        answered = {e["key"] for e in RunStore(store.root).records(BatchEntry)}
        assert answered and not store.path(Dialogue).exists()

        batches.hold_from = None
        held = before[2]
        polled = batches.retrieved[held]
        with LLMClient("anthropic", use_cache=False, progress=False) as client:
            report = run_simulation(bench, RunStore(store.root), client,
                                    dialogue_config(batch=True, poll_interval_s=0.01))

    assert report.stored == 12 and report.pending == 0
    assert batches.created[:3] == before and batches.retrieved[held] > polled, "the held batch was polled"
    resent = [r for b in batches.created[3:] for r in batches.batches[b]["requests"]]
    keys = {cid: key for b in RunStore(store.root).records(Batch) for cid, key in b["entries"].items()}
    assert not {keys[r["custom_id"]] for r in resent} & answered, "no request whose answer is stored"
    submissions = Counter(keys.values())
    assert set(submissions.values()) == {1}, "every request submitted once, across both processes"
    assert dialogue_lines(RunStore(store.root)) == dialogue_lines(RunStore(tmp_path / "live"))
    assert json.loads(next(iter(dialogue_lines(store).values())))["backend"] == "anthropic"
