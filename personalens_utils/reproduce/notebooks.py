"""One notebook of a reproduction run under papermill, and the tables and figures it wrote."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import papermill
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_runtime_dir
from jupyter_core.utils import ensure_dir_exists
from traitlets.config import Config

from personalens_utils.base.errors import KitError
from personalens_utils.reproduce.settings import Settings

OUTPUT_FOLDERS = ("tables", "figures")
PARAMETERS_LOG = "parameters.log"
"""Beside a pass's executed notebooks: each notebook's parameters, one line each."""
KERNEL_START_FAILURE = "Kernel died before replying to kernel_info"
"""What papermill raises when a kernel cannot start, e.g. when another kernel took its port first."""
IPC_PATH_LIMIT = 100
"""Longest socket path used: Linux refuses Unix socket paths over 107 bytes."""
MESSAGE_LIMIT = 600
"""Characters of an error's message a summary line keeps."""


class RunnerError(KitError):
    """A step of the runner itself (not a notebook) failed: the message names the step and the error."""

    says_all = True

    def short(self) -> str:
        return str(self)  # the message already carries the type of the error that stopped the step


def failure_line(exc: BaseException) -> str:
    """What failed, on one line: the exception's type and message. A notebook's error is the `ename` and
    `evalue` its kernel reported, not the last line of the traceback papermill shows, which for the kit's
    own errors is the hint on how to see the traceback."""
    name = getattr(exc, "ename", None) or type(exc).__name__
    value = getattr(exc, "evalue", None)
    text = " ".join(str(exc if value is None else value).split())
    return f"{name}: {text[:MESSAGE_LIMIT]}" if text else name


@contextmanager
def runner_step(what: str) -> Iterator[None]:
    """Run one step of the runner (writing the index, publishing...): any error it raises becomes a
    `RunnerError` naming `what`, shown as one line instead of a traceback."""
    try:
        yield
    except RunnerError:
        raise
    except Exception as exc:
        raise RunnerError(f"{what} failed: {failure_line(exc)}") from exc


def kernel_config() -> Config:
    """How the kernel manager starts a notebook's kernel.

    Its sockets are Unix sockets where the system has them: TCP ports are picked free by one process and
    bound by another, and two kernels starting at once can pick the same port (under load the loser's
    heartbeat thread printed a `ZMQError: Address already in use` traceback into the run's output). Each
    kernel's sockets share a new prefix in Jupyter's private runtime folder (the manager's own default is
    a fixed name in the working folder). TCP remains for systems without Unix sockets or with a runtime
    folder so deep that a socket path would pass the system's limit. On either transport the manager
    gives the kernel CurveZMQ keys when its kernelspec declares support (the one `make install`
    registers does), about which ipykernel otherwise warns once per kernel."""
    manager: dict[str, str] = {"transport_encryption": "auto"}
    prefix = Path(jupyter_runtime_dir()) / f"kernel-{uuid.uuid4().hex}-ipc"
    if os.name == "posix" and len(f"{prefix}-65535".encode()) <= IPC_PATH_LIMIT:
        ensure_dir_exists(prefix.parent, mode=0o700)
        manager |= {"transport": "ipc", "ip": str(prefix)}
    return Config({"KernelManager": manager})



class FinishedKernelManager(AsyncKernelManager):
    """A kernel manager that shuts a finished notebook's kernel down without interrupting it first.

    jupyter_client's graceful shutdown sends SIGINT to the kernel's process group before its shutdown
    request. A kernel whose main thread is still inside a message handler then raises KeyboardInterrupt
    there and ipykernel logs "KeyboardInterrupt caught in kernel." on the reproduction's terminal (the
    occasional line), and every process the kernel started gets the SIGINT too. By then every cell has
    run or failed, so there is nothing to interrupt: the shutdown request alone ends the kernel, and the
    manager still kills one that does not end within `shutdown_wait_time`. A cell that runs past its
    timeout is still interrupted (that interrupt does not come from a shutdown)."""

    async def _async_interrupt_kernel(self) -> None:
        if not self.shutting_down:
            await super()._async_interrupt_kernel()


@dataclass
class StepResult:
    """One notebook of a pass: ok, failed (`message` says why), or not run (`skipped`: a notebook it
    needs failed). `written` lists the tables and figures it wrote, found by comparing the pass's
    output folders before and after it ran."""

    notebook: str
    executed: Path | None
    seconds: float
    ok: bool
    message: str = ""
    skipped: bool = False
    written: tuple[Path, ...] = ()

    @property
    def outcome(self) -> str:
        if self.ok:
            return "ok"
        return ("not run: " if self.skipped else "FAILED: ") + self.message


def outputs(folder: Path) -> dict[Path, tuple[int, int]]:
    """Every file in a tables/ or figures/ folder under `folder`, with its modification time and size."""
    found = {}
    for sub in OUTPUT_FOLDERS:
        for path in folder.rglob(f"{sub}/*"):
            if path.is_file():
                stat = path.stat()
                found[path] = (stat.st_mtime_ns, stat.st_size)
    return found


def _declared(notebook: Path) -> set[str]:
    return set(papermill.inspect_notebook(str(notebook)))


def run_notebook(
    settings: Settings, name: str, out: Path, params: dict[str, Any], label: str = "", counter: str = ""
) -> StepResult:
    """Execute one notebook with the parameters it declares into `out`; a failure is recorded, not raised.

    `counter` ("[3/11] ") says where the notebook stands in its pass; the parameters go to the pass's
    log (`out/parameters.log`), not the terminal, where a bar over the notebook's cells shows progress."""
    source = settings.notebooks_dir / f"{name}.ipynb"
    if not source.is_file():
        print(f"[reproduce] {counter}{name}{label} FAILED: {source} does not exist", flush=True)
        return StepResult(name + label, None, 0.0, False, f"notebooks/{source.name} does not exist")
    declared = _declared(source)
    passed = {k: v for k, v in params.items() if k in declared}
    out.mkdir(parents=True, exist_ok=True)
    executed = out / f"{name}{label}.ipynb"
    before = outputs(out)
    started = time.perf_counter()
    log_parameters(out / PARAMETERS_LOG, f"{name}{label}", passed)
    print(f"[reproduce] {counter}{name}{label} ...", flush=True)
    try:
        execute(source, executed, passed, settings.notebooks_dir, f"{name}{label}",
                progress=sys.stderr.isatty())
    except Exception as exc:  # a failed notebook is reported in INDEX.md; its dependants do not run
        seconds = time.perf_counter() - started
        message = failure_line(exc)
        print(f"[reproduce] {counter}{name}{label} FAILED after {seconds:.0f}s: {message}", flush=True)
        return StepResult(name + label, executed, seconds, False, message, written=_written(out, before))
    seconds = time.perf_counter() - started
    print(f"[reproduce] {counter}{name}{label} done in {seconds:.0f}s", flush=True)
    return StepResult(name + label, executed, seconds, True, written=_written(out, before))


def _written(folder: Path, before: dict[Path, tuple[int, int]]) -> tuple[Path, ...]:
    return tuple(sorted(path for path, stamp in outputs(folder).items() if before.get(path) != stamp))


def log_parameters(log_file: Path, name: str, params: dict[str, Any]) -> None:
    """Append a notebook's parameters to the pass's log: kept for reading, too long for the terminal."""
    with log_file.open("a", encoding="utf-8") as fh:
        fh.write(f"{name}: {', '.join(f'{k}={v!r}' for k, v in params.items())}\n")


def execute(
    source: Path, executed: Path, params: dict[str, Any], cwd: Path, name: str, *, progress: bool = False
) -> None:
    """papermill, started again once if the kernel died before running anything (a port race
    between kernels starting at the same moment); any other failure is the notebook's own.
    `progress` draws papermill's tqdm bar over the notebook's cells (on a terminal)."""
    for attempt in (1, 2):
        try:
            papermill.execute_notebook(
                str(source), str(executed), parameters=params, kernel_name="python3", progress_bar=progress,
                cwd=str(cwd), config=kernel_config(), kernel_manager_class=FinishedKernelManager,
            )
            return
        except Exception as exc:  # papermill re-raises the kernel client's RuntimeError as it is
            if attempt == 2 or KERNEL_START_FAILURE not in str(exc):
                raise
            print(f"[reproduce] {name}: the kernel did not start ({exc}); starting it again", flush=True)


@dataclass
class PassResult:
    name: str
    benchmark: str
    users: str
    ablation_users: str
    folder: Path
    steps: list[StepResult] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Every notebook of the pass ran to its end."""
        return bool(self.steps) and all(step.ok for step in self.steps)
