"""Where the kit finds its own folders and the benchmark data, from any working directory."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DATA_ENV = "PERSONALENS_DATA"
LATEST = "LATEST"
"""The file under runs/ naming the pass `make reproduce` ran last; notebooks 02-06 default to it."""
CODE_ENV = "PERSONALENS_CODE"
OUTPUT_ENV = "PERSONALENS_OUTPUT_DIR"
CARD_FILE = "run_card.json"
"""A store's run card (`runstore.run_card`), named here so a table's source line can point at it."""
"""Set by `python -m personalens_utils.run` for the kernel: the folder of the executed copy, where a notebook
given no `output_dir` writes its tables and figures (papermill itself does not tell the kernel)."""
RUN_FOLDER = re.compile(r"(\d{8}-\d{6})-(\d+)")
"""The name of one notebook run's output folder: its start (UTC) and a counter, `20261127-143005-1`."""
OFFICIAL_CODE_FILES = (
    "util/assistant_prompts.py", "util/evaluation_prompts.py", "src/generate_dialogue.py",
    "src/generate_dialogue_md.py",
)
"""The files of the official code that the official prompt set reads its templates from."""


def project_root() -> Path:
    """The kit's checkout: the nearest parent holding pyproject.toml and personalens_utils/."""
    here = Path(__file__).resolve().parent
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").is_file() and (candidate / "personalens_utils").is_dir():
            return candidate
    return Path.cwd()


def cache_dir() -> Path:
    """Persistent response cache; PERSONALENS_CACHE overrides the default under the checkout."""
    return Path(os.environ.get("PERSONALENS_CACHE", project_root() / ".cache" / "responses"))


def unwritable(folder: str | os.PathLike[str]) -> Path | None:
    """The folder that stops this process from writing into `folder` (making it first if need be):
    `folder` itself or its nearest existing parent when that is read-only or not a folder; None when
    writing there would work. Looks only, so a check before a run leaves nothing behind."""
    here = Path(folder).expanduser().absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    if not here.is_dir() or not os.access(here, os.W_OK | os.X_OK):
        return here
    return None


def runs_dir() -> Path:
    return project_root() / "runs"


def new_output_dir(name: str) -> Path:
    """A folder made now for one notebook run's outputs, `runs/<name>/<start>-<k>/`: the start time (UTC)
    and the first counter whose folder did not exist, so two runs, even in the same second, never share
    one and a run never overwrites another's tables."""
    parent = runs_dir() / name
    parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    k = 1
    while True:
        folder = parent / f"{stamp}-{k}"
        try:
            folder.mkdir()
        except FileExistsError:
            k += 1
            continue
        return folder


def is_run_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether `folder` is one `new_output_dir` made, `runs/<name>/<start>-<k>/`: a folder of one run,
    so what a notebook keeps from run to run belongs in its parent, not in it."""
    here = Path(folder).absolute()
    return bool(RUN_FOLDER.fullmatch(here.name)) and here.parent.parent == runs_dir().absolute()


def newest_output(name: str, runs: Path | None = None) -> Path | None:
    """The output folder of the latest notebook run under `runs/<name>/` (`new_output_dir`), if any:
    where a later reader finds what the notebook wrote last."""
    parent = (runs or runs_dir()) / name
    found = [(m[1], int(m[2]), path) for path in parent.glob("*-*")
             if path.is_dir() and (m := RUN_FOLDER.fullmatch(path.name))] if parent.is_dir() else []
    return max(found)[2] if found else None


def is_benchmark(folder: Path) -> bool:
    """Whether `folder` (or its data/ subfolder) holds profile/ and task/."""
    return any((f / "profile").is_dir() and (f / "task").is_dir() for f in (folder, folder / "data"))


def find_official_data() -> Path | None:
    """The official benchmark folder (holding profile/ and task/), if the kit can find one.

    Looks at $PERSONALENS_DATA first, then data/personalens/ in the checkout. Both the folder
    itself and a parent with a data/ subfolder (a clone of the official repository) are accepted.
    """
    candidates = []
    if os.environ.get(DATA_ENV):
        candidates.append(Path(os.environ[DATA_ENV]).expanduser())
    candidates.append(project_root() / "data" / "personalens")
    for base in candidates:
        for folder in (base, base / "data"):
            if (folder / "profile").is_dir() and (folder / "task").is_dir():
                return folder
    return None


@dataclass(frozen=True)
class LatestRun:
    """The pass `make reproduce` ran last: its folder (runs/<run>/<pass>/), the benchmark it used, and
    the assistants its analysis compared (Table 3's rows) and focused on (Figures 4, 5, Table 13)."""

    folder: Path
    benchmark: Path
    assistant_models: tuple[str, ...] = ()
    focus_model: str | None = None

    @property
    def store(self) -> Path:
        return self.folder / "store"

    @property
    def extension(self) -> Path:
        """Where notebooks on their defaults put new work on this reproduction: a copy of its store and
        more, inside its own folder, so a later reproduction never finds it extending another one."""
        return self.folder / "extended_store"


def _relative(path: Path, runs: Path) -> str:
    return str(path.relative_to(runs)) if path.is_relative_to(runs) else str(path)


def write_latest(folder: Path, benchmark: Path, runs: Path | None = None, *,
                 assistant_models: Sequence[str] = (), focus_model: str | None = None) -> Path:
    """Point runs/LATEST at a finished reproduction pass; paths under runs/ are kept relative, so a copied
    checkout still finds them. The assistants are kept so notebooks on their defaults analyse the
    reproduction's own rows, not every assistant its store holds."""
    runs = runs or runs_dir()
    target = runs / LATEST
    target.write_text(
        "# written by `make reproduce`: notebooks 02-06 on default parameters use this pass "
        "(docs/parameters.md)\n"
        f"folder: {_relative(folder.resolve(), runs.resolve())}\n"
        f"benchmark: {_relative(benchmark.resolve(), runs.resolve())}\n"
        f"assistant_models: {json.dumps(list(assistant_models))}\n"
        f"focus_model: {json.dumps(focus_model)}\n",
        encoding="utf-8",
    )
    return target


def latest_run() -> LatestRun | None:
    """The pass runs/LATEST names, if the file is there and the pass's folder still exists."""
    runs = runs_dir()
    try:
        lines = (runs / LATEST).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line and not line.startswith("#"))
    if "folder" not in fields or "benchmark" not in fields:
        return None
    folder, benchmark = runs / fields["folder"], runs / fields["benchmark"]
    models = json.loads(fields.get("assistant_models", "[]"))
    focus = json.loads(fields.get("focus_model", "null"))
    return LatestRun(folder, benchmark, tuple(models), focus) if folder.is_dir() else None
def find_official_code(folder: str | os.PathLike[str] | None = None) -> Path | None:
    """A copy of the official PersonaLens code (a clone of the authors' repository), if there is one.

    `folder` given: that folder only. Otherwise $PERSONALENS_CODE, then the clone the official data
    was found in (`find_official_data`'s parent), then data/personalens-official-code/ in the
    checkout. A folder holding `personalens-official-code/` (the code archive unpacked) is accepted too.
    """
    if folder:
        candidates = [Path(folder).expanduser()]
    else:
        candidates = [Path(os.environ[CODE_ENV]).expanduser()] if os.environ.get(CODE_ENV) else []
        data = find_official_data()
        if data is not None:
            candidates.append(data.parent)
        candidates.append(project_root() / "data" / "personalens-official-code")
    for base in candidates:
        for candidate in (base, base / "personalens-official-code"):
            if all((candidate / name).is_file() for name in OFFICIAL_CODE_FILES):
                return candidate
    return None


def generated_benchmark_dir(name: str = "default") -> Path:
    """Where notebook 01 writes a generated benchmark."""
    return project_root() / "data" / "generated" / name


def default_benchmark_dir() -> Path:
    """The official data if the kit finds it; else the benchmark notebook 01 wrote (data/generated/default);
    else the benchmark of the latest `make reproduce` (runs/LATEST); else data/generated/default, which
    does not exist yet (`Session.open` says what produces one)."""
    official = find_official_data()
    if official is not None:
        return official
    generated = generated_benchmark_dir()
    latest = latest_run()
    if not is_benchmark(generated) and latest is not None and is_benchmark(latest.benchmark):
        return latest.benchmark
    return generated


def resolve_benchmark_dir(benchmark_dir: str | os.PathLike[str] | None) -> Path:
    """A notebook's `benchmark_dir` parameter: None or "" means the default above."""
    return Path(benchmark_dir).expanduser() if benchmark_dir else default_benchmark_dir()
