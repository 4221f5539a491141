"""The setup cell of every notebook: one `Session` resolves the parameters the same way everywhere.

A notebook's parameters cell names what to work on; `Session.open(SessionConfig(...))` turns those
names into things: the benchmark folder, the users, the run store, the output folder, each role
(`models`: the user agent, judge, ...; `assistants`: the assistant under test) and (on first use) the
LLM clients, which `session.close()` (or leaving a `with` block) closes again. Every role's spec is
read when the session opens, so a malformed one stops the setup cell with one line naming the
parameter; below the session, code gets role objects (`llm.role.Role`, `assistants.Assistant`),
never spec texts. Each parameter has one meaning in every notebook (docs/parameters.md):

- `users`: None is the benchmark's default users (the paper's sample_50 when the benchmark holds
  the official users, every user of a generated benchmark); "all" is every user; a sample name
  ("sample_30", "sample_50", "sample_100") or a list of user indices is exactly those users.
- `prompt_set` ("kit" or "official") picks whose prompts notebooks 03-06 use and analyse;
  "official" reads them from the official code at `official_code` or `$PERSONALENS_CODE`, checked
  when the session opens (docs/simulation.md, "Prompt sets").
- `request_timeout_s` and `call_deadline_s` bound every model call: one attempt's wait for an answer,
  and the whole call with its retries (docs/llm.md, "Concurrency, retries and time limits").
- Every other parameter the session is given (concurrency, budget, dimensions, settings, shard,
  repeats, judge samples) is checked when it opens, and so is every folder the notebook will write
  (`output_dir`, a run store it appends to, the response cache of a network backend): a bad one
  stops the setup cell with one line naming it, before any model call and with nothing written.
- `seed` seeds sampling and resampling (bootstrap, permutation, Self-BLEU and annotation samples);
  `backend_seed` seeds the offline backend; `demographics_seed` seeds notebook 01's demographics.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from personalens_utils.assistants import Assistant, AssistantSpec, PythonOptions, stored_name
from personalens_utils.assistants.prompted import PromptedAssistant
from personalens_utils.assistants.python import DEFAULT_REPLY_TIMEOUT_S
from personalens_utils.base import paths
from personalens_utils.base.errors import KitError
from personalens_utils.data import Benchmark, default_users, load_benchmark, resolve_users
from personalens_utils.judging.dimensions import DIMENSIONS
from personalens_utils.llm import LLMClient
from personalens_utils.llm.client import Clients
from personalens_utils.llm.offline import OFFLINE_RULES
from personalens_utils.llm.options import ClientOptions, check_limit
from personalens_utils.llm.registry import KNOWN_BACKENDS
from personalens_utils.llm.role import Role
from personalens_utils.llm.specs import ModelSpec, SpecError
from personalens_utils.outputs.display import UsageTable, use_in_notebook
from personalens_utils.prompt_sets import KIT, OfficialPromptSet, PromptSet
from personalens_utils.prompt_sets import prompt_set as find_prompt_set
from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, user_style
from personalens_utils.runstore import run_card
from personalens_utils.runstore.columnar import Columnar
from personalens_utils.runstore.identity import IdentityError, samples
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.shards import Shard, ShardError
from personalens_utils.runstore.store import ReproductionStore, RunStore
from personalens_utils.simulation.settings import AssistantSetting, SettingError

ALL_USERS = "all"
DEFAULT_RUN = "simulation"
"""The run store under runs/ that notebooks 03-06 share when `run_dir` is None and no reproduction
of the same benchmark is on record (`reproduction_of`); on a finished reproduction's store a session
writes into that reproduction's own `extended_store` instead (`store.ReproductionStore`)."""


class SessionError(KitError, ValueError):
    """A notebook parameter that cannot be resolved, or input a notebook needs and does not have; the
    message names it and what produces it."""

    says_all = True


Given = str | ModelSpec | Role | Assistant
"""A role as `Session.preflight` takes it: a model (text on the session's backend, spec, or resolved) or an
assistant under test."""


def _model_spec(value: Given, backend: str) -> ModelSpec | None:
    """The model spec of a role that is one model on one client; None for an assistant of another kind."""
    if isinstance(value, str):
        return ModelSpec(backend, value)
    if isinstance(value, ModelSpec):
        return value
    if isinstance(value, PromptedAssistant):
        return value.role.spec
    if isinstance(value, Role):
        return value.spec
    return None


def _benchmark_folder(path: str | os.PathLike[str]) -> Path:
    folder = Path(path).expanduser().resolve()
    return folder / "data" if (folder / "data" / "profile").is_dir() else folder


def reproduction_of(benchmark_dir: str | os.PathLike[str]) -> paths.LatestRun | None:
    """The latest `make reproduce` pass (runs/LATEST) when it ran on this benchmark."""
    latest = paths.latest_run()
    if latest is not None and _benchmark_folder(latest.benchmark) == _benchmark_folder(benchmark_dir):
        return latest
    return None


def _no_benchmark(folder: Path) -> SessionError:
    return SessionError(
        f"benchmark_dir=None: no benchmark found (no official data at ${paths.DATA_ENV} or "
        f"data/personalens/, nothing generated at {folder}, no `make reproduce` in runs/{paths.LATEST}); "
        "run notebook 01 or "
        "`make reproduce` first, or set benchmark_dir"
    )


def _use_yaml(name: str, value: Any, why: str) -> SessionError:
    return SessionError(
        f"parameter {name}={value!r}: {why}. papermill -p passes text: write a comma list "
        f"(-p {name} a,b) or give a real list with -y, e.g. -y '{name}: [a, b]'"
    )


def list_param(name: str, value: Any, *, item: type[str] | type[int] = str) -> list[Any] | None:
    """A list-valued notebook parameter as a list; None stays None.

    `papermill -p` sends text, so "SD,MD" or "7,66" is split at commas (and "SD" is ["SD"], not
    "S" and "D"); a single number from `-p users 7` is [7]. Anything else is refused with a message
    pointing at `-y`.
    """
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, str):
        text = value.strip()
        if text and (text[0] in "[({" or text[-1] in "])}"):
            raise _use_yaml(name, value, "looks like a list written as text")
        parts = [part.strip() for part in text.split(",")]
        if not all(parts):
            raise _use_yaml(name, value, "has an empty item")
        try:
            return [item(part) for part in parts]
        except ValueError:
            kind = "a whole number" if item is int else "text"
            raise _use_yaml(name, value, f"every item must be {kind}") from None
    if isinstance(value, item) and not isinstance(value, bool):
        return [value]
    raise _use_yaml(name, value, f"expected a list, got {type(value).__name__}")


def selection_param(name: str, value: Any) -> list[Any] | None:
    """`list_param` for a parameter that selects the work (task types, settings, dimensions): an empty
    list would select nothing and leave a later cell with nothing to describe, so it is refused here."""
    values = list_param(name, value)
    if values == []:
        raise SessionError(f"parameter {name}=[] selects nothing; name at least one")
    return values


def users_param(users: Any) -> Any:
    """`users` with text from `papermill -p` read: "7,66" is [7, 66]; other text without a comma ("all",
    a sample name, a typo) stays text, so the error for a typo lists the known samples."""
    if users is None or (isinstance(users, str) and "," not in users and not users.strip().isdigit()):
        return users
    return list_param("users", users, item=int)


def resolve_session_users(benchmark_dir: str | os.PathLike[str], users: Any) -> list[int] | None:
    """The one meaning of `users`: sorted user indices, or None for every user of the benchmark."""
    users = users_param(users)
    if users is None:
        users = default_users(benchmark_dir)
    if users == ALL_USERS:
        return None
    try:
        resolved = resolve_users(users)
    except (TypeError, ValueError) as exc:
        raise SessionError(f"parameter users={users!r}: {exc}; or use None or {ALL_USERS!r}") from exc
    if resolved == []:
        raise SessionError(f"parameter users={users!r} selects no user; give user indices, a sample name, "
                           f"None (the benchmark's default users) or {ALL_USERS!r}")
    return resolved


@dataclass(frozen=True)
class SessionConfig:
    """A notebook's setup parameters (docs/parameters.md). `store=False` when the notebook keeps nothing in a
    store unless `run_dir` is given (notebook 02). Tables and figures go to `output_dir` when given, else to
    the executed copy's folder when the kit's entry point names it (`paths.OUTPUT_ENV`), else to a new folder
    per run under runs/<default_output>/ (`paths.new_output_dir`), so no run overwrites another's.

    `models` maps a role's parameter name ("user_model", "judge_model", ...) to its model spec;
    `assistants` maps the parameter of an assistant under test ("assistant_model", "compare_assistant")
    to its spec (None: the backend's default assistant). A Python assistant's reply may take
    `assistant_timeout_s` seconds; `on_assistant_error` says whether its failure stops the run
    ("stop") or is stored as an error record ("record")."""

    benchmark_dir: str | os.PathLike[str] | None = None
    users: Any = None
    run_dir: str | os.PathLike[str] | None = None
    output_dir: str | os.PathLike[str] | None = None
    default_output: str = "analysis"
    backend: str = "offline"
    max_concurrency: int | Mapping[str, int] = 8
    backend_seed: int = 0
    stage: str = ""
    task_types: Sequence[str] | str = ("SD", "MD")
    store: bool = True
    prompt_set: str = KIT_PROMPTS
    official_code: str | os.PathLike[str] | None = None
    models: Mapping[str, str] = field(default_factory=dict)
    assistants: Mapping[str, str | None] = field(default_factory=dict)
    assistant_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S
    on_assistant_error: str = "stop"
    request_timeout_s: float = ClientOptions.request_timeout_s
    call_deadline_s: float = ClientOptions.call_deadline_s
    focus_defaults: tuple[str, ...] = ()
    """Assistant parameters whose None means, on a finished reproduction's store, the assistant that
    reproduction focused on (notebook 03: its defaults then have nothing left to simulate)."""
    dimensions: Sequence[str] | str | None = None
    settings: Sequence[str] | str | None = None
    shard: str | None = None
    max_cost_usd: float | None = None
    repeats: int = 1
    judge_samples: int = 1
    user_style: str = COOPERATIVE
    """The notebook's own work parameters, checked here (in the setup cell, before any call) so a bad one
    stops with one line naming it; the session keeps them read (`Session.dimensions`, ...)."""
    writes_store: bool = True
    """Whether the notebook appends to its run store (notebook 06: only for Table 5's second judge): a
    store it writes must be writable before the first call; one it only reads may be read-only."""


_NOT_PARAMETERS = ("default_output", "stage", "store", "models", "assistants", "focus_defaults",
                   "writes_store")
_PARAMETER_FIELDS = tuple(f.name for f in fields(SessionConfig) if f.name not in _NOT_PARAMETERS)
"""The `SessionConfig` fields a notebook may declare as parameters of the same name
(`Session.from_parameters`); the others say how the notebook works (given to it as `fixed`), and a
notebook's own names such as `store` may be set by its setup cell, so they are never read."""


def _read_roles(
    config: SessionConfig,
) -> tuple[dict[str, ModelSpec], dict[str, AssistantSpec], PythonOptions]:
    """Every role's spec read (a Python assistant loaded); the first that cannot be is one `SessionError`."""
    try:
        models = {name: ModelSpec.parse(text, config.backend, what=name)
                  for name, text in config.models.items()}
        assistants = {name: AssistantSpec.parse(text, config.backend, what=name)
                      for name, text in config.assistants.items()}
        options = PythonOptions(config.assistant_timeout_s, config.on_assistant_error)  # type: ignore[arg-type]
    except SpecError as exc:
        raise SessionError(f"parameter {exc}") from exc
    return models, assistants, options


def _focus_defaults(config: SessionConfig, focus: str) -> dict[str, AssistantSpec]:
    """The reproduction's focus assistant for each parameter of `config.focus_defaults` given as None."""
    try:
        return {name: AssistantSpec.parse(focus, config.backend, what=name)
                for name in config.focus_defaults if config.assistants.get(name) is None}
    except SpecError as exc:
        raise SessionError(f"the reproduction's focus assistant: {exc}") from exc


def _concurrency(value: Any) -> int | Mapping[str, int]:
    """`max_concurrency`: a whole number of at least 1, or a mapping from backend to one."""
    bounds = value.items() if isinstance(value, Mapping) else [(None, value)]
    for backend, bound in bounds:
        where = "max_concurrency" if backend is None else f"max_concurrency[{backend!r}]"
        if backend is not None and str(backend).partition("@")[0] not in KNOWN_BACKENDS:
            raise SessionError(f"parameter {where}: unknown backend; use one of {list(KNOWN_BACKENDS)}")
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise SessionError(f"parameter {where}={bound!r}: give a whole number of at least 1 (model calls "
                               "in flight at once)")
    return value


def _work(config: SessionConfig) -> tuple[list[str] | None, list[str] | None, str | None]:
    """The notebook's work parameters checked: (dimensions, settings, shard) as the session keeps them."""
    dimensions = selection_param("dimensions", config.dimensions)
    if unknown := [d for d in dimensions or [] if d not in DIMENSIONS]:
        raise SessionError(f"parameter dimensions: unknown {unknown}; known: {list(DIMENSIONS)}")
    settings = selection_param("settings", config.settings)
    try:
        for setting in settings or []:
            AssistantSetting.parse(setting)
        shard = Shard.parse(config.shard)
    except SettingError as exc:
        raise SessionError(f"parameter settings: {exc}") from None
    except ShardError as exc:
        raise SessionError(f"parameter shard: {exc}") from None
    try:
        check_limit(config.max_cost_usd)
        samples(config.repeats, "repeats")
        samples(config.judge_samples, "judge_samples")
        user_style(config.user_style)
    except (ValueError, IdentityError) as exc:
        raise SessionError(f"parameter {exc}") from None
    return dimensions, settings, str(shard) if shard else None


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
    written = store if config.writes_store and (config.store or config.run_dir) else None
    if written is not None and (why := written.unwritable()) is not None:
        raise SessionError(f"parameter run_dir: cannot write the run store {written.root} ({why}); give a "
                           "run_dir this process can write; nothing was written")
    cache = paths.cache_dir()
    if backends - {"offline"} and (blocked := paths.unwritable(cache)) is not None:
        raise SessionError(f"the response cache {cache} cannot be written ({blocked} is read-only or not a "
                           "folder): set PERSONALENS_CACHE to a folder this process can write")


@dataclass
class Session:
    """What a notebook works on, resolved from its parameters. Close it in the last cell."""

    benchmark_dir: Path
    users: list[int] | None
    store: RunStore | None
    output_dir: Path
    """This run's tables and figures (`SessionConfig`: one folder per run unless `output_dir` is given)."""
    backend: str = "offline"
    max_concurrency: int | Mapping[str, int] = 8
    backend_seed: int = 0
    stage: str = ""
    timeouts: ClientOptions = field(default_factory=ClientOptions)
    """The session's `request_timeout_s` and `call_deadline_s`, checked when it opens."""
    task_types: tuple[str, ...] = ("SD", "MD")
    prompt_set: str = KIT_PROMPTS
    official_code: str | None = None
    prompts: PromptSet = KIT
    """The prompt set `prompt_set` names (an official set's templates are read when the session opens)."""
    model_specs: dict[str, ModelSpec] = field(default_factory=dict)
    """Each model role's spec, by parameter name (read when the session opens)."""
    assistant_specs: dict[str, AssistantSpec] = field(default_factory=dict)
    """Each assistant under test's spec, by parameter name (read, and loaded, when the session opens)."""
    assistant_options: PythonOptions = field(default_factory=PythonOptions)
    reproduction: paths.LatestRun | None = None
    """The finished `make reproduce` pass whose store the session reads (run_dir=None), else None."""
    dimensions: list[str] | None = None
    """The judge dimensions the notebook was given (checked; None: all)."""
    settings: list[str] | None = None
    """The assistant settings the notebook was given (checked; None: the notebook's own default)."""
    shard: str | None = None
    """The shard "i/n" the notebook works on (checked; None: all its work)."""
    kept_in: Path | None = None
    """`records_dir` as `Session.open` resolved it; None: `output_dir`."""
    started: float = field(default_factory=time.perf_counter)
    _clients: Clients | None = field(default=None, repr=False)
    _benchmark: Benchmark | None = field(default=None, repr=False)
    _assistants: dict[str, Assistant] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, config: SessionConfig | None = None) -> Session:
        """Resolve a notebook's parameters (`SessionConfig`); what cannot be is one `SessionError`."""
        config = config or SessionConfig()
        task_types = selection_param("task_types", config.task_types) or []
        unknown = sorted(set(task_types) - {"SD", "MD"})
        if unknown:
            raise SessionError(f"parameter task_types: unknown {unknown}; use 'SD' and/or 'MD'")
        if config.backend not in KNOWN_BACKENDS:
            raise SessionError(f"parameter backend={config.backend!r}: use one of {list(KNOWN_BACKENDS)}")
        max_concurrency = _concurrency(config.max_concurrency)
        dimensions, settings, shard = _work(config)
        models, assistants, options = _read_roles(config)
        use_in_notebook()
        try:
            timeouts = ClientOptions(request_timeout_s=config.request_timeout_s,
                                     call_deadline_s=config.call_deadline_s)
        except ValueError as exc:
            raise SessionError(f"parameter {exc}") from exc
        try:
            prompts = find_prompt_set(config.prompt_set, config.official_code)
        except ValueError as exc:
            raise SessionError(f"parameter prompt_set={config.prompt_set!r}: {exc}") from exc
        bench = paths.resolve_benchmark_dir(config.benchmark_dir)
        if not config.benchmark_dir and not paths.is_benchmark(bench):
            raise _no_benchmark(bench)
        reproduction = None if config.run_dir else reproduction_of(bench)
        if reproduction is not None and reproduction.focus_model:
            assistants.update(_focus_defaults(config, reproduction.focus_model))
        if reproduction is not None:
            run_store: RunStore | None = ReproductionStore(reproduction.store, reproduction.extension)
        elif config.store or config.run_dir:
            run_store = RunStore(config.run_dir or paths.runs_dir() / DEFAULT_RUN)
        else:
            run_store = None
        given = config.output_dir or os.environ.get(paths.OUTPUT_ENV)
        records_dir = (Path(given).parent if paths.is_run_folder(given) else Path(given)) if given else (
            paths.runs_dir() / config.default_output)
        users = resolve_session_users(bench, config.users)
        backends = {config.backend, *(m.backend for m in models.values()),
                    *(a.spec.backend for a in assistants.values() if a.spec)}
        _check_writable(Path(given) if given else records_dir, run_store, config, backends)
        output_dir = Path(given) if given else paths.new_output_dir(config.default_output)
        print(f"this run's tables and figures go to {output_dir}", flush=True)
        return cls(
            benchmark_dir=bench,
            users=users,
            store=run_store,
            output_dir=output_dir,
            backend=config.backend,
            max_concurrency=max_concurrency,
            backend_seed=config.backend_seed,
            stage=config.stage,
            timeouts=timeouts,
            task_types=tuple(task_types),
            prompt_set=config.prompt_set,
            official_code=str(prompts.folder) if isinstance(prompts, OfficialPromptSet) else None,
            prompts=prompts,
            model_specs=models,
            assistant_specs=assistants,
            assistant_options=options,
            reproduction=reproduction,
            dimensions=dimensions,
            settings=settings,
            shard=shard,
            kept_in=records_dir,
        )

    @classmethod
    def from_parameters(
        cls,
        parameters: Mapping[str, Any],
        *,
        models: Sequence[str] = (),
        assistants: Sequence[str] = (),
        optional: Sequence[str] = (),
        not_session: Sequence[str] = (),
        **fixed: Any,
    ) -> Session:
        """`open` on a notebook's own parameters (`globals()` in its setup cell), so no notebook repeats the
        `SessionConfig` block: every `SessionConfig` field the notebook declares is read under its own name,
        except those in `not_session` (a parameter of the notebook's own that shares a field's name, as 08's
        PERSONA Bench `prompt_set`) and those `fixed` sets (what the notebook does not take as a parameter).
        `models` and `assistants` name the role parameters; a role in `optional` is left out when its
        parameter is None or empty."""
        read = {name: parameters[name] for name in _PARAMETER_FIELDS
                if name in parameters and name not in fixed and name not in not_session}
        roles = {"models": models, "assistants": assistants}
        if missing := [name for names in roles.values() for name in names if name not in parameters]:
            raise SessionError(f"the notebook declares no parameter {missing[0]!r} for its role")
        for kind, names in roles.items():
            fixed[kind] = {name: parameters[name] for name in names
                           if name not in optional or parameters[name]}
        return cls.open(SessionConfig(**read, **fixed))

    @property
    def records_dir(self) -> Path:
        """Where the notebook keeps its own records from run to run (07's trust store, 09's reviews and
        people's dialogues), so a rerun goes on from them: the output folder named (`output_dir`, or the
        executed copy's folder given to the kit's entry point), else runs/<default_output>/, the parent
        of each run's own output folder."""
        return self.kept_in or self.output_dir

    def role(self, parameter: str) -> Role:
        """The role whose model the parameter `parameter` names (given in `SessionConfig.models`)."""
        if parameter not in self.model_specs:
            raise SessionError(f"no model role {parameter!r} was given when the session opened "
                               f"(roles: {sorted(self.model_specs)})")
        spec = self.model_specs[parameter]
        return Role.served(spec, self.clients.client(spec))

    def assistant(self, parameter: str) -> Assistant:
        """The assistant under test the parameter `parameter` names (given in `SessionConfig.assistants`),
        made once on first use."""
        if parameter not in self.assistant_specs:
            raise SessionError(f"no assistant {parameter!r} was given when the session opened "
                               f"(assistants: {sorted(self.assistant_specs)})")
        if parameter not in self._assistants:
            self._assistants[parameter] = self.assistant_specs[parameter].make(self.clients,
                                                                               self.assistant_options)
        return self._assistants[parameter]

    def assistant_names(self, given: Sequence[str] | None) -> list[str] | None:
        """The assistant models to analyse: those given (any assistant spec notebook 03 took, read as the
        name its records carry), else the reproduction's own (on its store), else None (every assistant
        the store holds)."""
        if given:
            return [stored_name(text, self.backend) for text in given]
        if self.reproduction is not None and self.reproduction.assistant_models:
            return list(self.reproduction.assistant_models)
        return None

    def focus(self, given: str | None) -> str | None:
        """The assistant a notebook looks at alone: the one given (any spec 03 takes), else the
        reproduction's focus."""
        if given:
            return stored_name(given, self.backend, what="focus_model")
        return self.reproduction.focus_model if self.reproduction is not None else None

    @property
    def run_store(self) -> RunStore:
        """The run store; an error names `run_dir` when the notebook was opened without one."""
        if self.store is None:
            raise SessionError("this notebook was opened without a run store: pass run_dir")
        return self.store

    def note_scoring(self, scoring: str) -> bool:
        """Record on the run store's card the scoring rule this notebook read the answers under, when the
        store is the session's to write: not a finished reproduction's (its pass recorded its own rule),
        not a read-only one. Whether it was recorded."""
        store = self.run_store
        if self.reproduction is not None or store.unwritable() is not None:
            return False
        run_card.update_card(store, scoring=scoring)
        return True

    @property
    def benchmark(self) -> Benchmark:
        """The benchmark restricted to the session's users, loaded once."""
        if self._benchmark is None:
            self._benchmark = load_benchmark(self.benchmark_dir, users=self.users)
        return self._benchmark

    def require(self, frame: pd.DataFrame, what: str, producer: str) -> pd.DataFrame:
        """`frame` when it has rows; else a one-line `SessionError` naming what the run store lacks for
        the session's users and task types, and which notebook (`producer`) makes it."""
        if frame.empty:
            users = "all users" if self.users is None else f"{len(self.users)} users"
            types = list(self.task_types)
            where = f"the run store {self.run_store.root} holds no {what} ({users}, task_types={types}"
            held = self.prompt_sets_held()
            if held and self.prompt_set not in held:  # e.g. after `make reproduce --prompt-set official`
                theirs = " and ".join(repr(p) for p in held)
                raise SessionError(
                    f"{where}, prompt_set={self.prompt_set!r}): its dialogues were made with prompt_set "
                    f"{theirs}: set prompt_set={held[0]!r} to analyse them (papermill -p prompt_set "
                    f"{held[0]}), or run {producer} with prompt_set={self.prompt_set!r} first"
                )
            raise SessionError(f"{where}): run {producer} first, or set run_dir to a run store that has them")
        return frame

    def prompt_sets_held(self) -> list[str]:
        """The prompt sets of the store's dialogues of the session's users and task types (any prompt set)."""
        with Columnar(self.run_store, tables=[Dialogue]) as cols:
            held = cols.sql(f"SELECT DISTINCT coalesce(prompt_set, '{KIT_PROMPTS}') AS prompt_set, user_id, "
                            "task_type FROM dialogues")
        wanted = held["task_type"].isin(list(self.task_types))
        if self.users is not None:
            wanted &= held["user_id"].isin(list(self.users))
        return sorted(set(held.loc[wanted, "prompt_set"]))

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
    def clients(self) -> Clients:
        """One client per backend (`llm.clients.Clients`), made on first use with the session's bounds
        (`max_concurrency`: one number, or a mapping backend -> number), time limits and backend seed."""
        if self._clients is None:
            self._clients = Clients(self.backend, max_concurrency=self.max_concurrency, stage=self.stage,
                                    seed=self.backend_seed, request_timeout_s=self.timeouts.request_timeout_s,
                                    call_deadline_s=self.timeouts.call_deadline_s)
        return self._clients

    @property
    def client(self) -> LLMClient:
        """The client of the session's own `backend`."""
        return self.clients.client(ModelSpec(self.backend, ""))

    def spec(self, text: str, parameter: str, *, default_model: str = "") -> ModelSpec:
        """A role's model parameter as a `ModelSpec` (`backend:model`, or a bare model on `backend`)."""
        return self.clients.spec(text, default_model=default_model, what=parameter)

    def usage_frame(self, stage: str | None = None) -> pd.DataFrame:
        """Calls of every client with the role and backend of each (`Clients.usage_frame`)."""
        return self.clients.usage_frame(stage)

    def usage(self, stage: str | None = None) -> UsageTable:
        """`usage_frame` for display: the table, or one line when this session made no model calls."""
        frame = self.usage_frame(stage)
        offline = frame["backend"] == "offline"  # no model answered these: name the rules that did
        frame.loc[offline, "model"] = [f"{OFFLINE_RULES} in the role of {m}"
                                       for m in frame.loc[offline, "model"]]
        return UsageTable(frame, stage)

    def preflight(self, roles: Mapping[str, Given]) -> str:
        """Check each role once on its own backend's client, before any work is planned or stored
        (`LLMClient.preflight`; a Python assistant checks the model it calls); a failure stops the
        notebook with one message. The lines to show. A role given as text is a model on the session's
        backend; roles with the same model on one client share one check."""
        by_client: dict[str, dict[str, str]] = {}
        specs: dict[str, ModelSpec] = {}
        lines = []
        for role, value in roles.items():
            spec = _model_spec(value, self.backend)
            if spec is None:
                lines += value.preflight(role)  # type: ignore[union-attr]  # an assistant of its own kind
                continue
            specs[role] = spec
            by_client.setdefault(spec.client_key, {})[role] = spec.model
        for key, group in by_client.items():
            spec = next(specs[role] for role in group)
            lines += [line if key == spec.backend else f"{line} ({key})"
                      for line in self.clients.client(spec).preflight(group)]
        return "\n".join(lines)

    def describe(self, roles: Mapping[str, ModelSpec | Role | Assistant]) -> str:
        """One line per role naming the backend and the id of each model it will call."""
        lines = []
        for role, value in roles.items():
            lines += [value.describe(role)] if isinstance(value, ModelSpec) else value.describe(role)
        return "\n".join(lines)

    def in_scope(self, assistants: Sequence[str] | None = None,
                 settings: Sequence[str] | None = None) -> Callable[[Dialogue], bool]:
        """`select` for the runners: a dialogue record of the session's users and task types, made
        with the session's prompt set (and by one of `assistants`, any spec 03 takes, when given:
        `make evaluate` judges only the new assistant's dialogues; and in one of `settings`, when given:
        a reproduction's 04 judges 03's dialogues, not those 05 left in the store on an earlier run)."""
        wanted = set(self.users) if self.users is not None else None
        types = set(self.task_types)
        made_by = set(self.assistant_names(assistants) or ()) if assistants else None
        kept = {AssistantSetting.parse(s).name for s in settings} if settings else None
        return lambda d: ((wanted is None or d.user_id in wanted) and d.task_type in types
                          and d.prompt_set == self.prompt_set
                          and (made_by is None or d.assistant_model in made_by)
                          and (kept is None or d.assistant_setting in kept))

    def scope(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Rows of a frame with `user_id` and `task_type` columns that belong to the session, and made
        with the session's prompt set where the frame says whose prompts made them."""
        keep = frame["task_type"].isin(self.task_types)
        column = next((c for c in ("dialogue_prompt_set", "prompt_set") if c in frame.columns), None)
        if column is not None:
            keep &= frame[column] == self.prompt_set
        if self.users is not None:
            keep &= frame["user_id"].isin(self.users)
        return frame[keep]

    def close(self) -> str:
        """Close the client (if one was made); returns a line saying how long the notebook took."""
        if self._clients is not None:
            self._clients.close()
            self._clients = None
        self._assistants.clear()
        return f"finished in {time.perf_counter() - self.started:.1f} s; outputs under {self.output_dir}"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
