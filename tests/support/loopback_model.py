"""`LoopbackModel`: the leanest Anthropic-format `ChatModel`, for timing the client against a fake server."""

from __future__ import annotations

import asyncio
import json
import time
import weakref

from personalens_utils.llm.backends._http import classify_status
from personalens_utils.llm.types import Request, Response, RetryableError, Usage

from .fake_server import address_of


class LoopbackModel:
    """A minimal `ChatModel` speaking the Anthropic Messages format to a fake server over bare sockets.

    For measuring the client itself: an SDK call costs 2-3 ms of CPU here (request building,
    validation, and httpcore's pool bookkeeping, which grows with the number of open
    connections), enough to hide the client's scheduling behind CPU time on a 2-core machine.
    This model keeps one idle keep-alive connection per finished call and nothing else.
    """

    name = "loopback"

    def __init__(self, url: str):
        self.host, self.port = address_of(url)
        self._idle: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
        ] = weakref.WeakKeyDictionary()

    async def acomplete(self, request: Request, model: str) -> Response:
        body = {
            "model": model,
            "max_tokens": request.max_tokens,
            "messages": [m.as_dict() for m in request.messages],
        }
        if request.system:
            body["system"] = request.system
        raw = json.dumps(body).encode()
        idle = self._idle.setdefault(asyncio.get_running_loop(), [])
        started = time.perf_counter()
        try:
            reader, writer = idle.pop() if idle else await asyncio.open_connection(self.host, self.port)
            writer.write(
                b"POST /v1/messages HTTP/1.1\r\nhost: loopback\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(raw), raw)
            )
            status_line = await reader.readline()
            if not status_line:
                raise ConnectionResetError("the server closed the connection")
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            payload = json.loads(await reader.readexactly(int(headers.get("content-length") or 0)))
        except (OSError, asyncio.IncompleteReadError) as err:
            raise RetryableError(f"loopback model: connection failed: {err!r}") from err
        idle.append((reader, writer))
        status = int(status_line.split()[1])
        if status != 200:
            message = str(payload.get("error", {}).get("message", payload))
            raise classify_status(status, message, headers, backend=self.name, model=model, key_hint="")
        usage = payload["usage"]
        return Response(
            text="".join(block.get("text", "") for block in payload["content"]),
            usage=Usage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"]),
            backend=self.name,
            model=model,
            latency_s=time.perf_counter() - started,
        )
