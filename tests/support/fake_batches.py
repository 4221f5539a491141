"""Anthropic's Message Batches endpoints, served by a `FakeLLMServer` for the batch judging tests."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .fake_server import FakeLLMServer, RouteResult


class FakeBatches:
    """Anthropic's Message Batches endpoints for a `FakeLLMServer`: create, retrieve, results (JSONL).

    A batch reports `in_progress` for its first `polls_in_progress` retrievals (and for as long as
    `hold` is True, or, with `hold_from=n`, while it is the n-th batch created or a later one), then
    `ended`. Each entry's outcome is `outcome(custom_id, params)` if given
    ("succeeded", "errored" as an api_error, "invalid" as an invalid_request_error, "expired" or
    "canceled"), else drawn from the seed and the custom_id with `errored_rate` and `expired_rate`;
    succeeded entries are answered as `POST /v1/messages` would answer their params. `created` lists batch
    ids in order and `retrieved` counts retrievals per id, for tests to check what a client did.

        batches = FakeBatches(polls_in_progress=1).install(server)
    """

    PREFIX = "/v1/messages/batches"

    def __init__(
        self,
        *,
        polls_in_progress: int = 1,
        errored_rate: float = 0.0,
        expired_rate: float = 0.0,
        seed: int = 0,
        outcome: Callable[[str, dict[str, Any]], str] | None = None,
    ):
        if errored_rate < 0 or expired_rate < 0 or errored_rate + expired_rate > 1:
            raise ValueError("errored_rate and expired_rate must be non-negative and sum to at most 1")
        self.polls_in_progress = polls_in_progress
        self.errored_rate = errored_rate
        self.expired_rate = expired_rate
        self.seed = seed
        self.outcome = outcome
        self.hold = False
        self.hold_from: int | None = None
        self.batches: dict[str, dict[str, Any]] = {}
        self.created: list[str] = []
        self.retrieved: Counter[str] = Counter()
        self._lock = threading.Lock()

    def install(self, server: FakeLLMServer) -> FakeBatches:
        server.add_route(self.PREFIX, self.route)
        return self

    def route(
        self, server: FakeLLMServer, method: str, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> RouteResult:
        if not server._authorised(headers):
            return server._error("anthropic", 401, "invalid key")
        parts = path.removeprefix(self.PREFIX).strip("/").split("/")
        if method == "POST" and parts == [""]:
            return self._create(server, body)
        batch = self.batches.get(parts[0])
        if batch is None:
            return server._error("anthropic", 404, f"no message batch {parts[0]!r}")
        if method == "GET" and len(parts) == 1:
            return 200, self._retrieve(server, batch), {}
        if method == "GET" and parts[1:] == ["results"] and batch["status"] == "ended":
            lines = [json.dumps(result) for result in batch["results"]]
            return 200, "\n".join(lines) + "\n", {"content-type": "application/binary"}
        return server._error("anthropic", 404, f"no route {method} {path}")

    def _create(self, server: FakeLLMServer, body: dict[str, Any]) -> RouteResult:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return server._error("anthropic", 400, "requests: a non-empty list is required")
        ids = [r.get("custom_id") for r in requests]
        if len(set(ids)) != len(ids) or not all(isinstance(i, str) and 0 < len(i) <= 64 for i in ids):
            return server._error("anthropic", 400, "custom_id values must be unique, of 1-64 characters")
        with self._lock:
            digest = hashlib.sha256(str(ids).encode()).hexdigest()[:8]
            batch_id = f"msgbatch_{len(self.created) + 1:04d}_{digest}"
            self.created.append(batch_id)
            self.batches[batch_id] = {
                "id": batch_id, "requests": requests, "status": "in_progress", "results": [],
                "created_at": datetime.now(UTC).isoformat(),
            }
        return 200, self._retrieve(server, self.batches[batch_id], count=False), {}

    def _retrieve(
        self, server: FakeLLMServer, batch: dict[str, Any], *, count: bool = True
    ) -> dict[str, Any]:
        with self._lock:
            if count:
                self.retrieved[batch["id"]] += 1
            held = self.hold or (self.hold_from is not None
                                 and self.created.index(batch["id"]) + 1 >= self.hold_from)
            due = not held and self.retrieved[batch["id"]] > self.polls_in_progress
            if batch["status"] == "in_progress" and due:
                batch["results"] = [self._result(server, r) for r in batch["requests"]]
                batch["status"] = "ended"
                batch["ended_at"] = datetime.now(UTC).isoformat()
        tally = Counter(r["result"]["type"] for r in batch["results"])
        ended = batch["status"] == "ended"
        return {
            "id": batch["id"],
            "type": "message_batch",
            "processing_status": batch["status"],
            "request_counts": {
                "processing": 0 if ended else len(batch["requests"]),
                **{kind: tally.get(kind, 0) for kind in ("succeeded", "errored", "canceled", "expired")},
            },
            "created_at": batch["created_at"],
            "expires_at": batch["created_at"],
            "ended_at": batch.get("ended_at"),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{server.url}{self.PREFIX}/{batch['id']}/results" if ended else None,
        }

    def _draw(self, custom_id: str, params: dict[str, Any]) -> str:
        if self.outcome is not None:
            return self.outcome(custom_id, params)
        digest = hashlib.sha256(f"{self.seed}:{custom_id}".encode()).digest()
        draw = int.from_bytes(digest[:8], "big") / 2**64
        if draw < self.errored_rate:
            return "errored"
        return "expired" if draw < self.errored_rate + self.expired_rate else "succeeded"

    def _result(self, server: FakeLLMServer, request: dict[str, Any]) -> dict[str, Any]:
        custom_id, params = request["custom_id"], request.get("params") or {}
        kind = self._draw(custom_id, params)
        if kind == "succeeded":
            message = server._success("anthropic", "/v1/messages", params)
            result: dict[str, Any] = {"type": kind, "message": message}
        elif kind == "errored":
            error = {"type": "api_error", "message": "injected batch entry error"}
            result = {"type": kind, "error": {"type": "error", "error": error}}
        elif kind == "invalid":
            error = {"type": "invalid_request_error", "message": "injected invalid request"}
            result = {"type": "errored", "error": {"type": "error", "error": error}}
        else:
            result = {"type": kind}
        return {"custom_id": custom_id, "result": result}


def _multipart_file(body: dict[str, Any]) -> bytes:
    """The content of the `file` part of a multipart/form-data upload."""
    boundary = body["_content_type"].split("boundary=", 1)[1].strip('"').encode()
    for part in body["_raw"].split(b"--" + boundary):
        head, _, content = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return content.removesuffix(b"\r\n")
    raise ValueError("the upload has no file part")


class FakeOpenAIBatches(FakeBatches):
    """OpenAI's files and Batch API for a `FakeLLMServer`: upload (`POST /v1/files`), `POST /v1/batches`,
    retrieve, and the output and error files' content (`GET /v1/files/<id>/content`).

    Entries are drawn as `FakeBatches` draws them: succeeded ones are answered as `POST
    /v1/chat/completions` would answer their body and go to the output file; "errored" ones go to the
    error file as a 500, "invalid" ones as a 400, and "expired" or "canceled" ones with the
    `batch_expired` / `batch_cancelled` code. `uploads` keeps every uploaded file's bytes.
    """

    PREFIX = "/v1/batches"
    FILES = "/v1/files"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.files: dict[str, bytes] = {}
        self.uploads: list[bytes] = []

    def install(self, server: FakeLLMServer) -> FakeOpenAIBatches:
        server.add_route(self.PREFIX, self.route)
        server.add_route(self.FILES, self.files_route)
        return self

    def _store_file(self, data: bytes) -> str:
        file_id = f"file-{len(self.files) + 1:04d}-{hashlib.sha256(data).hexdigest()[:8]}"
        self.files[file_id] = data
        return file_id

    def files_route(
        self, server: FakeLLMServer, method: str, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> RouteResult:
        if not server._authorised(headers):
            return server._error("openai", 401, "invalid key")
        parts = path.removeprefix(self.FILES).strip("/").split("/")
        if method == "POST" and parts == [""]:
            data = _multipart_file(body)
            with self._lock:
                self.uploads.append(data)
                file_id = self._store_file(data)
            return 200, {"id": file_id, "object": "file", "bytes": len(data), "created_at": 0,
                         "filename": "batch.jsonl", "purpose": "batch", "status": "processed"}, {}
        if method == "GET" and parts[1:] == ["content"] and parts[0] in self.files:
            return 200, self.files[parts[0]], {"content-type": "application/octet-stream"}
        return server._error("openai", 404, f"no route {method} {path}")

    def route(
        self, server: FakeLLMServer, method: str, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> RouteResult:
        if not server._authorised(headers):
            return server._error("openai", 401, "invalid key")
        parts = path.removeprefix(self.PREFIX).strip("/").split("/")
        if method == "POST" and parts == [""]:
            data = self.files.get(body.get("input_file_id", ""))
            if data is None or body.get("endpoint") != "/v1/chat/completions":
                return server._error("openai", 400, "an input_file_id and endpoint /v1/chat/completions")
            requests = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
            with self._lock:
                batch_id = f"batch_{len(self.created) + 1:04d}"
                self.created.append(batch_id)
                self.batches[batch_id] = {"id": batch_id, "requests": requests, "status": "in_progress",
                                          "input_file_id": body["input_file_id"]}
            return 200, self._openai_batch(self.batches[batch_id]), {}
        batch = self.batches.get(parts[0])
        if method == "GET" and len(parts) == 1 and batch is not None:
            with self._lock:
                self.retrieved[batch["id"]] += 1
                held = self.hold or (self.hold_from is not None
                                     and self.created.index(batch["id"]) + 1 >= self.hold_from)
                if batch["status"] == "in_progress" and not held and (
                        self.retrieved[batch["id"]] > self.polls_in_progress):
                    self._finish(server, batch)
            return 200, self._openai_batch(batch), {}
        return server._error("openai", 404, f"no route {method} {path}")

    def _finish(self, server: FakeLLMServer, batch: dict[str, Any]) -> None:
        """Answer every entry into an output file and an error file (called holding the lock)."""
        output, errors = [], []
        for request in batch["requests"]:
            custom_id = request["custom_id"]
            kind = self._draw(custom_id, request["body"])
            line: dict[str, Any] = {"id": f"req-{custom_id}", "custom_id": custom_id, "response": None,
                                    "error": None}
            if kind == "succeeded":
                answer = server._success("openai", "/v1/chat/completions", request["body"])
                line["response"] = {"status_code": 200, "request_id": custom_id, "body": answer}
                output.append(line)
                continue
            if kind in ("errored", "invalid"):
                status = 500 if kind == "errored" else 400
                error = {"message": f"injected batch entry error {status}", "type": "fake_error"}
                line["response"] = {"status_code": status, "request_id": custom_id, "body": {"error": error}}
            else:
                code = "batch_expired" if kind == "expired" else "batch_cancelled"
                line["error"] = {"code": code, "message": f"injected {kind} entry"}
            errors.append(line)
        batch["results"] = output + errors
        batch["output_file_id"] = self._store_file(_jsonl(output)) if output else None
        batch["error_file_id"] = self._store_file(_jsonl(errors)) if errors else None
        batch["status"] = "completed"

    @staticmethod
    def _openai_batch(batch: dict[str, Any]) -> dict[str, Any]:
        done = batch["status"] == "completed"
        return {"id": batch["id"], "object": "batch", "endpoint": "/v1/chat/completions",
                "input_file_id": batch["input_file_id"], "completion_window": "24h", "created_at": 0,
                "status": batch["status"], "output_file_id": batch.get("output_file_id"),
                "error_file_id": batch.get("error_file_id"), "completed_at": 1 if done else None,
                "request_counts": {"total": len(batch["requests"]),
                                   "completed": len(batch["requests"]) if done else 0, "failed": 0}}


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()
