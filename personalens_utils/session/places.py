"""Where a notebook works (`Places.open`): the benchmark folder and its users, the run store (the shared
one, the one `run_dir` names, or a finished reproduction's, `reproduction_of`), this run's output folder
and the folder kept across runs, each folder the notebook writes checked before its first call; and what
of the run store belongs to the session (`scope`, `in_scope`, `require`), with its run card."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from personalens_utils.assistants import AssistantSpec, stored_name
from personalens_utils.base import paths
from personalens_utils.data import Benchmark, load_benchmark
from personalens_utils.llm.specs import SpecError
from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS
from personalens_utils.runstore import run_card
from personalens_utils.runstore.columnar import Columnar
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import ReproductionStore, RunStore
from personalens_utils.session.parameters import (
    Parameters,
    SessionConfig,
    SessionError,
    resolve_session_users,
)
from personalens_utils.simulation.settings import AssistantSetting

DEFAULT_RUN = "simulation"
"""The run store under runs/ that notebooks 03-06 share when `run_dir` is None and no reproduction
of the same benchmark is on record (`reproduction_of`); on a finished reproduction's store a session
writes into that reproduction's own `extended_store` instead (`store.ReproductionStore`)."""


def _benchmark_folder(path: str | os.PathLike[str]) -> Path:
    folder = Path(path).expanduser().resolve()
    return folder / "data" if (folder / "data" / "profile").is_dir() else folder


def reproduction_of(benchmark_dir: str | os.PathLike[str]) -> paths.LatestRun | None:
    """The latest `make reproduce` pass (runs/LATEST) when it ran on this benchmark."""
    latest = paths.latest_run()
    if latest is not None and _benchmark_folder(latest.benchmark) == _benchmark_folder(benchmark_dir):
        return latest
    return None


def focus_defaults(config: SessionConfig, focus: str) -> dict[str, AssistantSpec]:
    """The reproduction's focus assistant for each parameter of `config.focus_defaults` given as None."""
    try:
        return {name: AssistantSpec.parse(focus, config.backend, what=name)
                for name in config.focus_defaults if config.assistants.get(name) is None}
    except SpecError as exc:
        raise SessionError(f"the reproduction's focus assistant: {exc}") from exc


def _check_writable(output_dir: Path, store: RunStore | None, config: SessionConfig,
                    backends: set[str]) -> None:
    """Every folder the notebook will write, checked before its first call (one line naming the folder
    that refuses): the output folder, the run store when it is written, the response cache when a
    network backend is called."""
    if (blocked := paths.unwritable(output_dir)) is not None:
        where = "parameter output_dir" if config.output_dir or not os.environ.get(paths.OUTPUT_ENV) else \
            f"${paths.OUTPUT_ENV} (the executed copy's folder)"
        raise SessionError(f"{where}: cannot write to {output_dir} ({blocked} is read-only or "
                           "not a folder); give an output_dir this process can write; nothing was written")
    written = store if config.writes_run_store and (config.default_run_store or config.run_dir) else None
    if written is not None and (why := written.unwritable()) is not None:
        raise SessionError(f"parameter run_dir: cannot write the run store {written.root} ({why}); give a "
                           "run_dir this process can write; nothing was written")
    cache = paths.cache_dir()
    if backends - {"offline"} and (blocked := paths.unwritable(cache)) is not None:
        raise SessionError(f"the response cache {cache} cannot be written ({blocked} is read-only or not a "
                           "folder): set PERSONALENS_CACHE to a folder this process can write")


@dataclass
class Places:
    """The session's folders and stores, resolved from its parameters."""

    parameters: Parameters
    benchmark_dir: Path
    users: list[int] | None
    """Sorted user indices; None: every user of the benchmark."""
    _run_store: RunStore | None
    """None when the notebook was opened without one (`SessionConfig.default_run_store`)."""
    output_dir: Path
    """This run's tables and figures: `output_dir` when given, else the executed copy's folder when the kit's
    entry point names it (`paths.OUTPUT_ENV`), else a new folder per run (`paths.new_output_dir`)."""
    records_dir: Path
    """What the notebook keeps from run to run (07's trust store, 09's reviews, 10's grid), so a rerun goes
    on from them: the output folder named, else runs/<default_output>/, the parent of each run's own."""
    reproduction: paths.LatestRun | None = None
    """The finished `make reproduce` pass whose store the session reads (run_dir=None), else None."""
    focus_specs: dict[str, AssistantSpec] = field(default_factory=dict)
    """The reproduction's focus assistant for the `focus_defaults` parameters given as None."""
    _benchmark: Benchmark | None = field(default=None, repr=False)

    @classmethod
    def open(cls, config: SessionConfig, parameters: Parameters) -> Places:
        """The folders resolved and checked writable (what cannot be is one `SessionError`); the output
        folder is made last, so a refused setup writes nothing."""
        bench = paths.resolve_benchmark_dir(config.benchmark_dir)
        if not config.benchmark_dir and not paths.is_benchmark(bench):
            raise SessionError(
                f"benchmark_dir=None: no benchmark found (no official data at ${paths.DATA_ENV} or "
                f"data/personalens/, nothing generated at {bench}, no `make reproduce` in "
                f"runs/{paths.LATEST}); run notebook 01 or `make reproduce` first, or set benchmark_dir")
        reproduction = None if config.run_dir else reproduction_of(bench)
        focus = reproduction.focus_model if reproduction is not None else None
        focus_specs = focus_defaults(config, focus) if focus else {}
        if reproduction is not None:
            run_store: RunStore | None = ReproductionStore(reproduction.store, reproduction.extension)
        elif config.default_run_store or config.run_dir:
            run_store = RunStore(config.run_dir or paths.runs_dir() / DEFAULT_RUN)
        else:
            run_store = None
        given = config.output_dir or os.environ.get(paths.OUTPUT_ENV)
        records_dir = (Path(given).parent if paths.is_run_folder(given) else Path(given)) if given else (
            paths.runs_dir() / config.default_output)
        users = resolve_session_users(bench, parameters.users)
        specs = {**parameters.assistant_specs, **focus_specs}
        backends = {parameters.backend, *(m.backend for m in parameters.model_specs.values()),
                    *(a.spec.backend for a in specs.values() if a.spec)}
        _check_writable(Path(given) if given else records_dir, run_store, config, backends)
        output_dir = Path(given) if given else paths.new_output_dir(config.default_output)
        print(f"this run's tables and figures go to {output_dir}", flush=True)
        return cls(parameters, bench, users, run_store, output_dir, records_dir, reproduction, focus_specs)

    @property
    def benchmark(self) -> Benchmark:
        """The benchmark restricted to the session's users, loaded once."""
        if self._benchmark is None:
            self._benchmark = load_benchmark(self.benchmark_dir, users=self.users)
        return self._benchmark

    def load_benchmark(self, users: Sequence[int] | None) -> Benchmark:
        """The benchmark for other users than the session's (e.g. those a run store holds); users the
        session has loaded already are taken from its benchmark rather than read again."""
        if users is not None and self._benchmark is not None and set(users) <= set(self._benchmark.users):
            return self._benchmark.subset(users)
        return load_benchmark(self.benchmark_dir, users=users)

    def user_ids(self) -> list[int]:
        """The session's users as indices; every user of the benchmark when `users` means all."""
        return list(self.users) if self.users is not None else sorted(self.benchmark.users)

    @property
    def has_run_store(self) -> bool:
        """Whether the notebook was opened with a run store (02 only when `run_dir` is given)."""
        return self._run_store is not None

    @property
    def run_store(self) -> RunStore:
        """The run store; an error names `run_dir` when the notebook was opened without one."""
        if self._run_store is None:
            raise SessionError("this notebook was opened without a run store: pass run_dir")
        return self._run_store

    def note_scoring(self, scoring: str) -> bool:
        """Record on the run store's card the scoring rule this notebook read the answers under, when the
        store is the session's to write: not a finished reproduction's (its pass recorded its own rule),
        not a read-only one. Whether it was recorded."""
        store = self.run_store
        if self.reproduction is not None or store.unwritable() is not None:
            return False
        run_card.update_card(store, scoring=scoring)
        return True

    def assistant_names(self, given: Sequence[str] | None) -> list[str] | None:
        """The assistant models to analyse: those given (any assistant spec notebook 03 took, read as the
        name its records carry), else the reproduction's own (on its store), else None (every assistant
        the store holds)."""
        if given:
            return [stored_name(text, self.parameters.backend) for text in given]
        if self.reproduction is not None and self.reproduction.assistant_models:
            return list(self.reproduction.assistant_models)
        return None

    def focus(self, given: str | None) -> str | None:
        """The assistant a notebook looks at alone: the one given (any spec 03 takes), else the
        reproduction's focus."""
        if given:
            return stored_name(given, self.parameters.backend, what="focus_model")
        return self.reproduction.focus_model if self.reproduction is not None else None

    def require(self, frame: pd.DataFrame, what: str, producer: str) -> pd.DataFrame:
        """`frame` when it has rows; else a one-line `SessionError` naming what the run store lacks for
        the session's users and task types, and which notebook (`producer`) makes it."""
        if not frame.empty:
            return frame
        users = "all users" if self.users is None else f"{len(self.users)} users"
        prompt_set, types = self.parameters.prompt_set, list(self.parameters.task_types)
        where = f"the run store {self.run_store.root} holds no {what} ({users}, task_types={types}"
        held = self.prompt_sets_held()
        if held and prompt_set not in held:  # e.g. after `make reproduce --prompt-set official`
            theirs = " and ".join(repr(p) for p in held)
            raise SessionError(
                f"{where}, prompt_set={prompt_set!r}): its dialogues were made with prompt_set {theirs}: set "
                f"prompt_set={held[0]!r} to analyse them (papermill -p prompt_set {held[0]}), or run "
                f"{producer} with prompt_set={prompt_set!r} first")
        raise SessionError(f"{where}): run {producer} first, or set run_dir to a run store that has them")

    def prompt_sets_held(self) -> list[str]:
        """The prompt sets of the store's dialogues of the session's users and task types (any prompt set)."""
        with Columnar(self.run_store, tables=[Dialogue]) as cols:
            held = cols.sql(f"SELECT DISTINCT coalesce(prompt_set, '{KIT_PROMPTS}') AS prompt_set, user_id, "
                            "task_type FROM dialogues")
        wanted = held["task_type"].isin(list(self.parameters.task_types))
        if self.users is not None:
            wanted &= held["user_id"].isin(list(self.users))
        return sorted(set(held.loc[wanted, "prompt_set"]))

    def in_scope(self, assistants: Sequence[str] | None = None,
                 settings: Sequence[str] | None = None) -> Callable[[Dialogue], bool]:
        """`select` for the runners: a dialogue record of the session's users and task types, made
        with the session's prompt set (and by one of `assistants`, any spec 03 takes, when given:
        `make evaluate` judges only the new assistant's dialogues; and in one of `settings`, when given:
        a reproduction's 04 judges 03's dialogues, not those 05 left in the store on an earlier run)."""
        wanted = set(self.users) if self.users is not None else None
        types, prompt_set = set(self.parameters.task_types), self.parameters.prompt_set
        made_by = set(self.assistant_names(assistants) or ()) if assistants else None
        kept = {AssistantSetting.parse(s).name for s in settings} if settings else None
        return lambda d: ((wanted is None or d.user_id in wanted) and d.task_type in types
                          and d.prompt_set == prompt_set
                          and (made_by is None or d.assistant_model in made_by)
                          and (kept is None or d.assistant_setting in kept))

    def scope(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Rows of a frame with `user_id` and `task_type` columns that belong to the session, and made
        with the session's prompt set where the frame says whose prompts made them."""
        keep = frame["task_type"].isin(self.parameters.task_types)
        column = next((c for c in ("dialogue_prompt_set", "prompt_set") if c in frame.columns), None)
        if column is not None:
            keep &= frame[column] == self.parameters.prompt_set
        if self.users is not None:
            keep &= frame["user_id"].isin(self.users)
        return frame[keep]
