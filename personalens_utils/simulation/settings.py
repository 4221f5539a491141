"""Assistant settings: what instructions the assistant gets and which user context it sees.

A setting is a value made of two parts, so `base+I` is not a seventh prompt but `base`
instructions plus the past-interaction section. The paper's settings are `vanilla`, `base`,
`base+D`, `base+I`, `base+S` and `base+all`; any other combination of D, I and S composes the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from personalens_utils.assistants.base import Assistant
from personalens_utils.assistants.python import PYTHON, row_label
from personalens_utils.assistants.resolve import AssistantSpec
from personalens_utils.base.errors import KitError

INSTRUCTIONS = ("vanilla", "base")
CONTEXT_PARTS = {
    "D": "demographics",
    "I": "interactions",
    "S": "situation",
}
"""Letter -> the context key (see docs/architecture.md) the part adds to the assistant's view."""

SHOWN = {"D": "demographics", "I": "past interactions", "S": "situation"}
"""Each part as a sentence names it."""
PAPER_SETTINGS = ("vanilla", "base", "base+D", "base+I", "base+S", "base+all")


class SettingError(KitError, ValueError):
    """An assistant setting name that cannot be parsed."""


@dataclass(frozen=True, order=True)
class AssistantSetting:
    instructions: str = "base"
    parts: tuple[str, ...] = ()
    """Sorted subset of "D", "I", "S"."""

    def __post_init__(self) -> None:
        if self.instructions not in INSTRUCTIONS:
            raise SettingError(
                f"unknown assistant instructions {self.instructions!r}; choose one of {INSTRUCTIONS}"
            )
        unknown = [p for p in self.parts if p not in CONTEXT_PARTS]
        if unknown:
            raise SettingError(f"unknown context part(s) {unknown}; choose from {sorted(CONTEXT_PARTS)}")
        object.__setattr__(self, "parts", tuple(p for p in CONTEXT_PARTS if p in self.parts))

    @classmethod
    def parse(cls, name: str | AssistantSetting) -> AssistantSetting:
        """`"base"`, `"vanilla"`, `"base+D+I"`, `"base+DI"`, `"base+all"` (case of the parts is ignored)."""
        if isinstance(name, AssistantSetting):
            return name
        if not isinstance(name, str) or not name.strip():
            raise SettingError(f"an assistant setting must be a non-empty string, got {name!r}")
        head, *rest = [piece.strip() for piece in name.strip().split("+")]
        parts: list[str] = []
        for piece in rest:
            if piece.lower() == "all":
                parts.extend(CONTEXT_PARTS)
                continue
            letters = piece.upper()
            if not letters or any(ch not in CONTEXT_PARTS for ch in letters):
                raise SettingError(
                    f"cannot read assistant setting {name!r}: {piece!r} is not a combination of "
                    f"{'/'.join(CONTEXT_PARTS)} or 'all' (examples: {', '.join(PAPER_SETTINGS)})"
                )
            parts.extend(letters)
        if len(parts) != len(set(parts)):
            raise SettingError(f"assistant setting {name!r} names a context part twice")
        return cls(head.lower(), tuple(parts))

    @property
    def name(self) -> str:
        """Canonical spelling: parts in D, I, S order; all three is written `+all`."""
        if not self.parts:
            return self.instructions
        if len(self.parts) == len(CONTEXT_PARTS):
            return f"{self.instructions}+all"
        return f"{self.instructions}+{'+'.join(self.parts)}"

    @property
    def context_keys(self) -> tuple[str, ...]:
        return tuple(CONTEXT_PARTS[p] for p in self.parts)

    def sees(self, part: str) -> bool:
        return part in self.parts

    def __str__(self) -> str:
        return self.name


def hidden_note(assistant: Assistant | AssistantSpec, settings: Sequence[str | AssistantSetting],
                remedy: str = "settings=['base+all'] shows it all") -> list[str]:
    """One line per setting that hides part of the user from a Python assistant, said before the run: the
    offline reference assistants read the whole user whatever the setting, so beside them such a row
    measures the setting, not the assistant. `remedy` ends the line: what the caller accepts to show
    the whole user (a notebook's parameter, a command's option)."""
    if assistant.backend != PYTHON:
        return []
    lines = []
    for setting in map(AssistantSetting.parse, settings):
        if hidden := [SHOWN[p] for p in CONTEXT_PARTS if not setting.sees(p)]:
            lines.append(f"setting {setting.name}: {row_label(assistant.model)} sees no {', '.join(hidden)} "
                         "of the user (the reference assistants see the whole user in every setting); "
                         f"{remedy}")
    return lines
