"""Splitting one run across machines: `shard="i/n"` picks a fixed part of the work by id hash.

A unit of work (a dialogue, or the judgments of one dialogue) belongs to shard i of n when a hash
of its stable id falls in that slot, so every machine computes the same split with no coordination,
the split does not change when other work is added, and all judgments of a dialogue land on the
machine that may have simulated it. Each machine writes its own run folder; `store.merge_stores`
joins them afterwards.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from personalens_utils.base.errors import KitError

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardError(KitError, ValueError):
    """A shard specification that cannot be read."""


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ShardError(f"shard {self.index}/{self.count} does not exist: use i/n with 1 <= i <= n")

    @classmethod
    def parse(cls, spec: str | Shard | None) -> Shard | None:
        """`"2/4"` (the second of four shards), a `Shard`, or None (no sharding)."""
        if spec is None or isinstance(spec, Shard):
            return spec
        match = _SPEC.match(spec) if isinstance(spec, str) else None
        if match is None:
            raise ShardError(f"cannot read shard {spec!r}: write it as 'i/n', e.g. '1/4' for the first of 4")
        return cls(int(match[1]), int(match[2]))

    def owns(self, record_id: str) -> bool:
        """Whether the unit with this stable id is this shard's work."""
        return slot(record_id, self.count) == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def slot(record_id: str, count: int) -> int:
    """0-based slot of an id among `count` shards: the first 8 bytes of its SHA-256, modulo `count`."""
    digest = hashlib.sha256(record_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count
