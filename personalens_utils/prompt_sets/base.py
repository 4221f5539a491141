"""What a prompt set is: how each request of a dialogue and of the judge is built, and the dialogue
rules that go with those prompts (how the user's TERMINATE is read, what is kept of a reply, how
the turn cap counts). Every stage receives a `PromptSet` object and asks it; none looks at its name.

The rules here are the kit's; a set that runs by other rules overrides them (`official.py`).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from personalens_utils.llm import Request
from personalens_utils.prompt_sets.context import ScenarioContext
from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS
from personalens_utils.prompt_sets.review import review_request
from personalens_utils.prompt_sets.variant import Variant
from personalens_utils.prompt_templates.dialogue import TERMINATE
from personalens_utils.prompt_templates.review import REVIEW_PROMPT_VERSION
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, STYLE_KEY, user_style

Turn = Mapping[str, str]

_TERMINATE = re.compile(r"""[\s"'`*_\[(<{]*\b""" + TERMINATE + r"""\b[\s"'`*_\])>}.!]*""")


def split_terminate(text: str) -> tuple[str, bool]:
    """The message without the TERMINATE marker (and quotes or brackets around it); whether it had one."""
    cleaned, count = _TERMINATE.subn(" ", text)
    if not count:
        return text.strip(), False
    return re.sub(r"[ \t]{2,}", " ", cleaned).strip(), True




def in_style(request: Request, style: str) -> Request:
    """A user agent's `request`, from any prompt set, as `style` plays it: the style's instructions
    appended to the set's system prompt (whose own text stays as the set wrote it) and the style named in
    the context. Cooperative: `request` itself, so the paper's user agent sends what it always sent."""
    chosen = user_style(style)
    if chosen.name == COOPERATIVE:
        return request
    system = f"{request.system}\n\n{chosen.instructions}" if request.system else chosen.instructions
    return replace(request, system=system, context={**request.context, STYLE_KEY: chosen.name})


class Setting(Protocol):
    """The assistant setting a request is built for (`simulation.settings.AssistantSetting`)."""

    name: str
    instructions: str

    def sees(self, part: str) -> bool: ...


class JudgedDimension(Protocol):
    """A judge dimension as a prompt set reads it (`judging.dimensions.Dimension`)."""

    @property
    def name(self) -> str: ...
    @property
    def head(self) -> str: ...
    @property
    def tail(self) -> str: ...
    @property
    def speaker(self) -> str | None: ...
    @property
    def turn_level(self) -> bool: ...


class PromptSet(ABC):
    """Whose prompts a run uses. `name` and `version` go into every record's identity (`identity`):
    `version` is the dialogue prompts'; a judgment's is `judge_version`."""

    name: ClassVar[str]
    reminds: ClassVar[bool] = True
    """Whether an unreadable judge answer is asked again with a format reminder."""

    @classmethod
    @abstractmethod
    def load(cls, official_code: str | Path | None = None) -> Self:
        """The set ready to use; `official_code` is where a set reading the authors' code finds it."""

    @property
    @abstractmethod
    def version(self) -> str:
        """The version of the dialogue prompts (user agent and assistant)."""

    @abstractmethod
    def user_request(self, ctx: ScenarioContext, turns: Sequence[Turn], model: str) -> Request:
        """The user agent's next message; the opening one when `turns` is empty."""

    @abstractmethod
    def assistant_request(self, setting: Setting, ctx: ScenarioContext, turns: Sequence[Turn],
                          model: str) -> Request:
        """The assistant's next reply in `setting`."""

    @abstractmethod
    def judge_requests(self, dimension: JudgedDimension, context: Mapping[str, Any],
                       judge_model: str) -> list[Request]:
        """The calls behind one judgment of `dimension` (one per assistant turn when turn-level)."""

    def judge_version(self, kit_version: str) -> str:
        """The version a judgment made with this set's judge prompts carries; `kit_version` is the
        judge prompt version the run was asked for."""
        return kit_version

    def judge_set(self, dimension: JudgedDimension) -> PromptSet:
        """The set whose judge prompt scores `dimension` (this one unless it has none for it)."""
        return self

    def variant(self, sample: int = 0) -> Variant:
        """The variant a dialogue made with this set's prompts carries, for its `sample`."""
        return Variant(self.version, self.name, sample)

    def judge_variant(self, dimension: JudgedDimension, kit_version: str, sample: int = 0) -> Variant:
        """The variant a judgment of `dimension` carries: the prompts of the set that judges it (its
        version for the run's `kit_version`), and the judge `sample`."""
        judged_by = self.judge_set(dimension)
        return Variant(judged_by.judge_version(kit_version), judged_by.name, sample)

    def review_request(self, context: Mapping[str, Any], reviewer_model: str) -> Request:
        """The failure reviewer's call on a review context (`prompt_sets.review`). Every set uses the
        kit's reviewer prompt: the authors wrote none."""
        return review_request(context, reviewer_model)

    def review_variant(self) -> Variant:
        """The variant a blame record carries: the reviewer prompt's set and version."""
        return Variant(REVIEW_PROMPT_VERSION, KIT_PROMPTS)

    def check_setting(self, setting: str, assistant_model: str) -> None:
        """Refuse, before a run, an assistant setting this set has no prompt for (the kit has one for
        every setting)."""
        return None

    def read_user_message(self, text: str, opening: bool) -> tuple[str, bool]:
        """The user's message as the dialogue keeps it, and whether it ends the dialogue. The kit's
        rule: the TERMINATE marker is removed wherever it stands; the opening message cannot end it."""
        return split_terminate(text)

    def kept_reply(self, text: str, assistant_model: str) -> str:
        """The assistant's reply as the dialogue keeps it."""
        return text.strip()

    def user_messages(self, cap: int) -> int:
        """At most this many user messages in a dialogue capped at `cap` turns. The kit counts turns
        (a user message and its reply); a set that counts replies allows one more user message, and the
        loop stops after it without a reply."""
        return cap

    def described(self) -> str:
        """The prompts in words, for a run's index (INDEX.md)."""
        return f"the kit's own (`prompt_set={self.name}`)"

    def details(self) -> dict[str, str]:
        """What a stage report says about the prompts."""
        return {"prompt_set": self.name, "prompt_version": self.version}

    def judge_details(self, dimensions: Sequence[JudgedDimension]) -> dict[str, str]:
        """What a judging report says about the judge prompts."""
        return {"prompt_set": self.name}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(version={self.version!r})"
