"""A local fake LLM server for tests and benchmarks: the real SDK code paths, no network, no key.

It speaks just enough of three wire formats for the kit's backends:

- Anthropic Messages: ``POST /v1/messages``
- OpenAI chat completions: ``POST /v1/chat/completions``
- Bedrock invoke (Claude body): ``POST /model/<model id>/invoke``

with a fixed latency, injected faults (429 with retry-after, 529, 500) decided deterministically
from the seed and the request body, an optional required key (wrong key -> 401), counters per
path, and the peak number of requests in flight. Other helpers add endpoints with `add_route`;
`support.fake_batches.FakeBatches` adds Anthropic's Message Batches endpoints, `FakeOpenAIBatches`
OpenAI's files and Batch API, and
`support.fault_server.FaultServer` scripted faults (hang, drop, garbage, error statuses). With
`prompt_cache_min_tokens` set, the Anthropic format also plays prompt caching: the text up to a
`cache_control` breakpoint is written on first sight and read afterwards, as the usage fields report.

It is a small HTTP/1.1 server on its own asyncio loop in a daemon thread: latency is an
`asyncio.sleep`, so hundreds of concurrent keep-alive connections cost no threads.

    with FakeLLMServer(latency_s=0.05, fault_rate=0.2) as server:
        client = LLMClient("anthropic", base_url=server.url)   # with ANTHROPIC_API_KEY set to anything
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import os
import pickle
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parents[1]
"""The folder holding the `support` package, put on a child server's import path."""

ReplyFn = Callable[[str, dict[str, Any]], str]
"""`reply(api, body) -> text`, where api is "anthropic", "openai" or "bedrock" and body the parsed JSON."""

Payload = dict[str, Any] | list[Any] | str | bytes
RouteResult = tuple[int, Payload, dict[str, str]]
RouteFn = Callable[["FakeLLMServer", str, str, dict[str, Any], dict[str, str]], RouteResult]
"""`route(server, method, path, body, headers) -> (status, payload, extra headers)` for an added endpoint.

A dict or list payload is sent as JSON; str or bytes as they are (set content-type in the headers).
Routes run on the server's event loop, so they must be quick.
"""

_ANTHROPIC_ERRORS = {
    429: "rate_limit_error",
    529: "overloaded_error",
    500: "api_error",
    401: "authentication_error",
}
_MAX_BODY = 64 * 2**20


def last_user_text(api: str, body: dict[str, Any]) -> str:
    """The text of the last user message in a request body of any of the three formats."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(block.get("text", "") for block in content if isinstance(block, dict))
            return str(content or "")
    return ""


def echo_reply(api: str, body: dict[str, Any]) -> str:
    return f"echo: {last_user_text(api, body)}"


def generic_reply(api: str, body: dict[str, Any]) -> str:
    return "This is a reply from the fake LLM server."


def word_tokens(text: str) -> int:
    """A token count for usage blocks: the words of `text`, at least one."""
    return max(1, len(text.split()))


def content_text(content: Any, sep: str = " ") -> str:
    """The text of a system or message content given as a string or as a list of blocks."""
    if isinstance(content, list):
        return sep.join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return str(content or "")


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """System and message content as one list of blocks, in the order a model reads them."""
    out: list[dict[str, Any]] = []
    for content in [body.get("system")] + [m.get("content") for m in body.get("messages") or []]:
        if isinstance(content, list):
            out.extend(block for block in content if isinstance(block, dict))
        elif content:
            out.append({"type": "text", "text": str(content)})
    return out


class FakeLLMServer:
    """A loopback HTTP server; use as a context manager, `url` is the base URL.

    `fault_rate` is the chance that one attempt fails with one of `fault_statuses`; the draw is a
    hash of (seed, request body, attempt number for that body), so runs repeat exactly whatever
    the arrival order. `max_faults_per_request` caps consecutive faults for one body, so a client
    that retries enough always gets through. `latency_s` is waited before every answer, faults too.
    """

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        fault_rate: float = 0.0,
        fault_statuses: Sequence[int] = (429, 529, 500),
        max_faults_per_request: int | None = 3,
        retry_after_s: float = 0.0,
        seed: int = 0,
        reply: ReplyFn | str = "generic",
        require_key: str | None = None,
        prompt_cache_min_tokens: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        process: bool = False,
    ):
        """`process=True` serves from a child process, so the server never competes with the client
        for the GIL (use it for timing); `reply` and added routes must then be module-level functions."""
        self._config = {
            "latency_s": latency_s,
            "fault_rate": fault_rate,
            "fault_statuses": tuple(fault_statuses),
            "max_faults_per_request": max_faults_per_request,
            "retry_after_s": retry_after_s,
            "seed": seed,
            "reply": reply,
            "require_key": require_key,
            "prompt_cache_min_tokens": prompt_cache_min_tokens,
            "host": host,
            "port": port,
        }
        self.process = process
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be within [0, 1], got {fault_rate}")
        if isinstance(reply, str):
            replies = {"generic": generic_reply, "echo": echo_reply}
            if reply not in replies:
                raise ValueError(f"reply must be 'generic', 'echo' or a callable, got {reply!r}")
            reply = replies[reply]
        self.latency_s = latency_s
        self.fault_rate = fault_rate
        self.fault_statuses = tuple(fault_statuses)
        self.max_faults_per_request = max_faults_per_request
        self.retry_after_s = retry_after_s
        self.seed = seed
        self.reply = reply
        self.require_key = require_key
        self.prompt_cache_min_tokens = prompt_cache_min_tokens
        self._prompt_cache: set[str] = set()
        self._host, self._port = host, port
        self._routes: dict[str, RouteFn] = {}
        self._lock = threading.Lock()
        self._attempts: Counter[str] = Counter()
        self._faults_in_a_row: Counter[str] = Counter()
        self.counters: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.in_flight = 0
        self._peak = 0
        self._child: subprocess.Popen[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._address: tuple[str, int] | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._address is None:
            raise RuntimeError("the fake server is not running; use it as a context manager or call start()")
        return f"http://{self._address[0]}:{self._address[1]}"

    def start(self) -> str:
        """Start serving on a background thread (or a child process); returns the base URL."""
        if self._loop is not None or self._child is not None:
            raise RuntimeError("the fake server is already running")
        if self.process:
            return self._start_child()
        loop = asyncio.new_event_loop()
        self._server = loop.run_until_complete(
            asyncio.start_server(self._connection, self._host, self._port, backlog=1024)
        )
        self._address = self._server.sockets[0].getsockname()[:2]
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fake-llm-server", daemon=True)
        self._thread.start()
        return self.url

    def _start_child(self) -> str:
        try:
            kind = (type(self).__module__, type(self).__qualname__)
            payload = pickle.dumps((kind, self._config, self._routes))
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise ValueError(
                f"a fake server in a child process needs module-level reply and route functions: {err}"
            ) from err
        importable = [str(TESTS_DIR), *(p for p in sys.path if p)]  # the child imports support.*
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(importable)}
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from support.fake_server import _serve_in_child; _serve_in_child()",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(payload.hex().encode() + b"\n")
        child.stdin.flush()
        line = child.stdout.readline().decode().strip()
        if not line.startswith("http://"):
            child.kill()
            raise RuntimeError(f"the fake server's child process failed to start (exit code {child.wait()})")
        self._child = child
        self._address = address_of(line)
        return self.url

    def stop(self) -> None:
        if self._child is not None:
            assert self._child.stdin is not None
            self._child.stdin.close()
            try:
                self._child.wait(10)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
            self._child = self._address = None
            return
        loop, server, thread = self._loop, self._server, self._thread
        if loop is None or server is None or thread is None:
            return

        async def shutdown() -> None:
            server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
        self._loop = self._server = self._thread = None
        self._address = None

    def __enter__(self) -> FakeLLMServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- configuration and statistics -------------------------------------------------------------

    def add_route(self, prefix: str, route: RouteFn) -> None:
        """Serve every request whose path starts with `prefix` with `route` (longest prefix wins)."""
        if self._child is not None:
            raise RuntimeError("add routes before starting a fake server that runs in a child process")
        self._routes[prefix] = route

    def _remote(self, method: str, action: str) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.url}/_fake/{action}", method=method, data=b"" if method == "POST" else None
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.loads(reply.read())

    def _snapshot(self) -> dict[str, Any]:
        with self._lock:
            counters = {path: dict(counter) for path, counter in self.counters.items()}
            return {"counters": counters, "peak_in_flight": self._peak}

    def stats(self) -> dict[str, dict[str, int]]:
        """Per path: requests, ok, faults (any error sent), injected (faults drawn), a count per status."""
        return (self._remote("GET", "stats") if self._child is not None else self._snapshot())["counters"]

    @property
    def peak_in_flight(self) -> int:
        """The most requests the server held at once (waiting out their latency) since start or reset."""
        return (self._remote("GET", "stats") if self._child is not None else self._snapshot())[
            "peak_in_flight"
        ]

    def total(self, name: str) -> int:
        """One counter summed over every path, e.g. total("requests") or total("429")."""
        return sum(counter.get(name, 0) for counter in self.stats().values())

    def reset(self) -> None:
        if self._child is not None:
            self._remote("POST", "reset")
            return
        with self._lock:
            self.counters.clear()
            self._prompt_cache.clear()
            self._attempts.clear()
            self._faults_in_a_row.clear()
            self._peak = 0

    # -- HTTP -------------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request on a keep-alive connection; False when the connection is done."""
        line = await reader.readline()
        if not line.strip():
            return False
        method, target, _version = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = header.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        if headers.get("transfer-encoding") or length > _MAX_BODY:
            await self._send(
                writer, 411, {"error": "send a content-length of at most 64 MiB"}, {}, close=True
            )
            return False
        raw = await reader.readexactly(length) if length else b""
        path = target.split("?", 1)[0]
        close = headers.get("connection", "").lower() == "close"
        if path.startswith("/_fake/"):
            await self._send(writer, *self._control(method, path), close=close)
            return not close
        intercepted = await self._intercept(path, writer, close=close)
        if intercepted is not None:
            return intercepted
        with self._lock:
            self.in_flight += 1
            self._peak = max(self._peak, self.in_flight)
        try:
            if self.latency_s > 0:
                await asyncio.sleep(self.latency_s)
            status, payload, extra = self.handle(method, path, raw, headers)
        finally:
            with self._lock:
                self.in_flight -= 1
        with self._lock:
            counter = self.counters[path]
            counter["requests"] += 1
            counter[str(status)] += 1
            counter["ok" if status < 400 else "faults"] += 1
        await self._send(writer, status, payload, extra, close=close)
        return not close

    async def _intercept(self, path: str, writer: asyncio.StreamWriter, *, close: bool) -> bool | None:
        """A subclass's chance to hold, drop or answer a request its own way (`support.fault_server`).
        None: answer it as usual; otherwise it was dealt with, and the connection stays open (True)."""
        return None

    @staticmethod
    async def _send(
        writer: asyncio.StreamWriter, status: int, payload: Payload, extra: dict[str, str], *, close: bool
    ) -> None:
        if isinstance(payload, bytes | str):
            data = payload.encode() if isinstance(payload, str) else payload
            content_type = extra.pop("content-type", "text/plain")
        else:
            data = json.dumps(payload).encode()
            content_type = extra.pop("content-type", "application/json")
        reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
        head = [
            f"HTTP/1.1 {status} {reason}",
            f"content-type: {content_type}",
            f"content-length: {len(data)}",
        ]
        head += [f"{key}: {value}" for key, value in extra.items()]
        if close:
            head.append("connection: close")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        await writer.drain()

    def _control(self, method: str, path: str) -> RouteResult:
        """The server's own endpoints: GET /_fake/stats and POST /_fake/reset (not counted)."""
        if method == "GET" and path == "/_fake/stats":
            return 200, self._snapshot(), {}
        if method == "POST" and path == "/_fake/reset":
            self.reset()
            return 200, {"reset": True}, {}
        return 404, {"error": f"no control endpoint {method} {path}"}, {}

    # -- answering --------------------------------------------------------------------------------

    def handle(self, method: str, path: str, raw: bytes, headers: dict[str, str]) -> RouteResult:
        """The answer to one request, before latency; also callable directly in tests."""
        for prefix in sorted(self._routes, key=len, reverse=True):
            if path.startswith(prefix):
                return self._routes[prefix](self, method, path, _route_body(raw, headers), headers)
        if method == "POST" and path == "/v1/messages":
            api = "anthropic"
        elif method == "POST" and path == "/v1/chat/completions":
            api = "openai"
        elif method == "POST" and path.startswith("/model/") and path.endswith("/invoke"):
            api = "bedrock"
        else:
            return (
                404,
                {"type": "error", "error": {"type": "not_found_error", "message": f"no route {path}"}},
                {},
            )
        if not self._authorised(headers):
            return self._error(api, 401, "invalid key")
        status = self._fault_for(raw)
        if status is not None:
            with self._lock:
                self.counters[path]["injected"] += 1
            extra = {"retry-after": f"{self.retry_after_s:g}"} if status == 429 else {}
            return self._error(api, status, f"injected fault {status}", extra)
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as err:
            return self._error(api, 400, f"request body is not JSON: {err}")
        return 200, self._success(api, path, body), {}

    def _fault_for(self, raw: bytes) -> int | None:
        """The status to fail this attempt with, or None; deterministic in (seed, body, attempt)."""
        if self.fault_rate <= 0 or not self.fault_statuses:
            return None
        body_id = hashlib.sha256(raw).hexdigest()
        with self._lock:
            attempt = self._attempts[body_id]
            self._attempts[body_id] += 1
            capped = (
                self.max_faults_per_request is not None
                and self._faults_in_a_row[body_id] >= self.max_faults_per_request
            )
            digest = hashlib.sha256(f"{self.seed}:{body_id}:{attempt}".encode()).digest()
            if capped or int.from_bytes(digest[:8], "big") / 2**64 >= self.fault_rate:
                self._faults_in_a_row[body_id] = 0
                return None
            self._faults_in_a_row[body_id] += 1
        return self.fault_statuses[int.from_bytes(digest[8:12], "big") % len(self.fault_statuses)]

    def _authorised(self, headers: dict[str, str]) -> bool:
        if self.require_key is None:
            return True
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        return self.require_key in (bearer, headers.get("x-api-key", ""))

    @staticmethod
    def _error(api: str, status: int, message: str, extra: dict[str, str] | None = None) -> RouteResult:
        if api == "openai":
            return (
                status,
                {"error": {"message": message, "type": "fake_error", "code": str(status)}},
                extra or {},
            )
        kind = _ANTHROPIC_ERRORS.get(status, "invalid_request_error")
        return status, {"type": "error", "error": {"type": kind, "message": message}}, extra or {}

    def _success(self, api: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        text = self.reply(api, body)
        prompt = " ".join(content_text(m.get("content")) for m in body.get("messages") or []) + content_text(
            body.get("system", "")
        )
        usage_in, usage_out = word_tokens(prompt), word_tokens(text)
        ident = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
        if api == "openai":
            return {
                "id": f"chatcmpl-{ident}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": usage_in,
                    "completion_tokens": usage_out,
                    "total_tokens": usage_in + usage_out,
                },
            }
        model = body.get("model") or path.removeprefix("/model/").removesuffix("/invoke")
        read, written = self._cache_use(model, body)
        return {
            "id": f"msg_{ident}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": max(1, usage_in - read - written),
                "output_tokens": usage_out,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": written,
            },
        }

    def _cache_use(self, model: str, body: dict[str, Any]) -> tuple[int, int]:
        """(tokens read from, tokens written to) the simulated prompt cache for one Anthropic body."""
        if self.prompt_cache_min_tokens is None:
            return 0, 0
        blocks = _blocks(body)
        marked = [i for i, block in enumerate(blocks) if block.get("cache_control")]
        if not marked:
            return 0, 0
        prefix = " ".join(str(block.get("text", "")) for block in blocks[: marked[-1] + 1])
        tokens = len(prefix.split())
        if tokens < self.prompt_cache_min_tokens:
            return 0, 0
        key = hashlib.sha256(f"{model}\0{prefix}".encode()).hexdigest()
        with self._lock:
            if key in self._prompt_cache:
                return tokens, 0
            self._prompt_cache.add(key)
        return 0, tokens


def _route_body(raw: bytes, headers: dict[str, str]) -> dict[str, Any]:
    """An added route's request body: parsed JSON, or, for any other content (a multipart upload), the
    bytes under "_raw" and the content type under "_content_type"."""
    if not raw:
        return {}
    if headers.get("content-type", "").startswith("multipart/"):
        return {"_raw": raw, "_content_type": headers["content-type"]}
    return json.loads(raw)


def _serve_in_child() -> None:
    """Child-process entry: read the pickled settings, print the URL, serve until stdin closes.

    The server class travels with the settings, so a subclass (e.g. `support.fake_bedrock`) serves too."""
    (module, qualname), config, routes = pickle.loads(bytes.fromhex(sys.stdin.readline().strip()))
    server = getattr(importlib.import_module(module), qualname)(**config)
    for prefix, route in routes.items():
        server.add_route(prefix, route)
    print(server.start(), flush=True)
    sys.stdin.read()
    server.stop()


def address_of(url: str) -> tuple[str, int]:
    """(host, port) of a base URL such as `FakeLLMServer.url`."""
    host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
    return host, int(port)
