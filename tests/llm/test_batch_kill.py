"""A batch-judging process killed (SIGKILL) while its batch is in flight: the rerun polls the stored
batch id instead of submitting again, and every judgment is stored once."""

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
from support.fake_batches import FakeBatches
from support.fake_server import TESTS_DIR, FakeLLMServer
from support.records import put
from support.scripted_judge import JUDGE, context_for, dialogue, judge_reply

from personalens_utils.judging import ALL_DIMENSIONS, JudgingConfig, run_judging_batch
from personalens_utils.llm import LLMClient
from personalens_utils.runstore.records import Batch, BatchEntry, Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

N_DIALOGUES = 5

CHILD = """
import sys
sys.path.insert(0, {tests!r})
from support.scripted_judge import JUDGE, MODEL, context_for
from personalens_utils.judging import run_judging_batch
from personalens_utils.llm import LLMClient
from personalens_utils.runstore.store import RunStore
from personalens_utils.judging import JudgingConfig

client = LLMClient("anthropic", use_cache=False, progress=False)
run_judging_batch(RunStore(sys.argv[1]), client, context_for, JudgingConfig(**JUDGE, poll_interval_s=0.02))
"""


@pytest.mark.slow
def test_killed_batch_judging_resumes_polling_and_does_not_resubmit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path / "run")
    put(store, Dialogue, [dialogue(i) for i in range(N_DIALOGUES)])
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD.format(tests=str(TESTS_DIR))))
    with FakeLLMServer(reply=judge_reply) as server:
        batches = FakeBatches(polls_in_progress=0).install(server)
        batches.hold = True
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        child = subprocess.Popen([sys.executable, str(script), str(store.root)], start_new_session=True)
        deadline = time.monotonic() + 60
        try:
            while not (batches.created and batches.retrieved[batches.created[0]] >= 3):
                if child.poll() is not None:
                    pytest.fail(f"the judging process ended (code {child.returncode}) before the kill")
                if time.monotonic() > deadline:
                    pytest.fail("the judging process never polled a batch")
                time.sleep(0.01)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL

        (batch_id,) = batches.created
        stored = RunStore(store.root).records(Batch)
        assert [b["id"] for b in stored] == [batch_id], "the batch id was stored before polling began"
        assert not store.path(Judgment).exists()
        polled_before = batches.retrieved[batch_id]

        batches.hold = False
        with LLMClient("anthropic", use_cache=False, progress=False) as client:
            report = run_judging_batch(RunStore(store.root), client, context_for,
                                       JudgingConfig(**JUDGE, poll_interval_s=0.01))

    assert batches.created == [batch_id], "nothing was submitted again"
    assert batches.retrieved[batch_id] > polled_before, "the stored batch id was polled after the restart"
    expected = N_DIALOGUES * len(ALL_DIMENSIONS)
    assert report.stored == expected and report.statuses == {"ok": expected}
    lines = [line for line in store.path(Judgment).read_bytes().splitlines() if line.strip()]
    assert len(lines) == expected
    results = RunStore(store.root).records(BatchEntry)
    assert len(results) == len(stored[0]["entries"])
    assert set(Counter(r["key"] for r in results).values()) == {1}, "every entry's result stored once"
