"""A JupyterLab server driven over its REST API, and the Chromium the browser tests drive it with.

`serving_lab` starts a server (`make lab` or jupyter lab) on loopback with `LAB_SETTINGS`, waits for
it and stops it; `lab_api` queries it; the `page` fixture of `support.shared_fixtures` opens headless
`CHROMIUM` (the distribution's package, driven by Playwright; no browser is downloaded).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

CHROMIUM = os.environ.get("PERSONALENS_CHROMIUM") or shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None
)
LAB_SETTINGS = {
    # every cell in the page, so the explorer far down the notebook is in the DOM
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # no news or update check: the test touches no network beyond loopback
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def lab_api(base: str, token: str, path: str, method: str = "GET") -> object:
    """The JSON answer of the server at `base` to `method path` (none for an empty body)."""
    request = urllib.request.Request(f"{base}{path}", method=method,
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


def stop_lab(proc: subprocess.Popen[bytes], base: str, token: str) -> None:
    """Shut the kernels and the server down through the API, then make sure the processes are gone."""
    try:
        for kernel in lab_api(base, token, "/api/kernels"):  # type: ignore[union-attr]
            lab_api(base, token, f"/api/kernels/{kernel['id']}", "DELETE")
        lab_api(base, token, "/api/shutdown", "POST")
        proc.wait(timeout=30)
    except Exception:  # the server did not answer or did not stop: end its process group
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
            if proc.poll() is None:
                os.killpg(proc.pid, sig)
                try:
                    proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    continue


@contextlib.contextmanager
def serving_lab(what: str, command: Callable[[int, str], list[str]], cwd: Path, env: Mapping[str, str],
                tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(base URL, token) of the server `command(port, token)` (`what`, in messages) starts in `cwd`, its
    settings, workspaces and runtime files under `tmp_path/jupyter`, once it answers; its kernels and
    itself stopped after."""
    config = tmp_path / "jupyter"
    for name, settings in LAB_SETTINGS.items():
        path = config / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings), encoding="utf-8")
    env = {**env, "JUPYTERLAB_SETTINGS_DIR": str(config / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(config / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(config / "runtime")}
    port, token = free_port(), secrets.token_hex(16)
    log = (tmp_path / "lab.log").open("wb")
    proc = subprocess.Popen(command(port, token), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"{what} exited: {(tmp_path / 'lab.log').read_text()[-2000:]}"
            try:
                lab_api(base, token, "/api/status")
                break
            except OSError:
                assert time.monotonic() < deadline, "JupyterLab did not answer within 90 s"
                time.sleep(0.5)
        yield base, token
    finally:
        stop_lab(proc, base, token)
        log.close()
        print(f"JupyterLab log: {tmp_path / 'lab.log'}")


def words(text: str) -> str:
    """Text with every run of white space (no-break spaces too) as one space."""
    return re.sub(r"\s+", " ", text).strip()
