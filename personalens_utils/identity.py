"""Every record's identity, in one place: the id of a dialogue or a judgment is computed from what
changes it, and from nothing else.

A dialogue: its scenario, the assistant setting, the prompt set and its version, each role's model
name, backend and resolved model id (the id the backend is called with), and a sample index (the
k-th repetition of the same work; sample 0 is a run's first, and gives the ids records always had).
A judgment: the dialogue, the dimension, the judge's model name, backend and resolved id, the judge
prompt set and version, and a sample index. Records made with the kit's prompts leave the prompt set
out of their id, so ids written before prompt sets existed are still the ids computed here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from personalens_utils.llm import python_assistant, registry
from personalens_utils.llm.specs import PYTHON
from personalens_utils.llm.types import FatalError
from personalens_utils.prompts.official import KIT_PROMPTS


def stable_id(*parts: Any) -> str:
    """A short id that depends only on the given parts (order matters)."""
    raw = orjson.dumps([str(p) for p in parts])
    return hashlib.sha256(raw).hexdigest()[:20]


def resolved_model(model: str, backend: str) -> str:
    """The id `backend` is called with for `model` (the registry's id; for offline, its offline id).

    A model the registry cannot place on that backend keeps its given name: such calls fail, and the
    error record still needs an identity. An assistant written in Python (backend "python") is
    identified by its target, its declared version and the backend:id of the model it calls.
    """
    if backend == PYTHON:
        return python_assistant.model_id(model)
    try:
        return registry.resolve(model, backend)
    except FatalError:
        return model


@dataclass(frozen=True)
class Role:
    """Who answers one role's requests: the model's name, the backend and the id it is called with."""

    model: str
    backend: str
    model_id: str

    @classmethod
    def of(cls, model: str, backend: str) -> Role:
        return cls(model, backend, resolved_model(model, backend))


def _variant(parts: tuple[Any, ...], prompt_set: str, sample: int) -> tuple[Any, ...]:
    """Id parts with the prompt set (unless the kit's) and the sample index (unless 0) added, so the
    ids of kit records of a first sample stay what they were."""
    if prompt_set != KIT_PROMPTS:
        parts = (*parts, "prompt_set", prompt_set)
    return parts if sample == 0 else (*parts, "sample", sample)


def dialogue_id(scenario_id: str, setting: str, *, user: Role, assistant: Role, prompt_set: str,
                prompt_version: str, sample: int = 0) -> str:
    """The run-store id of a dialogue."""
    parts = (scenario_id, user.model, assistant.model, setting, prompt_version,
             user.backend, user.model_id, assistant.backend, assistant.model_id)
    return stable_id(*_variant(parts, prompt_set, sample))


def judgment_id(dialogue_id: str, dimension: str, *, judge: Role, prompt_set: str, prompt_version: str,
                sample: int = 0) -> str:
    """The run-store id of one judgment; `judge.model` is the judge's key (its registry name)."""
    parts = (dialogue_id, dimension, judge.model, prompt_version, judge.backend, judge.model_id)
    return stable_id(*_variant(parts, prompt_set, sample))


def legacy_model_id(model: str, backend: str) -> str:
    """The id a record written before run identity was made with: the registry's id for `backend`
    without today's retirement substitutions (the kit named no successors then); `store_migration`
    gives old records this id."""
    info = registry.lookup(model) if model else None
    return info.ids.get(backend, model) if info else model
