"""The records of the simulation stage: dialogues, and the summary of one that planning reads.

Run identity: a dialogue's id includes the backend and the resolved model id (`resolved_model`) of the
user agent and of the assistant, so an offline run and a real model's run of the same scenarios are
different records. A line written before these fields existed is refused with a pointer to
`runstore.migration`, which `RunStore` runs once on such a store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from personalens_utils.base.stored import BackendName
from personalens_utils.llm import registry
from personalens_utils.llm.role import Role, resolved_model
from personalens_utils.llm.types import Message, Usage
from personalens_utils.outputs.display import chat_html, fields_html
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, USER_STYLES
from personalens_utils.runstore.identity import (
    STORED_KEYS,
    USER_STYLE,
    Variant,
    dialogue_id,
)
from personalens_utils.runstore.records.base import (
    OFFLINE,
    USAGE,
    VARIANT,
    Record,
    _Varied,
    run_identity,
    unless_empty,
)


@dataclass(frozen=True, kw_only=True)
class Dialogue(Record, _Varied):
    """One simulated (or imported) dialogue. Status "terminated", "turn_cap" or "error"."""

    table: ClassVar[str] = "dialogues"
    summary_fields: ClassVar[tuple[str, ...]] = (
        "id", "scenario_id", "user_id", "task_id", "task_type", "domains", "user_model", "assistant_model",
        "assistant_setting", *STORED_KEYS, "backend", "user_backend", "user_model_id", USER_STYLE,
        "assistant_backend", "assistant_model_id", "status", "n_turns",
    )
    """The fields analysis reads: everything but the texts and the costs."""
    layout: ClassVar[tuple[str, ...]] = (
        "id", "scenario_id", "user_id", "task_id", "task_type", "domains", "user_model", "assistant_model",
        "assistant_setting", "variant", "backend", "user_backend", "user_model_id", USER_STYLE,
        "assistant_backend", "assistant_model_id", "status", "error", "turns", "n_turns", "usage", "cost_usd",
        "retries", "cut_off",
    )
    derived: ClassVar[Mapping[str, str]] = {"n_turns": "the turns hold {} user messages"}
    scenario_id: str
    user_id: int
    task_id: str
    task_type: str
    domains: tuple[str, ...]
    user_model: str
    assistant_model: str
    assistant_setting: str
    variant: Variant = field(metadata=VARIANT.meta())
    """Whose prompts made it (the user agent's and the assistant's) and which sample it is."""
    backend: BackendName
    user_backend: BackendName = field(default="", metadata=run_identity())
    """The user agent's backend; empty: `backend`."""
    user_model_id: str = field(default="", metadata=run_identity())
    """The id the user agent's backend is called with; empty: resolved from `user_model`."""
    user_style: str = field(default=COOPERATIVE,
                            metadata=unless_empty(USER_STYLE, str, COOPERATIVE, USER_STYLES).meta())
    """The style the user agent played (`prompt_templates.user_styles`); stored only when not cooperative,
    so the paper's user agent writes the line it always wrote."""
    assistant_backend: BackendName = field(default="", metadata=run_identity())
    assistant_model_id: str = field(default="", metadata=run_identity())
    error: str | None = None
    turns: tuple[Message, ...] = ()
    usage: Usage = field(default_factory=Usage, metadata=USAGE.meta())
    cost_usd: float = 0.0
    retries: int = 0
    cut_off: int = field(default=0, metadata=unless_empty("cut_off", int, 0).meta())
    """How many of its replies (the user agent's and the assistant's) stopped at the token limit
    (`Response.cut_off`); stored only when not 0, so a dialogue with none is the line it always was."""

    def __post_init__(self) -> None:
        fill = object.__setattr__
        fill(self, "user_backend", self.user_backend or self.backend)
        fill(self, "assistant_backend", self.assistant_backend or self.backend)
        fill(self, "user_model_id", self.user_model_id or resolved_model(self.user_model, self.user_backend))
        fill(self, "assistant_model_id",
             self.assistant_model_id or resolved_model(self.assistant_model, self.assistant_backend))
        super().__post_init__()

    @property
    def made_offline(self) -> bool:
        """Whether any of it came from the offline backend (`_made_offline` says how that is told)."""
        return _made_offline(self)

    @property
    def failure(self) -> str:
        return f"{self.scenario_id} ({self.assistant_setting}): {self.error or self.status}"

    @property
    def user(self) -> tuple[str, str]:
        """The user agent's (backend, resolved model id)."""
        return self.user_backend, self.user_model_id

    @property
    def assistant(self) -> tuple[str, str]:
        """The assistant's (backend, resolved model id)."""
        return self.assistant_backend, self.assistant_model_id

    @property
    def user_role(self) -> Role:
        """Who played the user agent, as its id keys it (model, backend, resolved id and style)."""
        return Role(self.user_model, *self.user, self.user_style)

    @property
    def assistant_role(self) -> Role:
        """Who answered as the assistant, as its id keys it."""
        return Role(self.assistant_model, *self.assistant)

    def identity(self) -> str:
        return dialogue_id(self.scenario_id, self.assistant_setting, user=self.user_role,
                           assistant=self.assistant_role, variant=self.variant)

    @property
    def n_turns(self) -> int:
        """Turns as the paper counts them: user messages."""
        return sum(t.role == "user" for t in self.turns)

    def _repr_html_(self) -> str:
        """Who talked and how it ended, above the transcript as a chat (turns numbered by user message)."""
        summary = {name: getattr(self, name) for name in self.summary_fields if name != "id"}
        summary["error"] = self.error
        return fields_html({"id": self.id, **summary}) + chat_html((t.role, t.content) for t in self.turns)


def _made_offline(dialogue: Dialogue | DialogueSummary) -> bool:
    """Whether any of a dialogue came from the offline backend: the user agent, the assistant, or the
    model an assistant calls through the kit (`registry.called_backend` of its model id)."""
    if OFFLINE in (dialogue.user_backend, dialogue.assistant_backend):
        return True
    return registry.called_backend(dialogue.assistant_model_id) == OFFLINE


class DialogueSummary(NamedTuple):
    """A stored dialogue without its texts: its `summary_fields`, the variant's parts and backends filled
    in as `Dialogue` fills them. Planning and `select` callables read these for every dialogue of a
    store (a row of the columnar copy, cheap to hold); the `Dialogue` itself is read when it is judged."""

    id: str
    status: str
    scenario_id: str
    user_id: int
    task_id: str
    task_type: str
    domains: tuple[str, ...]
    user_model: str
    assistant_model: str
    assistant_setting: str
    prompt_version: str
    prompt_set: str
    sample: int
    backend: BackendName
    user_backend: BackendName
    user_model_id: str
    user_style: str
    assistant_backend: BackendName
    assistant_model_id: str
    n_turns: int

    @property
    def variant(self) -> Variant:
        return Variant(self.prompt_version, self.prompt_set, self.sample)

    @property
    def made_offline(self) -> bool:
        return _made_offline(self)

    @property
    def user(self) -> tuple[str, str]:
        return self.user_backend, self.user_model_id

    @property
    def assistant(self) -> tuple[str, str]:
        return self.assistant_backend, self.assistant_model_id
