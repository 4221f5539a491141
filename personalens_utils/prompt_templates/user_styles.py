"""User-agent styles: how the simulated user behaves besides what its prompt set tells it.

The paper's user agent is `cooperative`: it states what it wants. A study of whether a conclusion survives
another user (docs/simulation.md, "User-agent styles") needs users who do not: each other style is an
addition appended to the user agent's instructions, never an edit of a prompt set's text, so the official
prompts stay the authors' word for word. A style other than `cooperative` is part of a dialogue's identity
(`runstore.identity.dialogue_id`). Adding a style is one entry in `USER_STYLES` (and how the offline user
agent plays it, `simulation.offline`).
"""

from __future__ import annotations

from dataclasses import dataclass

from personalens_utils.base.errors import KitError

COOPERATIVE = "cooperative"
"""The paper's user agent: no addition, and the ids and lines dialogues always had."""
STYLE_KEY = "user_style"
"""Where a user request's context names its style (absent: cooperative); the offline user agent reads it."""


class UserStyleError(KitError, ValueError):
    """A user-agent style the kit does not define."""


@dataclass(frozen=True)
class UserStyle:
    """One way of playing the user: its name (stored with the dialogue), what it does in a line, and the
    instructions appended to the user agent's system prompt (none for `cooperative`)."""

    name: str
    description: str
    instructions: str


USER_STYLES: dict[str, UserStyle] = {style.name: style for style in (
    UserStyle(COOPERATIVE, "the paper's user agent: states what it wants", ""),
    UserStyle("reticent", "states no preference unless asked about it or offered something against it",
              "Keep your preferences to yourself: say what you need done as your task puts it, but do not "
              "mention any preference beyond that unless the assistant asks about it or proposes something "
              "that goes against it. When that happens, answer truthfully and say what you prefer."),
    UserStyle("terse", "short messages that answer only what is asked",
              "Write short messages, one or two sentences at most. Answer only what the assistant asks, "
              "and volunteer nothing else."),
    UserStyle("impatient", "ends the dialogue after two assistant turns without progress",
              "You are short on patience: if two of the assistant's replies in a row bring your task no "
              "closer to done, end the conversation the way your instructions say to end it."),
)}
"""The styles by name: the only names a run may be asked for or a stored dialogue may carry."""


@dataclass(frozen=True)
class UserAgent:
    """Who plays the user: a model (a name, or a spec where the caller reads specs) and the style it
    plays, checked when made."""

    model: str
    style: str = COOPERATIVE

    def __post_init__(self) -> None:
        user_style(self.style)


def user_style(name: str) -> UserStyle:
    """The style `name`; another name is refused, listing the known ones."""
    if name not in USER_STYLES:
        raise UserStyleError(f"unknown user_style {name!r}; choose one of {', '.join(USER_STYLES)}")
    return USER_STYLES[name]
