"""A notebook's parameters read and checked once, typed (`Parameters.read`), in the setup cell: a bad one
stops it with one line naming it, before any model call and with nothing written. The places, the runtime
and the facades read the checked values, never a raw one again. `papermill -p` passes text, so lists are
read from comma lists (`list_param`, `users_param`). What each parameter means: docs/parameters.md."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from personalens_utils.assistants import AssistantSpec, PythonOptions
from personalens_utils.assistants.python import DEFAULT_REPLY_TIMEOUT_S
from personalens_utils.base.errors import KitError
from personalens_utils.data import default_users, resolve_users
from personalens_utils.judging.dimensions import DIMENSIONS
from personalens_utils.llm.options import ClientOptions, check_limit
from personalens_utils.llm.registry import KNOWN_BACKENDS
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.prompt_sets import PromptSet
from personalens_utils.prompt_sets import prompt_set as find_prompt_set
from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, user_style
from personalens_utils.runstore.identity import samples
from personalens_utils.runstore.shards import Shard, ShardError
from personalens_utils.simulation.settings import AssistantSetting, SettingError

ALL_USERS = "all"


class SessionError(KitError, ValueError):
    """A notebook parameter that cannot be resolved, or input a notebook needs and does not have; the
    message names it and what produces it."""

    says_all = True


def _use_yaml(name: str, value: Any, why: str) -> SessionError:
    return SessionError(
        f"parameter {name}={value!r}: {why}. papermill -p passes text: write a comma list "
        f"(-p {name} a,b) or give a real list with -y, e.g. -y '{name}: [a, b]'"
    )


def list_param(name: str, value: Any, *, item: type[str] | type[int] = str) -> list[Any] | None:
    """A list-valued notebook parameter as a list; None stays None. "SD,MD" or "7,66" is split at commas
    (and "SD" is ["SD"], not "S" and "D"); a single number from `-p users 7` is [7]. Anything else is
    refused with a message pointing at `-y`."""
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
    """A notebook's setup parameters as given (docs/parameters.md). `default_run_store=False`: no run store
    unless `run_dir` is given (02); `writes_run_store=False`: the run store is only read, so it may be
    read-only (07, 09, 10; 06 without a second judge). Where the outputs go: `places.Places.open`.

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
    default_run_store: bool = True
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
    writes_run_store: bool = True


_NOT_PARAMETERS = ("default_output", "stage", "default_run_store", "models", "assistants", "focus_defaults",
                   "writes_run_store")
_PARAMETER_FIELDS = tuple(f.name for f in fields(SessionConfig) if f.name not in _NOT_PARAMETERS)
"""The `SessionConfig` fields a notebook may declare as parameters of the same name (`config_of`); the
others say how the notebook works (given to it as `fixed`), never read from its parameters."""


def config_of(parameters: Mapping[str, Any], *, models: Sequence[str], assistants: Sequence[str],
              optional: Sequence[str], not_session: Sequence[str], fixed: Mapping[str, Any]) -> SessionConfig:
    """The `SessionConfig` of a notebook's own parameters (`Session.from_parameters`)."""
    read = {name: parameters[name] for name in _PARAMETER_FIELDS
            if name in parameters and name not in fixed and name not in not_session}
    roles = {"models": models, "assistants": assistants}
    if missing := [name for names in roles.values() for name in names if name not in parameters]:
        raise SessionError(f"the notebook declares no parameter {missing[0]!r} for its role")
    given = {kind: {name: parameters[name] for name in names if name not in optional or parameters[name]}
             for kind, names in roles.items()}
    return SessionConfig(**read, **{**fixed, **given})


@dataclass(frozen=True)
class Parameters:
    """Every parameter but the folders (`places` resolves those) as `read` checked it: role texts read
    into specs, list texts into lists, the prompt set found."""

    users: Any
    """As given; `places` resolves it against the benchmark (`resolve_session_users`)."""
    backend: str
    max_concurrency: int | Mapping[str, int]
    backend_seed: int
    stage: str
    timeouts: ClientOptions
    task_types: tuple[str, ...]
    prompt_set: str
    prompts: PromptSet
    model_specs: dict[str, ModelSpec]
    assistant_specs: dict[str, AssistantSpec]
    assistant_options: PythonOptions
    dimensions: list[str] | None
    """None: every dimension; `settings` None: the notebook's own default; `shard` None: all its work."""
    settings: list[str] | None
    shard: str | None
    max_cost_usd: float | None
    repeats: int
    judge_samples: int
    user_style: str

    @classmethod
    def read(cls, config: SessionConfig) -> Parameters:
        """`config` checked; the first parameter that cannot be read is one `SessionError`."""
        task_types = selection_param("task_types", config.task_types) or []
        if unknown := sorted(set(task_types) - {"SD", "MD"}):
            raise SessionError(f"parameter task_types: unknown {unknown}; use 'SD' and/or 'MD'")
        if config.backend not in KNOWN_BACKENDS:
            raise SessionError(f"parameter backend={config.backend!r}: use one of {list(KNOWN_BACKENDS)}")
        max_concurrency = _concurrency(config.max_concurrency)
        dimensions = selection_param("dimensions", config.dimensions)
        if unknown := [d for d in dimensions or [] if d not in DIMENSIONS]:
            raise SessionError(f"parameter dimensions: unknown {unknown}; known: {list(DIMENSIONS)}")
        settings = selection_param("settings", config.settings)
        try:
            for setting in settings or []:
                AssistantSetting.parse(setting)
            shard = Shard.parse(config.shard)
            check_limit(config.max_cost_usd)
            samples(config.repeats, "repeats")
            samples(config.judge_samples, "judge_samples")
            user_style(config.user_style)
            models = {name: ModelSpec.parse(text, config.backend, what=name)
                      for name, text in config.models.items()}
            assistants = {name: AssistantSpec.parse(text, config.backend, what=name)
                          for name, text in config.assistants.items()}
            options = PythonOptions(config.assistant_timeout_s, config.on_assistant_error)  # type: ignore[arg-type]
            timeouts = ClientOptions(request_timeout_s=config.request_timeout_s,
                                     call_deadline_s=config.call_deadline_s)
        except SettingError as exc:
            raise SessionError(f"parameter settings: {exc}") from None
        except ShardError as exc:
            raise SessionError(f"parameter shard: {exc}") from None
        except ValueError as exc:  # SpecError, IdentityError, UserStyleError, ClientOptions' own
            raise SessionError(f"parameter {exc}") from None
        try:
            prompts = find_prompt_set(config.prompt_set, config.official_code)
        except ValueError as exc:
            raise SessionError(f"parameter prompt_set={config.prompt_set!r}: {exc}") from exc
        return cls(config.users, config.backend, max_concurrency, config.backend_seed,
                   config.stage, timeouts, tuple(task_types), config.prompt_set, prompts, models, assistants,
                   options, dimensions, settings, str(shard) if shard else None, config.max_cost_usd,
                   config.repeats, config.judge_samples, config.user_style)


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
