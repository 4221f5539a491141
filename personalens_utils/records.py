"""The record types of the run store, one per table, and their JSON layout.

Each type names its table (`table`), computes its id from its identity fields with the same
`stable_id` recipe, and turns into / reads back from the JSON object stored on one line of the table
(docs/architecture.md, "Run store records"). `to_json(from_json(line))` gives back the stored
object, key order included. A line that does not fit its type raises `RecordError` naming the
file, the line and the field, and how to repair the store.

Run identity: a dialogue's id includes the backend and the resolved model id (`resolved_model`)
of the user agent and of the assistant, a judgment's those of the judge, so an offline run and a
real model's run of the same scenarios are different records; `identity` computes every id. A line
written before these fields existed is refused with a pointer to `store_migration`, which `RunStore`
runs when it opens such a store.

Variants: whose prompts made a dialogue or judgment (the prompt set and its version) and which sample
it is are one `identity.Variant`, which the record holds and stores through; a kit record of sample 0
keeps the line and the id recipe it always had, so records written before prompt sets and samples
existed read as the kit's first sample with their ids unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, NoReturn, Self

from personalens_utils.display import chat_html, esc, fields_html, inline
from personalens_utils.errors import KitError
from personalens_utils.identity import (
    STORED_KEYS,
    Role,
    Variant,
    blame_id,
    dialogue_id,
    judgment_id,
    resolved_model,
    stable_id,
)
from personalens_utils.llm import registry
from personalens_utils.llm.types import Message, Usage
from personalens_utils.prompting import PROMPT_SETS
from personalens_utils.prompts.official import KIT_PROMPTS, OFFICIAL_PROMPTS

OFFLINE = "offline"

ERROR = "error"
"""The status of a record whose work failed in the llm layer; a rerun may replace it."""

LAYOUT_HINT = (
    "the run store layout is described in docs/architecture.md ('Run store records'); fix or delete "
    "that line (a deleted record is simply redone by the next run), or move the folder aside and "
    "run the stage again"
)


_TABLES: dict[str, type[Record]] = {}
"""Table name -> the record type stored there, filled by `Record.__init_subclass__`."""
RECORD_MODULES = ("personalens_utils.persona_bench.records", "personalens_utils.trust.probes")
"""The modules besides this one that define record types; `stored_types` imports them so that every
table is known even to a process that never used them."""


class RecordError(KitError, ValueError):
    """A stored line that does not fit its record type; the message names where and what."""


class _Reader:
    """Typed access to one stored JSON object; every failure names the place and the field."""

    def __init__(self, data: Any, kind: type[Record], where: str):
        self.kind, self.where = kind, where or f"a {kind.table} record"
        if not isinstance(data, Mapping):
            self.fail("", f"must be a JSON object, got {type(data).__name__}")
        self.data: Mapping[str, Any] = data

    def fail(self, key: str, problem: str) -> NoReturn:
        what = f"field {key!r} " if key else ""
        raise RecordError(f"{self.where}: {self.kind.__name__} record {what}{problem}; {LAYOUT_HINT}")

    def get(self, key: str, types: type | tuple[type, ...], *, optional: bool = False) -> Any:
        if key not in self.data:
            self.fail(key, "is missing")
        value = self.data[key]
        if value is None and optional:
            return None
        group = types if isinstance(types, tuple) else (types,)
        if isinstance(value, bool) and bool not in group and object not in group:
            self.fail(key, f"must be {_names(types)}, got a boolean")
        if not isinstance(value, types):
            self.fail(key, f"must be {_names(types)}{' or null' if optional else ''}, got {value!r:.80}")
        return value

    def str(self, key: str, *, optional: bool = False) -> Any:
        return self.get(key, str, optional=optional)

    def int(self, key: str, *, optional: bool = False) -> Any:
        return self.get(key, int, optional=optional)

    def number(self, key: str, *, optional: bool = False) -> Any:
        value = self.get(key, (int, float), optional=optional)
        return None if value is None else float(value)

    def strings(self, key: str, *, optional: bool = False) -> tuple[str, ...] | None:
        value = self.get(key, list, optional=optional)
        if value is None:
            return None
        if not all(isinstance(v, str) for v in value):
            self.fail(key, f"must be a list of strings, got {value!r:.80}")
        return tuple(value)

    def identity(self, keys: tuple[str, ...]) -> dict[str, Any]:
        """The run-identity fields; a line without them was written before run identity."""
        missing = [key for key in keys if key not in self.data]
        if missing:
            raise RecordError(f"{self.where}: {self.kind.__name__} record lacks {missing}: it was written "
                              "before run identity; opening its store with RunStore migrates it (or run "
                              "`python -m personalens_utils.store_migration RUN_DIR`)")
        return {key: self.str(key) for key in keys}

    def variant(self) -> Variant:
        """The stored variant (prompts and sample); a line without a set or sample is the kit's first."""
        return Variant.read(self.data, self.fail, PROMPT_SETS)

    def usage(self, key: str) -> Usage:
        value = self.get(key, dict)
        try:
            return Usage.from_dict(value)
        except (TypeError, ValueError):
            self.fail(key, f"must hold the four token counts of docs/architecture.md, got {value!r:.120}")

    def spending(self) -> dict[str, Any]:
        """What a record's calls cost (`spending_json`'s keys): usage, cost and retries."""
        return {"usage": self.usage("usage"), "cost_usd": self.number("cost_usd"),
                "retries": self.int("retries")}

    def turns(self, key: str) -> tuple[Message, ...]:
        value = self.get(key, list)
        out = []
        for index, turn in enumerate(value):
            if not (
                isinstance(turn, Mapping)
                and turn.get("role") in ("user", "assistant")
                and isinstance(turn.get("content"), str)
            ):
                self.fail(
                    key,
                    f"item {index} must be {{'role': 'user' or 'assistant', 'content': str}}, "
                    f"got {turn!r:.80}",
                )
            out.append(Message(turn["role"], turn["content"]))
        return tuple(out)


def spending_json(record: Any) -> dict[str, Any]:
    """The stored form of what a record's calls cost: its `usage`, `cost_usd` and `retries`, last on its
    line (read back by `_Reader.spending`)."""
    return {"usage": record.usage.to_dict(), "cost_usd": record.cost_usd, "retries": record.retries}


def _names(types: type | tuple[type, ...]) -> str:
    names = {
        "str": "a string",
        "int": "an integer",
        "float": "a number",
        "list": "a list",
        "dict": "an object",
        "bool": "true or false",
    }
    group = types if isinstance(types, tuple) else (types,)
    return " or ".join(dict.fromkeys(names.get(t.__name__, t.__name__) for t in group))


@dataclass(frozen=True, kw_only=True)
class Record:
    """One line of a run-store table. Subclasses set `table` and define the identity of `id`."""

    table: ClassVar[str]
    id: str = ""
    status: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A type that names its table enters the table registry (`stored_types`) as it is defined."""
        super().__init_subclass__(**kwargs)
        if "table" not in vars(cls):
            return
        known = _TABLES.setdefault(cls.table, cls)
        if known is not cls and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"{cls.__qualname__} names the table {cls.table!r}, which {known.__qualname__} "
                            "already stores; every record type needs its own table")
        _TABLES[cls.table] = cls

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", self.identity())

    def identity(self) -> str:
        """The id computed from the identity fields; types whose ids come from elsewhere need one given."""
        raise RecordError(f"a {type(self).__name__} record needs its id given")

    @property
    def is_error(self) -> bool:
        return self.status == ERROR

    @property
    def failure(self) -> str:
        """What an error record is about and why it failed, for a report's first errors."""
        return f"{self.id}: {getattr(self, 'error', None) or self.status}"

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        raise NotImplementedError

    @classmethod
    def read_id(cls, data: Any, where: str = "") -> str:
        """The id of a stored line, checked to be a non-empty string."""
        rid = _Reader(data, cls, where).str("id")
        if not rid:
            _Reader(data, cls, where).fail("id", "is empty")
        return rid


class _Varied:
    """A record holding a `Variant`, read by its parts as records were before it held one."""

    variant: Variant

    @property
    def prompt_version(self) -> str:
        return self.variant.prompt_version

    @property
    def prompt_set(self) -> str:
        return self.variant.prompt_set

    @property
    def sample(self) -> int:
        return self.variant.sample


# -- simulation ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Dialogue(Record, _Varied):
    """One simulated (or imported) dialogue. Status "terminated", "turn_cap" or "error"."""

    table: ClassVar[str] = "dialogues"
    summary_fields: ClassVar[tuple[str, ...]] = (
        "id", "scenario_id", "user_id", "task_id", "task_type", "domains", "user_model", "assistant_model",
        "assistant_setting", *STORED_KEYS, "backend", "user_backend", "user_model_id",
        "assistant_backend", "assistant_model_id", "status", "n_turns",
    )
    """The fields analysis reads: everything but the texts and the costs."""
    scenario_id: str
    user_id: int
    task_id: str
    task_type: str
    domains: tuple[str, ...]
    user_model: str
    assistant_model: str
    assistant_setting: str
    variant: Variant
    """Whose prompts made it (the user agent's and the assistant's) and which sample it is."""
    backend: str
    user_backend: str = ""
    """The user agent's backend; empty: `backend`."""
    user_model_id: str = ""
    """The id the user agent's backend is called with; empty: resolved from `user_model`."""
    assistant_backend: str = ""
    assistant_model_id: str = ""
    error: str | None = None
    turns: tuple[Message, ...] = ()
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    retries: int = 0

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

    def identity(self) -> str:
        return dialogue_id(self.scenario_id, self.assistant_setting,
                           user=Role(self.user_model, *self.user),
                           assistant=Role(self.assistant_model, *self.assistant),
                           variant=self.variant)

    @property
    def n_turns(self) -> int:
        """Turns as the paper counts them: user messages."""
        return sum(t.role == "user" for t in self.turns)

    def _repr_html_(self) -> str:
        """Who talked and how it ended, above the transcript as a chat (turns numbered by user message)."""
        summary = {name: getattr(self, name) for name in self.summary_fields if name != "id"}
        summary["error"] = self.error
        return fields_html({"id": self.id, **summary}) + chat_html((t.role, t.content) for t in self.turns)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scenario_id": self.scenario_id,
            "user_id": self.user_id,
            "task_id": self.task_id,
            "task_type": self.task_type,
            "domains": list(self.domains),
            "user_model": self.user_model,
            "assistant_model": self.assistant_model,
            "assistant_setting": self.assistant_setting,
            **self.variant.stored(),
            "backend": self.backend,
            "user_backend": self.user_backend,
            "user_model_id": self.user_model_id,
            "assistant_backend": self.assistant_backend,
            "assistant_model_id": self.assistant_model_id,
            "status": self.status,
            "error": self.error,
            "turns": [t.as_dict() for t in self.turns],
            "n_turns": self.n_turns,
            **spending_json(self),
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        r = _Reader(data, cls, where)
        turns = r.turns("turns")
        counted = sum(t.role == "user" for t in turns)
        if r.int("n_turns") != counted:
            r.fail("n_turns", f"is {data['n_turns']} but the turns hold {counted} user messages")
        identity = r.identity(("user_backend", "user_model_id", "assistant_backend", "assistant_model_id"))
        return cls(
            id=cls.read_id(data, where),
            scenario_id=r.str("scenario_id"),
            user_id=r.int("user_id"),
            task_id=r.str("task_id"),
            task_type=r.str("task_type"),
            domains=r.strings("domains") or (),
            user_model=r.str("user_model"),
            assistant_model=r.str("assistant_model"),
            assistant_setting=r.str("assistant_setting"),
            variant=r.variant(),
            backend=r.str("backend"),
            **identity,
            status=r.str("status"),
            error=r.str("error", optional=True),
            turns=turns,
            **r.spending(),
        )


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
    backend: str
    user_backend: str
    user_model_id: str
    assistant_backend: str
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


# -- judging ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Judgment(Record, _Varied):
    """One dimension's judgment of one dialogue. Status "ok", "missing" (no valid score) or "error"."""

    table: ClassVar[str] = "judgments"
    summary_fields: ClassVar[tuple[str, ...]] = (
        "id", "dialogue_id", "dimension", "judge_model", *STORED_KEYS, "backend",
        "judge_model_id", "status", "score", "turn_scores",
    )
    """The fields analysis reads: everything but the judge's texts."""
    dialogue_id: str
    dimension: str
    judge_model: str
    variant: Variant
    """Whose judge prompt it was given (turn-level personalization: always the kit's) and which judge
    sample it is."""
    backend: str
    """The judge's backend."""
    judge_model_id: str = ""
    """The id the judge's backend is called with; empty: resolved from `judge_model`."""
    score: float | None = None
    turn_scores: tuple[float | None, ...] | None = None
    explanation: str = ""
    raw: str = ""
    attempts: int = 0

    def __post_init__(self) -> None:
        if not self.judge_model_id:
            object.__setattr__(self, "judge_model_id", resolved_model(self.judge_model, self.backend))
        super().__post_init__()

    @property
    def failure(self) -> str:
        return f"dialogue {self.dialogue_id}, {self.dimension}: {self.explanation}"

    @property
    def judge(self) -> tuple[str, str]:
        """The judge's (backend, resolved model id)."""
        return self.backend, self.judge_model_id

    def identity(self) -> str:
        return judgment_id(self.dialogue_id, self.dimension, judge=Role(self.judge_model, *self.judge),
                           variant=self.variant)

    def _repr_html_(self) -> str:
        """The judgment's fields, then the full explanation (never cut) and the raw answer folded."""
        fields = {name: getattr(self, name) for name in self.summary_fields}
        fields["attempts"] = self.attempts
        explanation = f'<div class="pl-explanation">{esc(self.explanation)}</div>'
        raw = f'<summary>raw answer</summary><div class="pl-explanation pl-muted">{esc(self.raw)}</div>'
        return inline(f"{fields_html(fields)}{explanation}<details>{raw}</details>")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dialogue_id": self.dialogue_id,
            "dimension": self.dimension,
            "judge_model": self.judge_model,
            **self.variant.stored(),
            "backend": self.backend,
            "judge_model_id": self.judge_model_id,
            "status": self.status,
            "score": self.score,
            "turn_scores": None if self.turn_scores is None else list(self.turn_scores),
            "explanation": self.explanation,
            "raw": self.raw,
            "attempts": self.attempts,
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        r = _Reader(data, cls, where)
        turns = r.get("turn_scores", list, optional=True)
        if turns is not None and not all(s is None or isinstance(s, int | float) for s in turns):
            r.fail("turn_scores", f"must be a list of numbers or nulls, got {turns!r:.80}")
        return cls(
            id=cls.read_id(data, where),
            dialogue_id=r.str("dialogue_id"),
            dimension=r.str("dimension"),
            judge_model=r.str("judge_model"),
            variant=r.variant(),
            backend=r.str("backend"),
            **r.identity(("judge_model_id",)),
            status=r.str("status"),
            score=r.number("score", optional=True),
            turn_scores=None if turns is None else tuple(None if s is None else float(s) for s in turns),
            explanation=r.str("explanation"),
            raw=r.str("raw"),
            attempts=r.int("attempts"),
        )


@dataclass(frozen=True, kw_only=True)
class Blame(Record, _Varied):
    """Which party caused one dialogue's failure, as a reviewer read it (`validity.blame`). Status "ok",
    "missing" (the answer was never read) or "error"; `party` and `fault` are None unless "ok"."""

    table: ClassVar[str] = "blames"
    dialogue_id: str
    reviewer_model: str
    variant: Variant
    """The reviewer prompt's set and version."""
    backend: str
    """The reviewer's backend."""
    reviewer_model_id: str = ""
    """The id the reviewer's backend is called with; empty: resolved from `reviewer_model`."""
    judge_model: str
    """The judge whose verdicts were reviewed (its key), its backend and resolved id."""
    judge_backend: str
    judge_model_id: str
    party: str | None = None
    fault: str | None = None
    turn: int | None = None
    """The number (from 1) of the message that shows the fault; None when the reviewer named none."""
    explanation: str = ""
    raw: str = ""
    attempts: int = 0

    def __post_init__(self) -> None:
        if not self.reviewer_model_id:
            object.__setattr__(self, "reviewer_model_id", resolved_model(self.reviewer_model, self.backend))
        super().__post_init__()

    @property
    def failure(self) -> str:
        return f"dialogue {self.dialogue_id}, review: {self.explanation}"

    def identity(self) -> str:
        reviewer = Role(self.reviewer_model, self.backend, self.reviewer_model_id)
        judge = Role(self.judge_model, self.judge_backend, self.judge_model_id)
        return blame_id(self.dialogue_id, reviewer=reviewer, judge=judge, variant=self.variant)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dialogue_id": self.dialogue_id,
            "reviewer_model": self.reviewer_model,
            **self.variant.stored(),
            "backend": self.backend,
            "reviewer_model_id": self.reviewer_model_id,
            "judge_model": self.judge_model,
            "judge_backend": self.judge_backend,
            "judge_model_id": self.judge_model_id,
            "status": self.status,
            "party": self.party,
            "fault": self.fault,
            "turn": self.turn,
            "explanation": self.explanation,
            "raw": self.raw,
            "attempts": self.attempts,
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        r = _Reader(data, cls, where)
        return cls(
            id=cls.read_id(data, where),
            dialogue_id=r.str("dialogue_id"),
            reviewer_model=r.str("reviewer_model"),
            variant=r.variant(),
            backend=r.str("backend"),
            reviewer_model_id=r.str("reviewer_model_id"),
            judge_model=r.str("judge_model"),
            judge_backend=r.str("judge_backend"),
            judge_model_id=r.str("judge_model_id"),
            status=r.str("status"),
            party=r.str("party", optional=True),
            fault=r.str("fault", optional=True),
            turn=r.int("turn", optional=True),
            explanation=r.str("explanation"),
            raw=r.str("raw"),
            attempts=r.int("attempts"),
        )


# -- validation --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ConsistencyCheck(Record):
    """The consistency check of one profile. Status "ok", "missing" (answer never read) or "error"."""

    table: ClassVar[str] = "consistency"
    user_id: int
    model: str
    backend: str
    prompt_version: str
    within_domain: int | None = None
    cross_domain: int | None = None
    domains: tuple[str, ...] | None = None
    explanation: str | None = None
    problem: str | None = None
    raw: str = ""
    attempts: int = 0

    @property
    def failure(self) -> str:
        return f"user {self.user_id}: {self.problem or self.status}"

    @staticmethod
    def make_id(user_id: int, model: str, backend: str, prompt_version: str) -> str:
        return stable_id(user_id, model, backend, prompt_version)

    def identity(self) -> str:
        return self.make_id(self.user_id, self.model, self.backend, self.prompt_version)

    @property
    def label(self) -> int | None:
        """1 when the profile has a conflict of either kind; None when the answer was not read."""
        if self.within_domain is None or self.cross_domain is None:
            return None
        return max(self.within_domain, self.cross_domain)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "model": self.model,
            "backend": self.backend,
            "prompt_version": self.prompt_version,
            "status": self.status,
            "label": self.label,
            "within_domain": self.within_domain,
            "cross_domain": self.cross_domain,
            "domains": None if self.domains is None else list(self.domains),
            "explanation": self.explanation,
            "problem": self.problem,
            "raw": self.raw,
            "attempts": self.attempts,
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        r = _Reader(data, cls, where)
        return cls(
            id=cls.read_id(data, where),
            user_id=r.int("user_id"),
            model=r.str("model"),
            backend=r.str("backend"),
            prompt_version=r.str("prompt_version"),
            status=r.str("status"),
            within_domain=r.int("within_domain", optional=True),
            cross_domain=r.int("cross_domain", optional=True),
            domains=r.strings("domains", optional=True),
            explanation=r.str("explanation", optional=True),
            problem=r.str("problem", optional=True),
            raw=r.str("raw"),
            attempts=r.int("attempts"),
        )


# -- generation ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GenerationStep(Record):
    """One generation step's result (status "ok" with its parsed `value`, or "error" with the reasons).

    Each step has its own table; `about` holds what the step is about (user, domain, task), under
    the keys `about_keys` of its type. The id mixes everything that changes the answer, some of it
    not kept in the record, so it is made by the caller (`make_id`).
    """

    table: ClassVar[str]
    step: ClassVar[str]
    about_keys: ClassVar[tuple[str, ...]]
    about: Mapping[str, Any]
    value: Any = None
    raw: str | None = None
    error: str | None = None
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    backend: str
    model: str
    prompt_version: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if sorted(self.about) != sorted(self.about_keys):
            raise RecordError(
                f"a {self.step} step is about {list(self.about_keys)}, got {sorted(self.about)}"
            )

    @property
    def failure(self) -> str:
        about = ", ".join(f"{k} {self.about[k]}" for k in self.about_keys)
        return f"{self.step} ({about}): {self.error or self.status}"

    @staticmethod
    def make_id(step: str, key: Sequence[Any], backend: str, model: str, prompt_version: str) -> str:
        return stable_id(step, *key, backend, model, prompt_version)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            **{k: self.about[k] for k in self.about_keys},
            "value": self.value,
            "raw": self.raw,
            "error": self.error,
            "attempts": self.attempts,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "step": self.step,
            "backend": self.backend,
            "model": self.model,
            "prompt_version": self.prompt_version,
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        r = _Reader(data, cls, where)
        if r.str("step") != cls.step:
            r.fail("step", f"is {data['step']!r} in the table of step {cls.step!r}")
        for key in cls.about_keys:
            r.get(key, object)
        return cls(
            id=cls.read_id(data, where),
            status=r.str("status"),
            about={k: data[k] for k in cls.about_keys},
            value=r.get("value", object, optional=True),
            raw=r.str("raw", optional=True),
            error=r.str("error", optional=True),
            attempts=r.int("attempts"),
            input_tokens=r.int("input_tokens"),
            output_tokens=r.int("output_tokens"),
            cost_usd=r.number("cost_usd"),
            backend=r.str("backend"),
            model=r.str("model"),
            prompt_version=r.str("prompt_version"),
        )


class MaskStep(GenerationStep):
    table = "generation_mask"
    step = "mask"
    about_keys = ("user_id",)


class PreferencesStep(GenerationStep):
    table = "generation_preferences"
    step = "preferences"
    about_keys = ("user_id", "domain")


class InteractionsStep(GenerationStep):
    table = "generation_interactions"
    step = "interactions"
    about_keys = ("user_id", "domain")


class SdTasksStep(GenerationStep):
    table = "generation_sd_tasks"
    step = "sd_tasks"
    about_keys = ("domain",)


class MdTasksStep(GenerationStep):
    table = "generation_md_tasks"
    step = "md_tasks"
    about_keys = ("domains", "first_task")


class SituationStep(GenerationStep):
    table = "generation_situation"
    step = "situation"
    about_keys = ("user_id", "task_id")


GENERATION_STEPS: dict[str, type[GenerationStep]] = {
    t.step: t for t in (SdTasksStep, MdTasksStep, MaskStep, PreferencesStep, InteractionsStep, SituationStep)
}


# -- Message Batches -------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Batch(Record):
    """A batch the provider accepted: its id (the provider's) and custom_id -> the caller's key."""

    table: ClassVar[str] = "batches"
    status: str = "submitted"
    backend: str
    submitted_at: str
    entries: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "backend": self.backend,
            "submitted_at": self.submitted_at,
            "entries": dict(self.entries),
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        r = _Reader(data, cls, where)
        entries = r.get("entries", dict)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in entries.items()):
            r.fail("entries", "must map custom_id strings to key strings")
        return cls(
            id=cls.read_id(data, where),
            backend=r.str("backend"),
            submitted_at=r.str("submitted_at"),
            entries=dict(entries),
        )


@dataclass(frozen=True, kw_only=True)
class BatchEntry(Record):
    """One answered entry of an ended batch (id = its custom_id). `status` is the entry's outcome:
    "succeeded" (with text, model, usage and cost at batch prices), "errored", "expired" or "canceled"."""

    table: ClassVar[str] = "batch_results"
    key: str
    batch_id: str
    backend: str
    error: str | None = None
    retryable: bool = True
    text: str | None = None
    model: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "key": self.key,
            "batch_id": self.batch_id,
            "outcome": self.status,
            "backend": self.backend,
            "error": self.error,
            "retryable": self.retryable,
        }
        if self.succeeded:
            out.update(
                text=self.text,
                model=self.model,
                usage=(self.usage or Usage()).to_dict(),
                cost_usd=self.cost_usd,
            )
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        r = _Reader(data, cls, where)
        outcome = r.str("outcome")
        answer: dict[str, Any] = {}
        if outcome == "succeeded":
            answer = {
                "text": r.str("text"),
                "model": r.str("model"),
                "usage": r.usage("usage"),
                "cost_usd": r.number("cost_usd", optional=True),
            }
        return cls(
            id=cls.read_id(data, where),
            key=r.str("key"),
            batch_id=r.str("batch_id"),
            status=outcome,
            backend=r.str("backend"),
            error=r.str("error", optional=True),
            retryable=r.get("retryable", bool),
            **answer,
        )


RECORD_TYPES: tuple[type[Record], ...] = (
    Dialogue,
    Judgment,
    Blame,
    ConsistencyCheck,
    *GENERATION_STEPS.values(),
    Batch,
    BatchEntry,
)
"""The record types of the dialogue pipeline defined here; `stored_types` adds those of other modules."""


def stored_types() -> tuple[type[Record], ...]:
    """Every record type a run store may hold, one per table: the table registry, which tools that must
    see every table (`store.merge_stores`) read, so a new record type is covered where it is defined.
    `RECORD_TYPES` first, then the others by table name."""
    for module in RECORD_MODULES:
        importlib.import_module(module)
    others = sorted((kind for kind in _TABLES.values() if kind not in RECORD_TYPES), key=lambda k: k.table)
    return (*RECORD_TYPES, *others)


def record_type(table: str) -> type[Record]:
    """The record type stored in a table, by the table's name."""
    kinds = stored_types()
    for kind in kinds:
        if kind.table == table:
            return kind
    known = [kind.table for kind in kinds]
    raise RecordError(f"no record type is stored in a table named {table!r}; known: {known}")


__all__ = [
    "ERROR",
    "GENERATION_STEPS",
    "KIT_PROMPTS",
    "OFFICIAL_PROMPTS",
    "RECORD_TYPES",
    "Batch",
    "BatchEntry",
    "Blame",
    "ConsistencyCheck",
    "Dialogue",
    "GenerationStep",
    "InteractionsStep",
    "Judgment",
    "MaskStep",
    "MdTasksStep",
    "PreferencesStep",
    "Record",
    "RecordError",
    "SdTasksStep",
    "SituationStep",
    "record_type",
    "resolved_model",
    "stable_id",
    "stored_types",
]
