"""Model specs: which backend plays a role, and which model it calls there.

A spec is `backend:model` (`anthropic:claude-sonnet-4-5`, `openai:Qwen/Qwen2.5-7B-Instruct`,
`bedrock:anthropic.claude-3-sonnet-20240229-v1:0`, `offline:Claude 3 Sonnet`), a backend alone
(`offline`: the role's default model on that backend) or a bare model name (`Claude 3 Sonnet`,
`llama3:8b`), which runs on the notebook's `backend`. Only the text before the first colon can name
a backend, so model ids with colons of their own stay whole.

An OpenAI-compatible endpoint other than OPENAI_BASE_URL is named by the environment variable that
holds its URL: `openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct` calls the server at $VLLM_URL. Specs never
carry URLs or keys themselves; those come from the environment only (the key from OPENAI_API_KEY).

A spec is refused when it cannot mean a model: nothing before or after its colon (`::`), a model name
without a letter or digit, or, on the offline backend (which answers any name), a word before the
first colon that names no backend (`nosuchbackend:model`). The assistant under test has more kinds
of spec than a model's; those are read by `assistants.resolve`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from personalens_utils.base.errors import KitError
from personalens_utils.llm import registry
from personalens_utils.llm.endpoints import OPENAI_URL, openai_endpoint
from personalens_utils.llm.registry import KNOWN_BACKENDS

DEFAULT_BASE_URL_VAR = "OPENAI_BASE_URL"
_BACKEND_WORD = re.compile(r"[a-z][a-z0-9_-]*")


class SpecError(KitError, ValueError):
    """A model spec that cannot be read; the message names the spec and the fix."""


class SpecParts(NamedTuple):
    """A spec text cut at its first colon, the one way every reader of specs (models, assistants) cuts it."""

    head: str
    """What stands before the first colon, as written."""
    backend: str
    """The word of `head` before any '@', stripped and in lower case."""
    var: str | None
    """What follows '@' in `head`, stripped; None without an '@'."""
    rest: str | None
    """What follows the first colon, stripped; None without a colon."""

    @classmethod
    def of(cls, text: str) -> SpecParts:
        head, colon, rest = text.strip().partition(":")
        backend, at, var = head.partition("@")
        return cls(head, backend.strip().lower(), var.strip() if at else None,
                   rest.strip() if colon else None)


@dataclass(frozen=True)
class ModelSpec:
    """A role's backend and model; `base_url_var` names the endpoint's variable (openai only)."""

    backend: str
    model: str
    base_url_var: str | None = None

    @classmethod
    def parse(cls, text: str, default_backend: str, *, default_model: str = "",
              what: str = "model") -> ModelSpec:
        """Read `text` (see the module doc); `what` names the parameter in error messages."""
        if default_backend not in KNOWN_BACKENDS:
            raise SpecError(f"{what}: unknown default backend {default_backend!r}; "
                            f"use one of {KNOWN_BACKENDS}")
        if not isinstance(text, str) or not text.strip():
            raise SpecError(f"{what}={text!r}: give a model spec such as 'anthropic:claude-sonnet-4-5' "
                            "or a model name")
        text = text.strip()
        head, backend, var, model = SpecParts.of(text)
        if model is not None and not head.strip():
            raise SpecError(f"{what}={text!r}: nothing before ':'; write 'backend:model' with a backend of "
                            f"{KNOWN_BACKENDS}, or a model name alone")
        if backend not in KNOWN_BACKENDS:
            if var is not None or (model is not None and default_backend == "offline"
                                   and _BACKEND_WORD.fullmatch(backend)):
                raise SpecError(f"{what}={text!r}: unknown backend {backend!r}; write 'backend:model' with a "
                                f"backend of {KNOWN_BACKENDS}, or a model name alone")
            return cls(default_backend, _named(text, text, what))
        if model == "":
            raise SpecError(f"{what}={text!r}: no model after '{head}:'; "
                            f"write '{head}:<model>' or just '{head}'")
        if var is not None:
            cls._check_var(text, backend, var, model or "", what)
        if not model:
            if not default_model:
                raise SpecError(f"{what}={text!r} names no model and this role has no default: "
                                f"write '{backend}:<model>'")
            model = default_model
        return cls(backend, _named(model, text, what), var or None)

    def describe(self, role: str) -> str:
        """The line naming what `role` will call: the backend and the id sent there."""
        return registry.resolve_model(self.model, self.backend).describe(role)

    @staticmethod
    def _check_var(text: str, backend: str, var: str, model: str, what: str) -> None:
        if backend != "openai":
            raise SpecError(f"{what}={text!r}: only an openai spec names an endpoint variable "
                            f"('openai@VAR:model'); {backend} reads its endpoint from its usual variables")
        if model.startswith("//") or not var.isidentifier():
            raise SpecError(f"{what}={text!r}: after '@' name the environment variable that holds the "
                            "endpoint, not the URL: export MY_URL=http://host:port/v1 and write "
                            "'openai@MY_URL:<model>'")

    @property
    def client_key(self) -> str:
        """Specs with the same key share one client: the backend, plus the endpoint variable if named."""
        return f"{self.backend}@{self.base_url_var}" if self.base_url_var else self.backend

    def endpoint(self) -> str:
        """Where the model is served when that is part of identity (`endpoints`): an openai spec's server
        unless it is OpenAI's API, as the backend will read it from the environment; else ""."""
        if self.backend != "openai":
            return ""
        return openai_endpoint(os.environ.get(self.base_url_var or DEFAULT_BASE_URL_VAR) or OPENAI_URL)

    def backend_options(self) -> dict[str, Any]:
        """Constructor options for the backend; an unset endpoint variable is an error naming it."""
        if self.base_url_var is None:
            return {}
        if not os.environ.get(self.base_url_var):
            raise SpecError(f"model spec {self}: the endpoint variable {self.base_url_var} is not set; "
                            f"export {self.base_url_var}=http://host:port/v1")
        return {"base_url_var": self.base_url_var}

    def __str__(self) -> str:
        return f"{self.client_key}:{self.model}"


def served_spec(model: str, endpoint: str) -> str:
    """The openai spec that reaches `model` at `endpoint` (a record's, `endpoints.served_id`; "" for
    OpenAI's API). Records keep the address but not the variable a spec named, so the variable is one
    that holds that address now, OPENAI_BASE_URL first; none raises, naming the export that fixes it."""
    if not endpoint or _reaches(os.environ.get(DEFAULT_BASE_URL_VAR) or OPENAI_URL, endpoint):
        return f"openai:{model}"
    held = sorted(var for var, url in os.environ.items() if var.isidentifier() and _reaches(url, endpoint))
    if not held:
        raise SpecError(f"model {model!r} was served at {endpoint} and no environment variable holds that "
                        f"address: export one (e.g. LOCAL_URL={endpoint}) so it is called there again")
    return f"openai@{held[0]}:{model}"


def _reaches(value: str, endpoint: str) -> bool:
    try:
        return openai_endpoint(value) == endpoint
    except ValueError:  # a value that is no URL
        return False


def _named(model: str, text: str, what: str) -> str:
    """`model` when it can name one: it has a letter or a digit."""
    if not any(ch.isalnum() for ch in model):
        raise SpecError(f"{what}={text!r}: {model!r} is not a model name; write a model such as "
                        "'Claude 3 Sonnet' or a spec 'backend:model'")
    return model
