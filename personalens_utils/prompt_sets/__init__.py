"""Prompt sets: whose prompts a run uses, as objects (`PromptSet`): the kit's own (`KitPrompts`) and
the official authors' (`OfficialPromptSet`). A set owns how every request is built and the dialogue
rules that go with its prompts; the stages receive the object and never test its name.

Adding a set is one class (usually a `KitPrompts` subclass overriding what differs) registered with
`register`; `prompt_set(name)` gives the set a notebook's `prompt_set` names, and records accept the
registered names (docs/architecture.md, "Add a prompt set").
"""

from __future__ import annotations

from pathlib import Path

from personalens_utils.prompt_sets.base import PromptSet, Setting, split_terminate
from personalens_utils.prompt_sets.context import ScenarioContext
from personalens_utils.prompt_sets.kit import KIT, KitPrompts
from personalens_utils.prompt_sets.official.prompt_set import OfficialPromptSet, assistant_family

PROMPT_SETS: dict[str, type[PromptSet]] = {}
"""Registered prompt sets by name."""


def register(cls: type[PromptSet]) -> type[PromptSet]:
    """Make a prompt set known by its `name` (usable as a class decorator)."""
    if cls.name in PROMPT_SETS and PROMPT_SETS[cls.name] is not cls:
        raise ValueError(f"a prompt set named {cls.name!r} is already registered ({PROMPT_SETS[cls.name]})")
    PROMPT_SETS[cls.name] = cls
    return cls


register(KitPrompts)
register(OfficialPromptSet)


def prompt_set(name: str | PromptSet, official_code: str | Path | None = None) -> PromptSet:
    """The prompt set a parameter names (a set given as an object is returned as it is)."""
    if isinstance(name, PromptSet):
        return name
    if name not in PROMPT_SETS:
        raise ValueError(f"unknown prompt_set {name!r}; choose one of {list(PROMPT_SETS)}")
    return KIT if name == KIT.name else PROMPT_SETS[name].load(official_code)


__all__ = [
    "KIT",
    "PROMPT_SETS",
    "KitPrompts",
    "OfficialPromptSet",
    "PromptSet",
    "ScenarioContext",
    "Setting",
    "assistant_family",
    "prompt_set",
    "register",
    "split_terminate",
]
