"""The researcher's journeys (issue 39) as `../shared/journeys.sh` runs them by hand, for tests/journeys/.

A `git clone` of the committed HEAD, the official data extracted from ../shared/data as the README's
`PERSONALENS_DATA`, the default sizes, and every step a process of its own that imports nothing ahead:
(a) `make reproduce RUN=journey`; then, in the same checkout, (b) `make evaluate` with an assistant
class in a file outside the checkout, (c) `make reproduce RUN=journey` again and (d) each notebook 02-09
on its defaults through `python -m personalens_utils.run NN`. Right after (a) the checkout is copied
(`SNAPSHOT`), and the tests that only read a reproduction (exports, README, what it printed) read the
copy while (b)-(d) go on. (b)-(d) cannot run in a copy instead: a store's run card names the benchmark
folder it read, so `make reproduce` in a copy refuses the moved store (RunCardError), as it should.

The clone runs this checkout's installed .venv rather than one of its own: `make install` in the clone
takes minutes, and its `pip install -e .` would point this checkout's venv at the clone. So `make` is
told `-o install VENV=<this venv>` (nothing is installed, the same interpreter runs) and `PYTHONPATH` is
the clone, which Python searches before the editable install's finder: the clone's own package runs,
in the reproduce process and in the kernels it starts (`imported_from` checks that before any step).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from support.checkout import copy_env

RUN = "journey"
"""The reproduction's run name, as `make reproduce RUN=journey`."""
CHECKOUT = "kit"
"""The clone the journeys run in, in the journey fixture's folder."""
SNAPSHOT = "reproduced"
"""A copy of the clone right after (a), beside it: what the tests that read a reproduction read."""
NOTEBOOKS = ("02", "03", "04", "05", "06", "07", "08", "09")
"""The notebooks run on their defaults after the other journeys (step (d))."""
KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AWS_ACCESS_KEY_ID", "PERSONALENS_CACHE")
"""What a new user has not set: no key (everything runs offline), no shared cache."""
ASSISTANT = '''class Echoing:
    """A plain assistant kept outside the repository: answers from the last two messages only."""

    version = "1"

    def __init__(self, model: str = "offline"):
        self.model = model

    def reply(self, view, llm) -> str:
        return llm.complete_sync(view.instructions, messages=list(view.dialogue)[-2:])
'''
"""The assistant of step (b), the class `../shared/journeys.sh` writes."""
ERROR_LINE = re.compile(r"\w(?:Error|Exception)\b|FAILED|\bfailed\b|\berror:|Traceback")
STEPS_FILE = "steps.json"
KIT_LINE = "[reproduce]"
"""How the kit's runners start their lines; the kernels' standard error, in the same log, may end no line."""
NOT_IN_PASS = "is not part of this pass"
"""How INDEX.md says a notebook does not run in a pass (`reproduce.index._reason`): not a failure."""


@dataclass(frozen=True)
class Step:
    """One command of a journey, as it ended: exit status, time, and where its output is."""

    name: str
    command: list[str]
    returncode: int
    seconds: float
    log: str

    def last_error(self) -> str:
        """The last line of the log that reports an error (the summary's, when the command wrote one), or
        the last line at all."""
        lines = [line.strip() for line in Path(self.log).read_text(encoding="utf-8", errors="replace")
                 .splitlines() if line.strip()]
        errors = [line for line in lines if ERROR_LINE.search(line) and not line.startswith("Traceback")]
        last = (errors or lines or ["(the log is empty)"])[-1]
        return (last[last.rfind(KIT_LINE):] if KIT_LINE in last else last)[:400]  # after a kernel's text

    def failure(self) -> str:
        """What a failing test says: the step, how it ended, its log's last error line, and the log."""
        how = "timed out" if self.returncode == TIMED_OUT else f"exited {self.returncode}"
        return (f"journey step {self.name!r} ({' '.join(self.command)}) {how} after {self.seconds:.0f}s: "
                f"{self.last_error()}  [log: {self.log}]")


TIMED_OUT = -9


def journey_env(checkout: Path, data: Path) -> dict[str, str]:
    """The environment of a step: a new user's (no key, no cache) with `PERSONALENS_DATA` as the README
    says, and the checkout's own package first on the path."""
    env = {k: v for k, v in copy_env(checkout).items() if k not in KEYS}
    env["PERSONALENS_DATA"] = str(data)
    return env


def imported_from(checkout: Path, env: dict[str, str]) -> Path:
    """The folder of the `personalens_utils` a step's interpreter imports in `checkout`."""
    which = "import personalens_utils; print(personalens_utils.__file__)"
    done = subprocess.run([sys.executable, "-c", which], cwd=checkout, env=env, capture_output=True,
                          text=True, check=True)
    return Path(done.stdout.strip()).parent


def make(target: str, *variables: str) -> list[str]:
    """`make <target>` in the clone on this checkout's venv, installing nothing (module docstring)."""
    return ["make", "-o", "install", target, f"VENV={sys.prefix}", *variables]


def run_step(name: str, command: Sequence[str], checkout: Path, env: dict[str, str], logs: Path,
             timeout: float) -> Step:
    """Run `command` in `checkout`, its output in `logs/<name>.log`; past `timeout` seconds its whole
    process group (make, the reproduce process, the kernels) is stopped and the step counts as timed out."""
    log = logs / f"{name}.log"
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(list(command), cwd=checkout, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            returncode = TIMED_OUT
    return Step(name, list(command), returncode, time.perf_counter() - started, str(log))


def save_steps(folder: Path, steps: Sequence[Step]) -> None:
    (folder / STEPS_FILE).write_text(json.dumps([asdict(step) for step in steps], indent=1), encoding="utf-8")


def load_steps(folder: Path) -> dict[str, Step]:
    """The steps a journey fixture ran (possibly on another worker), by name."""
    steps = json.loads((folder / STEPS_FILE).read_text(encoding="utf-8"))
    return {step["name"]: Step(**step) for step in steps}


def summary_counts(log: str) -> tuple[int, int] | None:
    """(notebooks run, notebooks ok) from a reproduction's or evaluation's summary line, or None."""
    found = re.findall(r"ran (\d+) notebook\(s\): (\d+) ok", log)
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def index_sections(index: str) -> dict[str, dict[str, str]]:
    """Per pass of a reproduction's INDEX.md: each paper item it names, with "reproduced" or the reason
    it gives for not reproducing it."""
    passes: dict[str, dict[str, str]] = {}
    for name, body in re.findall(r"^## Pass `(\w+)`\n(.*?)(?=^## |\Z)", index, re.M | re.S):
        reproduced, _, missing = body.partition("### Not reproduced")
        items = {item: "reproduced" for item in re.findall(r"^- \*\*(.+?)\*\* \(", reproduced, re.M)}
        items |= dict(re.findall(r"^- \*\*(.+?)\*\* \(.*?\): (.*)$", missing, re.M))
        passes[name] = items
    return passes
