"""Your own assistant in Python: the protocol, the loader of `python:` specs, and `PythonAssistant`,
the `Assistant` the dialogue loop calls.

A spec `python:package.module:Name` (options after `?`: `python:package.module:Name?k=3&model=offline`),
or by file, `python:path/to/file.py:Name` (a relative path from the current folder, else from the
project root), names an assistant under test written in Python. A module is imported as Python finds
it, and from the project root too (where `make` and the notebooks' kernels start from). `Name` is a
class, called once with the options as keyword arguments (values are text), or a ready object. Either
way the object has

    reply(view: AssistantView, llm: AssistantLLM) -> str        # `async def` or a plain function

and may declare two attributes that become part of its run identity (docs/simulation.md):

- `model`: the spec of the model it calls through `llm` (`openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct`,
  `anthropic:claude-haiku-4-5`, `offline`); `llm` calls exactly that model, through the kit's
  `LLMClient`, so caching, retries, usage and cost work as for any role. Without it `llm` refuses.
- `version`: text you change when the method changes, so old dialogues are not counted as new ones.

`view` is what the prompt-based assistant of the same setting is given, and nothing else: the
setting, task type, domains, the context parts the setting lets it see (demographics, interaction
summaries, situation), the dialogue so far, and the instructions the prompt-based assistant would
read. A plain `reply` runs in a worker thread and calls `llm.complete_sync`.

A reply that takes longer than `reply_timeout_s` (`DEFAULT_REPLY_TIMEOUT_S`), raises, or is empty is
a failure of the assistant, not of the kit: by default the run stops with one line naming the
assistant, the user and the task (`AssistantError`); with `on_error="record"` the dialogue is
stored as an error record instead (rerun with `retry_errors=True`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import importlib.util
import inspect
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from personalens_utils.assistants.base import Pricing
from personalens_utils.assistants.reference_assistants import SETTING_ASSISTANT, view_of
from personalens_utils.base.errors import KitError
from personalens_utils.base.paths import project_root
from personalens_utils.llm import LLMClient, registry
from personalens_utils.llm.endpoints import served_id
from personalens_utils.llm.registry import CALLS, KNOWN_BACKENDS
from personalens_utils.llm.specs import ModelSpec, SpecError
from personalens_utils.llm.types import CallKind, FatalError, LLMError, Message, Request, Response, Usage
from personalens_utils.runstore.records import OFFLINE

PYTHON = "python"
"""The backend dialogue records of a Python assistant carry; its spec is `python:package.module:Name`."""
SPEC_FORM = "python:package.module:Name[?k=v&...] or python:path/to/file.py:Name"
"""How a Python assistant's spec is written (help texts)."""
DEFAULT_REPLY_TIMEOUT_S = 300.0
"""How long one `reply` may take, its model calls included, before the assistant counts as hung."""
ON_ERROR = ("stop", "record")

VIEW_KEYS = ("setting", "task_type", "domains", "demographics", "interactions", "situation")
"""The context keys of an assistant request a Python assistant sees (never the offline `oracle`)."""


class AssistantLoadError(SpecError):
    """A `python:` spec whose object cannot be imported, made, or does not follow the protocol."""


@dataclass(frozen=True)
class AssistantView:
    """What the assistant under test may use for its next reply; the same for every kind of assistant."""

    setting: str
    task_type: str
    domains: tuple[str, ...]
    dialogue: tuple[Message, ...]
    """The turns so far, ending with the user's message to answer."""
    instructions: str
    """The system prompt the prompt-based assistant of this setting reads (its view, rendered)."""
    demographics: Mapping[str, Any] | None = None
    """Only when the setting has D."""
    interactions: Mapping[str, str] | None = None
    """Past-interaction summaries of the task's domains, {domain: text}; only when the setting has I."""
    situation: Mapping[str, Any] | None = None
    """Only when the setting has S."""

    @classmethod
    def of(cls, request: Request) -> AssistantView:
        """The view of a prompt-based assistant request: its context without what only the offline
        reference assistants read, its system prompt and its messages."""
        context = request.context
        return cls(setting=str(context.get("setting", "")), task_type=str(context.get("task_type", "")),
                   domains=tuple(context.get("domains") or ()), dialogue=tuple(request.messages),
                   instructions=request.system, demographics=context.get("demographics"),
                   interactions=context.get("interactions"), situation=context.get("situation"))

    def context(self) -> dict[str, Any]:
        """The structured context, as an assistant request carries it (what the offline backend reads)."""
        values = {key: getattr(self, key) for key in VIEW_KEYS}
        return {key: list(value) if key == "domains" else value for key, value in values.items()
                if value is not None}

    def user_messages(self) -> list[str]:
        """What the user has said so far, oldest first."""
        return [m.content for m in self.dialogue if m.role == "user"]


@dataclass(frozen=True)
class Target:
    """`package.module:Name` or `/absolute/path/file.py:Name`, and its options, written canonically
    (options sorted, a file by its absolute path, so every notebook finds it whatever its folder)."""

    module: str
    name: str
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str, what: str = "model") -> Target:
        head, _, query = text.strip().partition("?")
        module, colon, name = head.rpartition(":")
        if module.endswith(".py"):
            module = str(_source_file(module, f"{what}='python:{text}'"))
        elif not all(p.isidentifier() for p in module.split(".")):
            colon = ""
        if not colon or not name.isidentifier():
            raise SpecError(f"{what}='python:{text}': write python:package.module:Name or "
                            "python:path/to/file.py:Name, where Name is a class or object with a "
                            "reply(view, llm) method (docs/simulation.md)")
        options = []
        for pair in filter(None, query.split("&")):
            key, eq, value = pair.partition("=")
            if not eq or not key.strip().isidentifier():
                raise SpecError(f"{what}='python:{text}': option {pair!r} is not key=value "
                                "(write python:package.module:Name?k=3&model=offline)")
            options.append((key.strip(), value.strip()))
        keys = [k for k, _ in options]
        if len(keys) != len(set(keys)):
            raise SpecError(f"{what}='python:{text}': an option is given twice")
        return cls(module, name, tuple(sorted(options)))

    @property
    def is_file(self) -> bool:
        return self.module.endswith(".py")

    def __str__(self) -> str:
        query = "&".join(f"{k}={v}" for k, v in self.options)
        return f"{self.module}:{self.name}" + (f"?{query}" if query else "")


def _source_file(text: str, where: str) -> Path:
    """A `.py` file named by a spec: as given from the current folder, else from the project root."""
    given = Path(text).expanduser()
    if given.is_absolute():
        return given  # a stored name: read as it is, loaded (and checked) only when it is run
    for candidate in (given, project_root() / given):
        if candidate.is_file():
            return candidate.resolve()
    raise SpecError(f"{where}: no file {text} (looked in {Path.cwd()} and {project_root()})")


def _import(target: Target) -> ModuleType:
    """The module a target names: a file loaded by its path (once per process), or a module imported
    as Python finds it, with the project root as a last place to look."""
    if not target.is_file:
        root = str(project_root())
        if root not in sys.path:
            sys.path.append(root)
        return importlib.import_module(target.module)
    name = "personalens_file_" + "".join(c if c.isalnum() else "_" for c in target.module)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, target.module)
    if spec is None or spec.loader is None:
        raise ImportError(f"{target.module} is not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def inner_spec(text: str, where: str) -> ModelSpec:
    """The spec of the model a Python assistant calls: a backend must be named (`offline` alone is the
    offline assistant that uses exactly the context it is given)."""
    head = text.partition(":")[0].partition("@")[0].strip().lower()
    if head not in KNOWN_BACKENDS:
        raise AssistantLoadError(f"{where}: its model {text!r} must name a backend, e.g. 'offline', "
                                 "'anthropic:claude-haiku-4-5' or 'openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct'")
    default = SETTING_ASSISTANT if head == "offline" else ""
    try:
        return ModelSpec.parse(text, "offline", default_model=default, what=f"{where}: model")
    except SpecError as exc:
        raise AssistantLoadError(str(exc)) from exc


@dataclass(frozen=True)
class Loaded:
    """A loaded Python assistant: the object, what it calls, and its model id (its run identity)."""

    target: Target
    obj: Any
    inner: ModelSpec | None
    version: str | None

    @property
    def model_id(self) -> str:
        """`package.module:Name?options`, its version, and the backend:id of the model it calls."""
        text = str(self.target) + (f" version {self.version}" if self.version else "")
        if self.inner is not None:
            text += f"{CALLS}{self.inner.backend}:{served_id(_resolved(self.inner), self.inner.endpoint())}"
        return text


def _resolved(spec: ModelSpec) -> str:
    try:
        return registry.resolve(spec.model, spec.backend)
    except FatalError:
        return spec.model


@functools.cache
def load(text: str) -> Loaded:
    """The assistant a `python:` spec names (without the `python:`), made once per process."""
    target = Target.parse(text)
    where = f"model spec 'python:{target}'"
    try:
        module = _import(target)
    except Exception as exc:
        raise AssistantLoadError(f"{where}: cannot import module {target.module!r} ({type(exc).__name__}: "
                                 f"{exc}); put the module in {project_root()}, install its package, or name "
                                 "its file: python:path/to/file.py:Name") from exc
    try:
        found = getattr(module, target.name)
    except AttributeError:
        raise AssistantLoadError(
            f"{where}: module {target.module!r} has no attribute {target.name!r}") from None
    if inspect.isclass(found):
        try:
            obj = found(**dict(target.options))
        except Exception as exc:
            raise AssistantLoadError(f"{where}: {target.name}({_kwargs(target)}) failed: "
                                     f"{type(exc).__name__}: {exc}") from exc
    elif target.options:
        raise AssistantLoadError(f"{where}: options are given but {target.name} is an object, not a class")
    else:
        obj = found
    if not callable(getattr(obj, "reply", None)):
        raise AssistantLoadError(f"{where}: {target.name} does not follow the assistant protocol: it needs a "
                                 "method reply(view, llm) that returns the reply text (docs/simulation.md)")
    model, version = getattr(obj, "model", None), getattr(obj, "version", None)
    if model is not None and not isinstance(model, str | ModelSpec):
        raise AssistantLoadError(f"{where}: its `model` must be a spec text such as 'offline', got {model!r}")
    inner = model if isinstance(model, ModelSpec) else inner_spec(model, where) if model else None
    return Loaded(target, obj, inner, str(version) if version is not None else None)


def _kwargs(target: Target) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in target.options)


def row_label(model: str) -> str:
    """A model name as a table row shows it: a Python assistant (`package.module:Name?options`, with
    or without `python:`) as its class and options, `RetrievalAssistant (k=3)`, a model spec among them
    by its model's name, since the module path does not fit a row and the table's source names the
    whole spec; any other name as it is."""
    try:
        target = Target.parse(model.removeprefix(f"{PYTHON}:"))
    except SpecError:
        return model
    if not model.startswith(f"{PYTHON}:") and "." not in target.module:
        return model  # `backend:model` of a served model, not a Python assistant
    options = ", ".join(f"{k}={_short(v)}" for k, v in target.options)
    return f"{target.name} ({options})" if options else target.name


def _short(value: str) -> str:
    """An option value as a row shows it: a model spec (`openai@URL:org/model`) as its model's name."""
    return value.rsplit(":", 1)[-1].rsplit("/", 1)[-1] or value


def calls_backend(assistant_model_id: str) -> str | None:
    """The backend a Python assistant's model id says it calls, or None when it calls no model."""
    _, sep, called = assistant_model_id.rpartition(CALLS)
    return called.partition(":")[0] if sep else None


@dataclass
class AssistantLLM:
    """The door through which a Python assistant calls its declared model, for one reply.

    Requests are assistant turns of the kit (booked as the assistant's calls on the model's backend);
    the structured context defaults to the view's, so the offline backend answers from exactly what
    the assistant passes on. `responses` keeps every answer, to book their tokens and cost.
    """

    client: LLMClient | None
    spec: ModelSpec | None
    view: AssistantView
    owner: str
    temperature: float | None = 0.0
    max_tokens: int = 800
    sample: int = 0
    """The dialogue's sample (`SimulationConfig.repeats`): every call carries it (`Request.sample`)."""
    responses: list[Response] = field(default_factory=list)

    @property
    def model(self) -> str:
        """The spec of the model this door calls."""
        return str(self.spec) if self.spec else ""

    def request(self, system: str, messages: Sequence[Message] | None = None, *,
                context: Mapping[str, Any] | None = None, temperature: float | None = None,
                max_tokens: int | None = None) -> Request:
        """The request `complete` sends: `messages` default to the dialogue so far; `context` entries
        replace the view's (give `interactions` to say which summaries the model was shown)."""
        if self.client is None or self.spec is None:
            raise RuntimeError(f"{self.owner} called a model but declares none: give it a `model` attribute "
                               "(a spec such as 'offline' or 'openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct')")
        return Request(kind=CallKind.ASSISTANT_TURN, system=system,
                       messages=tuple(self.view.dialogue if messages is None else messages),
                       model=self.spec.model,
                       temperature=self.temperature if temperature is None else temperature,
                       max_tokens=max_tokens or self.max_tokens,
                       context={**self.view.context(), **(context or {}), **_offline_view(self.spec)},
                       sample=self.sample)

    async def complete(self, system: str, messages: Sequence[Message] | None = None, **options: Any) -> str:
        """The model's answer text (options: `context`, `temperature`, `max_tokens`)."""
        request = self.request(system, messages, **options)
        assert self.client is not None
        response = await self.client.acomplete(request)
        self.responses.append(response)
        return response.text

    def complete_sync(self, system: str, messages: Sequence[Message] | None = None, **options: Any) -> str:
        """`complete` for a plain (not async) `reply`, which the kit runs in a worker thread."""
        request = self.request(system, messages, **options)
        assert self.client is not None
        response = self.client.complete(request)
        self.responses.append(response)
        return response.text


def _offline_view(spec: ModelSpec | None) -> dict[str, Any]:
    """The view entry an offline reference assistant named as a Python assistant's model needs."""
    if spec is None or spec.backend != OFFLINE:
        return {}
    return view_of(spec.model).context()


class AssistantFailed(LLMError):
    """A Python assistant's reply failed (hung, raised, or empty) and the run was asked to go on: the
    dialogue is stored as an error record naming the assistant and what went wrong."""


class AssistantStopped(KitError):
    """A Python assistant's reply failed and the run stops (the default); the runner adds the scenario."""

    def __init__(self, message: str, assistant: str):
        super().__init__(message)
        self.assistant = assistant


class AssistantError(KitError, RuntimeError):
    """A run stopped by its Python assistant: one line naming the assistant, the user and the task
    (`%xmode Verbose` shows the traceback into the user's own code)."""

    says_all = True


@dataclass(frozen=True)
class PythonOptions:
    """How a Python assistant's failures are handled: the per-reply timeout, and whether a failed reply
    stops the run ("stop") or is stored as an error record ("record")."""

    reply_timeout_s: float = DEFAULT_REPLY_TIMEOUT_S
    on_error: Literal["stop", "record"] = "stop"

    def __post_init__(self) -> None:
        if not isinstance(self.reply_timeout_s, int | float) or isinstance(self.reply_timeout_s, bool) \
                or self.reply_timeout_s <= 0:
            raise SpecError(f"assistant_timeout_s={self.reply_timeout_s!r}: give a number of seconds above 0")
        if self.on_error not in ON_ERROR:
            raise SpecError(f"on_assistant_error={self.on_error!r}: use one of {ON_ERROR}")


async def _in_daemon_thread(fn: Callable[[], Any]) -> Any:
    """`fn()` in a daemon thread: a reply that never returns cannot keep the process from ending."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def run() -> None:
        try:
            value = fn()
            outcome = functools.partial(done.set_result, value)
        except BaseException as exc:  # handed to the awaiting coroutine, which decides
            outcome = functools.partial(done.set_exception, exc)
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits for it any more
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=run, name="python-assistant-reply", daemon=True).start()
    return await done


class PythonAssistant:
    """The `Assistant` of a `python:` spec: `respond` hands the request's view to the user's object and
    returns its reply, with the usage and cost of the calls it made through its `llm` door, which go
    through the client of the model it declares (`inner`)."""

    def __init__(self, text: str, inner: LLMClient | None, options: PythonOptions | None = None):
        self.loaded = load(text)
        self.inner = inner
        self.options = options or PythonOptions()
        if (inner is None) != (self.loaded.inner is None):
            raise ValueError(f"python:{self.loaded.target}: give the client of its model "
                             f"{self.loaded.inner} (and only then)")

    def __repr__(self) -> str:
        return f"PythonAssistant({self.loaded.model_id!r})"

    @property
    def name(self) -> str:
        return f"{PYTHON}:{self.loaded.target}"

    @property
    def model(self) -> str:
        return str(self.loaded.target)

    @property
    def backend(self) -> str:
        return PYTHON

    @property
    def model_id(self) -> str:
        return self.loaded.model_id

    @property
    def made_offline(self) -> bool:
        return self.loaded.inner is not None and self.loaded.inner.backend == OFFLINE

    @property
    def max_concurrency(self) -> int:
        return self.inner.max_concurrency if self.inner is not None else 8

    def clients(self) -> list[LLMClient]:
        return [self.inner] if self.inner is not None else []

    def stage(self, name: str) -> AbstractContextManager[object]:
        return self.inner.stage(name) if self.inner is not None else nullcontext()

    async def respond(self, request: Request) -> Response:
        """The reply to an assistant request of the dialogue loop; a reply that hangs, raises or is
        empty is the assistant's failure (`PythonOptions`)."""
        loaded = self.loaded
        view = AssistantView.of(request)
        door = AssistantLLM(self.inner, loaded.inner, view, self.name, request.temperature,
                            request.max_tokens, request.sample)
        started = time.perf_counter()
        text = await self._reply(view, door)
        if not isinstance(text, str):
            raise TypeError(f"{self.name}: reply() returned {type(text).__name__}, not the reply text")
        if not text.strip():
            self._fail("reply() returned an empty reply; an assistant must say something")
        usage = sum((r.usage for r in door.responses), Usage())
        return Response(text=text, usage=usage, backend=PYTHON, model=loaded.model_id,
                        latency_s=time.perf_counter() - started,
                        retries=sum(r.retries for r in door.responses),
                        cost_usd=sum(r.cost_usd for r in door.responses))

    async def _reply(self, view: AssistantView, door: AssistantLLM) -> Any:
        reply = self.loaded.obj.reply
        timeout = self.options.reply_timeout_s
        try:
            if inspect.iscoroutinefunction(reply):
                return await asyncio.wait_for(reply(view, door), timeout)
            text = await asyncio.wait_for(_in_daemon_thread(lambda: reply(view, door)), timeout)
            return await asyncio.wait_for(text, timeout) if inspect.isawaitable(text) else text
        except TimeoutError:
            self._fail(f"reply() gave no answer within {timeout:g} s (assistant_timeout_s)")
        except LLMError:
            raise  # its model's call failed: the kit's error policy applies
        except Exception as exc:
            self._fail(f"reply() raised {type(exc).__name__}: {exc}", exc)

    def _fail(self, problem: str, cause: BaseException | None = None) -> Any:
        message = f"{self.name}: {problem}"
        if self.options.on_error == "record":
            raise AssistantFailed(message) from cause
        raise AssistantStopped(message, self.name) from cause

    def preflight(self, role: str) -> list[str]:
        """The assistant is loaded already; check the model it calls."""
        line = f"{role}: python assistant {self.model_id}"
        if self.inner is None or self.loaded.inner is None:
            return [f"{line}, calls no model"]
        return [line, *self.inner.preflight({f"{role}'s model": self.loaded.inner.model})]

    def describe(self, role: str) -> list[str]:
        return [f"{role}: {PYTHON}:{self.model_id}"]

    def pricing(self) -> Pricing:
        inner = self.loaded.inner
        if inner is None:
            return Pricing(PYTHON, None, f"{self.name} (calls no model through the kit: nothing priced)")
        return Pricing(inner.backend, inner.model, f"{self.name} through {inner.backend}:{inner.model}, one "
                                                   "call per turn sized like the prompt-based assistant's")
