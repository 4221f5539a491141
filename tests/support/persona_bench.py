"""PERSONA Bench test support: the authors' code extracted from ../shared, their modules imported from
that copy, and a fake Azure OpenAI route that records every chat body the authors' evaluators send."""

from __future__ import annotations

import importlib.util
import tarfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from support.fake_server import FakeLLMServer

CHECKOUT = Path(__file__).resolve().parents[2]
CODE_ARCHIVE = CHECKOUT.parent / "shared" / "data" / "persona-bench-code.tar.xz"
"""The authors' PERSONA Bench code (`persona-bench-code/`), MIT, as the team keeps it."""


def extract_code(into: Path) -> Path:
    """The authors' code extracted into `into`; skips the test, naming the archive, when it is absent."""
    if not CODE_ARCHIVE.is_file():
        pytest.skip(f"the authors' PERSONA Bench code is not at {CODE_ARCHIVE}")
    with tarfile.open(CODE_ARCHIVE) as tar:
        tar.extractall(into, filter="data")
    return next(p.parent for p in into.rglob("PromptMakers") if p.is_dir())


def import_script(path: Path, name: str) -> ModuleType:
    """One of the authors' scripts imported as a module (its `__main__` block does not run)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class AzureRecorder:
    """Answers `POST /openai/deployments/<name>/chat/completions` (what `AzureOpenAI` sends) with
    `reply(prompt)` and keeps every body, so the authors' evaluators can be pointed at a fake server."""

    def __init__(self, reply: Any):
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def install(self, server: FakeLLMServer) -> None:
        server.add_route("/openai/deployments/", self.route)

    def route(
        self, server: FakeLLMServer, method: str, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            self.bodies.append(body)
        text = self.reply(body["messages"][-1]["content"])
        n = int(body.get("n") or 1)
        choices = [
            {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            for i in range(n)
        ]
        return (
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": choices,
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
            {},
        )
