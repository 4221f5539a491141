"""The records of Message Batches: a batch the provider accepted, and each answered entry of an ended one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from personalens_utils.base.stored import BackendName
from personalens_utils.llm.types import Usage
from personalens_utils.runstore.records.base import (
    Form,
    Record,
    _reads,
    builtin,
    renamed,
    unless_empty,
    unstored,
)

SUCCEEDED = "succeeded"
OUTCOME = "outcome"
"""The key an entry's status is stored under."""


def _answer(key: str, kind: Any) -> Form:
    """A field of an entry's answer: stored, and read, only when the entry succeeded."""
    read = _reads(key, kind)
    return Form(lambda entry, value: {key: builtin(value)} if entry.succeeded else {},
                lambda r: read(r) if r.data.get(OUTCOME) == SUCCEEDED else None, {key: kind})


@dataclass(frozen=True, kw_only=True)
class Batch(Record):
    """A batch the provider accepted: its id (the provider's) and custom_id -> the caller's key."""

    table: ClassVar[str] = "batches"
    status: str = field(default="submitted", metadata=unstored("submitted").meta())
    backend: BackendName
    submitted_at: str
    entries: Mapping[str, str]


@dataclass(frozen=True, kw_only=True)
class BatchEntry(Record):
    """One answered entry of an ended batch (id = its custom_id). `status` is the entry's outcome:
    "succeeded" (with text, model, usage and cost at batch prices), "errored", "expired" or "canceled"."""

    table: ClassVar[str] = "batch_results"
    layout: ClassVar[tuple[str, ...]] = ("id", "key", "batch_id", "status")
    status: str = field(metadata=renamed(OUTCOME, str).meta())
    key: str
    batch_id: str
    backend: BackendName
    error: str | None = None
    retryable: bool = True
    text: str | None = field(default=None, metadata=_answer("text", str).meta())
    model: str | None = field(default=None, metadata=_answer("model", str).meta())
    usage: Usage | None = field(default=None, metadata=_answer("usage", Usage).meta())
    cost_usd: float | None = field(default=None, metadata=_answer("cost_usd", float | None).meta())
    cut_off: bool = field(default=False, metadata=unless_empty("cut_off", bool, False).meta())
    """The answer stopped at the token limit (`Response.cut_off`); stored only when true."""

    @property
    def succeeded(self) -> bool:
        return self.status == SUCCEEDED
