"""What an offline assistant uses besides its instructions: its view.

An assistant request may carry a `view` context entry (the fields of `View`); without one the
offline assistant sees exactly what its setting gives. The reference assistants of known quality
(`assistants.reference_assistants`) set it to fix what they use whatever the setting; the wider view comes
from the request's `oracle` entry (docs/architecture.md), which nothing else reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

VIEW_KEY = "view"
"""The context entry of an assistant request that holds its `View` as a mapping."""


@dataclass(frozen=True)
class View:
    """What an offline assistant uses besides the instructions."""

    dialogue: bool = True
    """Applies values the user states."""
    setting: bool = True
    """Uses the context its setting gives (D, I, S)."""
    history: bool = False
    """Reads every past-interaction summary of the task's domains, whatever the setting."""
    oracle: bool = False
    """Knows the task's relevant preference values and the situation."""

    def context(self) -> dict[str, dict[str, bool]]:
        """The context entry that asks the offline backend for this view."""
        return {VIEW_KEY: asdict(self)}

    @classmethod
    def of(cls, context: Mapping[str, Any]) -> View:
        """The view a request's context asks for; the setting's own when it names none."""
        given = context.get(VIEW_KEY) or {}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError(f"offline assistant view: unknown field(s) {unknown}; known: {sorted(known)}")
        return cls(**{key: bool(value) for key, value in given.items()})


SETTING_BOUND = View()
"""The view of every offline assistant that names none: exactly what its setting gives."""
