"""A run with a real-looking API key in the environment writes that key nowhere.

Notebooks 03 and 04 run under papermill on the anthropic backend, pointed at a local fake server
that accepts only that key, with the SDK's debug logging on; then batch judging runs in this
process. Every file left behind (executed notebooks, kernel stdout/stderr, this process's log,
response-cache files, run-store tables, output tables and figures) is searched byte for byte.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import papermill
import pytest
from support.fake_batches import FakeBatches
from support.fake_server import FakeLLMServer, last_user_text
from support.scripted_judge import judge_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import load_benchmark, save_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging_batch
from personalens_utils.llm import LLMClient
from personalens_utils.prompt_templates.dialogue import USER_SYSTEM
from personalens_utils.runstore.records import Batch, BatchEntry, Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
MODEL = "Claude Sonnet 4.6"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def reply(api: str, body: dict[str, Any]) -> str:
    """User agent: one request, then thanks and TERMINATE. Judge: a score. Assistant: a fixed answer."""
    if body.get("system") == USER_SYSTEM:
        return "Thanks, that is all. TERMINATE" if "ASSISTANT:" in last_user_text(api, body) else "Help me?"
    text = last_user_text(api, body)
    if "Score:" in text or "VERDICT" in text:
        return judge_reply(api, body)
    return "Done, as you like it."


def files_holding(root: Path, secret: str) -> list[Path]:
    needle = secret.encode()
    return sorted(p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


@pytest.fixture
def file_log(tmp_path: Path) -> Iterator[Path]:
    """Everything this process logs (papermill's relay of the kernels' output included) goes to a file."""
    path = tmp_path / "logs" / "test-process.log"
    path.parent.mkdir()
    handler = logging.FileHandler(path)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()


@pytest.mark.slow
def test_the_api_key_is_in_no_notebook_log_cache_entry_run_file_or_output(tmp_path, monkeypatch, file_log):
    key = f"sk-ant-test-{secrets.token_urlsafe(24)}"
    save_benchmark(tiny_benchmark(n_users=2), tmp_path / "bench")
    run, cache, logs = tmp_path / "run", tmp_path / "cache", file_log.parent
    with FakeLLMServer(reply=reply, require_key=key) as server:
        batches = FakeBatches(polls_in_progress=1).install(server)
        monkeypatch.setenv("ANTHROPIC_API_KEY", key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("PERSONALENS_CACHE", str(cache))
        monkeypatch.setenv("ANTHROPIC_LOG", "debug")
        common = {"backend": "anthropic", "benchmark_dir": str(tmp_path / "bench"), "run_dir": str(run)}
        for name, parameters in (
            ("03_simulation", {"user_model": MODEL, "assistant_model": MODEL,
                               "official_export_dir": str(tmp_path / "official")}),
            ("04_judging", {"judge_model": MODEL}),
        ):
            with (logs / f"{name}.stdout").open("w") as out, (logs / f"{name}.stderr").open("w") as err:
                papermill.execute_notebook(
                    str(NOTEBOOKS / f"{name}.ipynb"), str(tmp_path / f"{name}.ipynb"), kernel_name="python3",
                    progress_bar=False, log_output=True, stdout_file=out, stderr_file=err,
                    parameters={**common, **parameters, "output_dir": str(tmp_path / f"out-{name}")},
                )
        contexts = benchmark_contexts(load_benchmark(tmp_path / "bench"))
        with LLMClient("anthropic", progress=False) as client:
            report = run_judging_batch(RunStore(run), client, contexts,
                                       JudgingConfig(judge_model="Claude Opus 4.6", poll_interval_s=0.01))
        assert server.total("401") == 0 and server.total("requests") > 0

    store = RunStore(run)
    dialogues = store.records(Dialogue)
    assert len(dialogues) == 8 and {d["status"] for d in dialogues} == {"terminated"}
    judged_by = {r["judge_model"] for r in store.records(Judgment) if r["status"] == "ok"}
    assert judged_by == {MODEL, "Claude Opus 4.6"} and report.stored > 0
    assert store.records(Batch) and store.records(BatchEntry) and batches.created
    with diskcache.Cache(str(cache)) as entries:
        assert len(entries) > 0, "the notebooks' answers were cached"
    assert "Sending HTTP Request" in (logs / "03_simulation.stderr").read_text(), "SDK debug log captured"
    outputs = [p for p in tmp_path.glob("out-*/**/*") if p.suffix in {".csv", ".tex", ".md", ".png", ".pdf"}]
    assert {p.suffix for p in outputs} >= {".csv", ".tex", ".md"}

    assert files_holding(tmp_path, key) == []
    (tmp_path / "logs" / "canary").write_bytes(b"..." + key.encode() + b"...")
    assert files_holding(tmp_path, key) == [tmp_path / "logs" / "canary"], "the search finds a planted key"

