"""Your own assistant in Python: the protocol, the loader of `python:` specs, and the adapter the
dialogue loop calls in place of a prompt-based assistant.

A spec `python:package.module:Name` (options after `?`: `python:package.module:Name?k=3&model=offline`)
names an assistant under test written in Python. `Name` is a class, called once with the options as
keyword arguments (values are text), or a ready object. Either way the object has

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
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import registry
from .offline.reference import SETTING_ASSISTANT
from .registry import KNOWN_BACKENDS
from .specs import PYTHON, ModelSpec, SpecError
from .types import CallKind, FatalError, Message, Request, Response, Usage

if TYPE_CHECKING:
    from .client import LLMClient

CALLS = " -> "
"""Separates a Python assistant's own id from the backend:model it calls, in its model id."""
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
    """`package.module:Name` and its options, written canonically (options sorted)."""

    module: str
    name: str
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str, what: str = "model") -> Target:
        head, _, query = text.strip().partition("?")
        module, colon, name = head.partition(":")
        parts = module.split(".")
        if not colon or not all(p.isidentifier() for p in parts) or not name.isidentifier():
            raise SpecError(f"{what}='python:{text}': write python:package.module:Name, where Name is a "
                            "class or object with a reply(view, llm) method (docs/simulation.md)")
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

    def __str__(self) -> str:
        query = "&".join(f"{k}={v}" for k, v in self.options)
        return f"{self.module}:{self.name}" + (f"?{query}" if query else "")


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
            text += f"{CALLS}{self.inner.backend}:{_resolved(self.inner)}"
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
        module = importlib.import_module(target.module)
    except Exception as exc:
        raise AssistantLoadError(f"{where}: cannot import module {target.module!r} ({type(exc).__name__}: "
                                 f"{exc}); is its package installed or on PYTHONPATH for the notebook's "
                                 "kernel?") from exc
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
    if inner is not None and inner.backend == PYTHON:
        raise AssistantLoadError(f"{where}: its model must be a language model, not another python: spec")
    return Loaded(target, obj, inner, str(version) if version is not None else None)


def _kwargs(target: Target) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in target.options)


def model_id(text: str) -> str:
    """The run identity of the assistant a `python:` spec names (see `Loaded.model_id`)."""
    return load(text).model_id


def row_label(model: str) -> str:
    """A model name as a table row shows it: a Python assistant (`package.module:Name?options`, with
    or without `python:`) as its class and options, `RetrievalAssistant (k=3)`, since the module path
    does not fit a row and the table's source names the whole spec; any other name as it is."""
    try:
        target = Target.parse(model.removeprefix(f"{PYTHON}:"))
    except SpecError:
        return model
    if not model.startswith(f"{PYTHON}:") and "." not in target.module:
        return model  # `backend:model` of a served model, not a Python assistant
    options = ", ".join(f"{k}={v}" for k, v in target.options)
    return f"{target.name} ({options})" if options else target.name


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
                       context={**self.view.context(), **(context or {})})

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


class PythonAssistant:
    """Stands where an assistant's `LLMClient` stands in the dialogue loop: `acomplete(request)` hands
    the request's view to the Python assistant and returns its reply, with the usage and cost of
    the calls it made through its `llm` door. `clients` (an `llm.clients.Clients`) serves those calls."""

    backend_name = PYTHON

    def __init__(self, text: str, clients: Any):
        self.loaded = load(text)
        self._clients = clients
        self.inner = clients.client(self.loaded.inner) if self.loaded.inner is not None else None

    def __repr__(self) -> str:
        return f"PythonAssistant({self.loaded.model_id!r})"

    @property
    def max_concurrency(self) -> int:
        return self.inner.max_concurrency if self.inner is not None else 8

    @contextmanager
    def stage(self, name: str) -> Iterator[PythonAssistant]:
        """Book the calls of the assistant's model under stage `name`."""
        with self.inner.stage(name) if self.inner is not None else nullcontext():
            yield self

    def llm_clients(self) -> list[LLMClient]:
        """The clients the assistant's calls go to (what a spending limit must count)."""
        return [self.inner] if self.inner is not None else []

    async def acomplete(self, request: Request) -> Response:
        """The Python assistant's reply to an assistant request of the dialogue loop."""
        loaded = self.loaded
        if Target.parse(request.model) != loaded.target:
            raise ValueError(f"a request for python:{request.model} reached the adapter of "
                             f"python:{loaded.target}")
        view = AssistantView.of(request)
        door = AssistantLLM(self.inner, loaded.inner, view, f"python:{loaded.target}", request.temperature,
                            request.max_tokens)
        started = time.perf_counter()
        if inspect.iscoroutinefunction(loaded.obj.reply):
            text = await loaded.obj.reply(view, door)
        else:
            text = await asyncio.to_thread(loaded.obj.reply, view, door)
            if inspect.isawaitable(text):
                text = await text
        if not isinstance(text, str):
            raise TypeError(f"python:{loaded.target}: reply() returned {type(text).__name__}, "
                            "not the reply text")
        usage = sum((r.usage for r in door.responses), Usage())
        return Response(text=text, usage=usage, backend=PYTHON, model=loaded.model_id,
                        latency_s=time.perf_counter() - started,
                        retries=sum(r.retries for r in door.responses),
                        cost_usd=sum(r.cost_usd for r in door.responses))

    def preflight(self, roles: Mapping[str, str]) -> list[str]:
        """Load each role's assistant (a failure names the spec), then check the model it calls."""
        lines = []
        for role, text in roles.items():
            loaded = load(text)
            line = f"{role}: python assistant {loaded.model_id}"
            if loaded.inner is None:
                lines.append(f"{line}, calls no model")
                continue
            checked = self._clients.client(loaded.inner).preflight({f"{role}'s model": loaded.inner.model})
            lines += [line, *checked]
        return lines
