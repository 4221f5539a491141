"""Which dialogues people label: a seeded sample of finished dialogues, simple or stratified, and its
design (`SampleDesign`), recorded in the annotation manifest so an estimator can weight each label by
the inverse of its chance of being drawn."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from personalens_utils.judging import JUDGEABLE_STATUSES
from personalens_utils.labels import AnnotationError
from personalens_utils.runstore.columnar import Columnar
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore


@dataclass(frozen=True)
class Stratum:
    """One stratum of an annotation sample: its value of the stratifying field, how many finished
    dialogues it held when the sample was drawn (None in manifests written before designs were
    recorded) and the dialogues drawn from it."""

    value: Any
    population: int | None
    dialogue_ids: tuple[str, ...]

    @property
    def probability(self) -> float:
        """The chance each of the stratum's dialogues had of being drawn (a simple random sample)."""
        if not self.population:
            raise AnnotationError(f"stratum {self.value!r}: the manifest does not record how many dialogues "
                                  "it was drawn from")
        return len(self.dialogue_ids) / self.population


@dataclass(frozen=True)
class SampleDesign:
    """How an annotation sample was drawn, recorded in its manifest so an estimator can weight each
    label by the inverse of its chance of being drawn: a simple random sample of the pool (`by` None,
    one stratum), or one simple random sample per value of the field `by` (e.g. `assistant_model`)."""

    by: str | None
    strata: tuple[Stratum, ...]

    @property
    def kind(self) -> str:
        return "simple" if self.by is None else "stratified"

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> SampleDesign:
        """The manifest's design; a manifest from before designs were recorded held a simple random
        sample (the only kind drawn then), of a pool whose size it did not record."""
        design = manifest.get("design")
        if design is None:
            return cls(None, (Stratum(None, None, tuple(manifest["dialogue_ids"])),))
        try:
            return msgspec.convert(design, cls)
        except msgspec.ValidationError as exc:
            raise AnnotationError(f"the manifest's sample design is malformed ({exc}); "
                                  "export the sample again to another folder") from exc

    def weights(self, dialogue_ids: Sequence[str]) -> np.ndarray:
        """Inverse-probability weights of labelled dialogues (1 for every one of a simple sample)."""
        if self.by is None:
            chance = {}
        else:
            chance = {did: 1 / s.probability for s in self.strata for did in s.dialogue_ids}
        drawn = {did for s in self.strata for did in s.dialogue_ids}
        stray = [did for did in dialogue_ids if did not in drawn]
        if stray:
            raise AnnotationError(f"{len(stray)} labelled dialogue(s) are not in the sample's design, e.g. "
                                  f"{stray[0]!r}: rate only the exported sheet's dialogues")
        return np.array([chance.get(did, 1.0) for did in dialogue_ids], dtype=float)


def allocate(n: int, sizes: Sequence[int]) -> list[int]:
    """`n` draws shared equally among strata of `sizes` (the first strata get one more when it does not
    divide), none given more than it holds; what a small stratum cannot take goes to the others."""
    counts = [0] * len(sizes)
    left = min(n, sum(sizes))
    while left:
        room = [i for i, size in enumerate(sizes) if counts[i] < size]
        share, extra = divmod(left, len(room))
        for rank, i in enumerate(room):
            take = min(share + (rank < extra), sizes[i] - counts[i])
            counts[i] += take
            left -= take
    return counts


def shared_equally(n: int, strata: int) -> int:
    """Each stratum's draw when `n` is shared equally among `strata` drawn apart: rounded up, so the
    sample holds at least `n` (fewer only when strata hold fewer dialogues)."""
    return -(-n // strata) if strata else 0


def draw_sample(
    store: RunStore, n: int = 100, *, seed: int = 0, where: Mapping[str, Any] | None = None,
    stratify_by: str | None = None, apart: bool = False,
) -> tuple[list[dict[str, Any]], SampleDesign]:
    """A seeded random sample of finished dialogues (all of them if fewer than `n`) and its design.

    `where` keeps only dialogues whose fields equal the given values (e.g. one setting); `stratify_by`
    names a field whose every value gets its own simple random sample, `n` shared equally among them
    (`allocate`), so e.g. every assistant gets as many labels. `apart` draws each stratum on its own:
    `shared_equally(n, strata)` dialogues (all it holds if fewer) by a generator seeded with `seed` and
    the stratum's value, so a stratum added to the pool (a new assistant) never changes which
    dialogues another stratum gets, as long as each stratum's count stays the same.
    """
    where = dict(where or {})
    with Columnar(store, tables=[Dialogue]) as cols:
        fields = list(cols.sql("SELECT * FROM dialogues LIMIT 0").columns)
        for key, value in [*where.items(), *([(stratify_by, "each value")] if stratify_by else [])]:
            if key not in fields:
                raise AnnotationError(f"cannot sample dialogues by {key!r} = {value!r}: {key!r} is not "
                                      f"one of the fields a sample can be chosen by {sorted(fields)}")
        chosen_by = list(dict.fromkeys([*where, *([stratify_by] if stratify_by else [])]))
        columns = ", ".join(["id", "_source", "_offset", "_length", *chosen_by])
        pool = cols.sql(f"SELECT {columns} FROM dialogues "
                        "WHERE status IN (SELECT unnest(?)) ORDER BY id", [list(JUDGEABLE_STATUSES)])
        for key, value in where.items():
            pool = pool[pool[key] == value]
        rng = random.Random(seed)
        if stratify_by is None:
            chosen = pool.iloc[rng.sample(range(len(pool)), min(n, len(pool)))]
            design = SampleDesign(None, (Stratum(None, len(pool), tuple(chosen["id"])),))
        else:
            groups = list(pool.groupby(stratify_by, sort=True))
            if apart:
                each = shared_equally(n, len(groups))
                picks = [part.iloc[random.Random(f"{seed}:{_plain(value)}").sample(range(len(part)),
                                                                                   min(each, len(part)))]
                         for value, part in groups]
            else:
                counts = allocate(n, [len(part) for _, part in groups])
                picks = [part.iloc[rng.sample(range(len(part)), k)]
                         for (_, part), k in zip(groups, counts, strict=True)]
            chosen = pd.concat(picks) if picks else pool.iloc[:0]
            design = SampleDesign(stratify_by, tuple(
                Stratum(_plain(value), len(part), tuple(pick["id"]))
                for (value, part), pick in zip(groups, picks, strict=True)))
        return list(cols.lines(Dialogue, chosen)), design


def _plain(value: Any) -> Any:
    """A stratum's value as JSON writes it (numpy integers read from the store become ints)."""
    return value.item() if isinstance(value, np.generic) else value


def sample_dialogues(
    store: RunStore, n: int = 100, *, seed: int = 0, where: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """A seeded simple random sample of finished dialogues (`draw_sample` without its design)."""
    return draw_sample(store, n, seed=seed, where=where)[0]


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        manifest = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise AnnotationError(f"{path}: cannot read the annotation manifest ({exc})") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("dialogue_ids"), list):
        raise AnnotationError(f"{path}: not an annotation manifest (no 'dialogue_ids' list)")
    return manifest
