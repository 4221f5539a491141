"""Generation through the real SDK backends, against the local fake LLM server (no network, no key).

The server answers each prompt with the text the offline backend gave for it in a recorded run, so
the SDK run must produce exactly the recorded benchmark, also when the server injects 429/529/500.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.fake_server import FakeLLMServer, last_user_text

from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.llm import LLMClient, Request, Response
from personalens_utils.llm.offline import OfflineBackend

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

CONFIG = GenerationConfig(n_users=3, seed=5, sd_tasks_per_domain=2, md_tasks=3,
                          domains=("Alarm", "Music", "Restaurants", "Events"))


class Recorder:
    """The offline backend, remembering its answer to every prompt."""

    name = "recorder"

    def __init__(self) -> None:
        self.offline = OfflineBackend()
        self.answers: dict[str, str] = {}

    async def acomplete(self, request: Request, model: str) -> Response:
        response = self.offline.respond(request, model)
        self.answers[request.messages[-1].content] = response.text
        return response


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-key")
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "none"))


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_generation_through_an_sdk_backend(keys: None, tmp_path: Path, backend: str) -> None:
    recorder = Recorder()
    with LLMClient(recorder, progress=False, use_cache=False) as client:
        expected = generate_benchmark(CONFIG, client=client, output_dir=tmp_path / "recorded",
                                      run_dir=tmp_path / "recorded-run").benchmark

    def reply(api: str, body: dict[str, Any]) -> str:
        return recorder.answers[last_user_text(api, body)]

    with FakeLLMServer(reply=reply, fault_rate=0.2, seed=3) as server:
        base_url = server.url + "/v1" if backend == "openai" else server.url
        with LLMClient(backend, base_url=base_url, use_cache=False, progress=False, retry_base_s=0.001,
                       max_concurrency=8) as client:
            result = generate_benchmark(CONFIG, client=client, output_dir=tmp_path / "sdk",
                                        run_dir=tmp_path / "sdk-run")
        faults = sum(server.total(str(status)) for status in (429, 529, 500))
    assert result.failures.empty and result.backend == backend
    assert result.benchmark.users == expected.users and result.benchmark.tasks == expected.tasks
    assert result.benchmark.scenarios.equals(expected.scenarios)
    assert faults > 0 and result.usage["retries"].sum() == faults
    assert result.usage["calls"].sum() == len(recorder.answers)
