"""Reference assistants of the offline backend: assistants whose quality is known by construction.

Every offline "model" used to answer alike, so tables could not tell a working pipeline from a broken
one. A reference assistant is an offline assistant model name that fixes what the assistant uses,
whatever setting it runs in; each sees strictly more than the one before it, so a sound judge must
rank them in `DESIGNED_ORDER` on personalization and task completion:

- `ref-ignores-context` uses nothing about the user, not even what the user says;
- `ref-dialogue-only` applies only what the user states in the dialogue;
- `ref-past-interactions` also reads preference values off the past-interaction summaries;
- `ref-all-preferences` also knows every relevant preference value of the task and the situation.

On personalization the order is strict. On task completion the first is far below the rest, and
the other three almost always finish (they all apply what the user says), so a sound judge shows
them level or rising, never confidently falling.

`ref-follows-setting` (and any name that is not a reference assistant) sees exactly what its
setting gives, which is what the six-setting ablation needs. The wider view comes from the assistant
request's `oracle` context entry (docs/architecture.md); nothing else reads it.
"""

from __future__ import annotations

from dataclasses import dataclass


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


SETTING_BOUND = View()
SETTING_ASSISTANT = "ref-follows-setting"
"""The offline assistant that uses exactly the context it is given (its setting's, or a Python
assistant's selection)."""
REFERENCE_ASSISTANTS: dict[str, View] = {
    "ref-ignores-context": View(dialogue=False, setting=False),
    "ref-dialogue-only": View(setting=False),
    "ref-past-interactions": View(setting=False, history=True),
    "ref-all-preferences": View(setting=False, history=True, oracle=True),
    SETTING_ASSISTANT: SETTING_BOUND,
}
DESIGNED_ORDER = ("ref-ignores-context", "ref-dialogue-only", "ref-past-interactions", "ref-all-preferences")
"""The reference assistants from worst to best on personalization and task completion."""


def view_of(model: str) -> View:
    """The view of an assistant model name: a reference assistant's, else the setting's."""
    return REFERENCE_ASSISTANTS.get(model.strip().lower(), SETTING_BOUND)
