"""The record of the validation stage: one profile's consistency check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from personalens_utils.base.stored import BackendName
from personalens_utils.runstore.identity import stable_id
from personalens_utils.runstore.records.base import Record


@dataclass(frozen=True, kw_only=True)
class ConsistencyCheck(Record):
    """The consistency check of one profile. Status "ok", "missing" (answer never read) or "error"."""

    table: ClassVar[str] = "consistency"
    layout: ClassVar[tuple[str, ...]] = (
        "id", "user_id", "model", "backend", "prompt_version", "status", "label",
    )
    derived: ClassVar[Mapping[str, str]] = {"label": "the within- and cross-domain answers give {}"}
    user_id: int
    model: str
    backend: BackendName
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
    def make_id(user_id: int, model: str, backend: BackendName, prompt_version: str) -> str:
        return stable_id(user_id, model, backend, prompt_version)

    def identity(self) -> str:
        return self.make_id(self.user_id, self.model, self.backend, self.prompt_version)

    @property
    def label(self) -> int | None:
        """1 when the profile has a conflict of either kind; None when the answer was not read."""
        if self.within_domain is None or self.cross_domain is None:
            return None
        return max(self.within_domain, self.cross_domain)
