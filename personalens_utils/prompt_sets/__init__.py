"""Prompt sets: whose prompts a run uses, as objects (`PromptSet`): the kit's own (`KitPrompts`) and
the official authors' (`OfficialPromptSet`). A set owns how every request is built and the dialogue
rules that go with its prompts; the stages receive the object and never test its name.

Adding a set is one class (usually a `KitPrompts` subclass overriding what differs) and its entry in
`PROMPT_SETS`; `prompt_set(name)` gives the set a notebook's `prompt_set` names, and records accept the
names listed there, in every process alike (docs/architecture.md, "Add a prompt set").
"""

from __future__ import annotations

from pathlib import Path

from personalens_utils.prompt_sets.base import PromptSet, Setting, in_style, split_terminate
from personalens_utils.prompt_sets.context import ScenarioContext
from personalens_utils.prompt_sets.kit import KIT, KitPrompts
from personalens_utils.prompt_sets.official.prompt_set import OfficialPromptSet, assistant_family

PROMPT_SETS: dict[str, type[PromptSet]] = {cls.name: cls for cls in (KitPrompts, OfficialPromptSet)}
"""The prompt sets by name: the only names a notebook or a stored record may give."""


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
    "in_style",
    "prompt_set",
    "split_terminate",
]
