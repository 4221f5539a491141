"""What a record is a version of: whose prompts made it and which repetition it is (`Variant`).

It lives with the prompt sets, which hand one to every record they make, and below the run store, whose
ids (`runstore.identity`) take it in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from personalens_utils.base.errors import KitError
from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS


class IdentityError(KitError, ValueError):
    """A record identity that cannot be: a sample index that is not a whole number from 0, a count of
    samples below 1, a prompt set not on offer."""


PROMPT_VERSION, PROMPT_SET, SAMPLE = "prompt_version", "prompt_set", "sample"
"""The keys a record's variant is stored under (`Variant.stored`)."""


@dataclass(frozen=True)
class Variant:
    """Which version of the same work a record is: whose prompts made it (the prompt set and its
    version) and which sample (the k-th independent repetition; 0 is a run's first).

    Records hold one and store it through `stored`/`read`; ids take it through `parts`, so a kit
    record of sample 0 keeps the id and the line it had before prompt sets and samples existed.
    """

    prompt_version: str
    prompt_set: str = KIT_PROMPTS
    sample: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.sample, bool) or not isinstance(self.sample, int) or self.sample < 0:
            raise IdentityError(f"a sample index is a whole number from 0, got {self.sample!r}")

    @property
    def kit(self) -> bool:
        """Made with the kit's own prompts."""
        return self.prompt_set == KIT_PROMPTS

    @property
    def label(self) -> str:
        """The prompts in words, e.g. "kit v1" (with the sample when not the first)."""
        return f"{self.prompt_set} {self.prompt_version}" + (f", sample {self.sample}" if self.sample else "")

    def same_set(self, other: Variant) -> bool:
        """Made with the same prompt set as `other` (whatever the version or sample)."""
        return self.prompt_set == other.prompt_set

    def at(self, sample: int) -> Variant:
        """The same prompts, another sample."""
        return replace(self, sample=sample)

    def parts(self, parts: tuple[Any, ...]) -> tuple[Any, ...]:
        """Id parts with the prompt set (unless the kit's) and the sample index (unless 0) added."""
        if not self.kit:
            parts = (*parts, PROMPT_SET, self.prompt_set)
        return parts if self.sample == 0 else (*parts, SAMPLE, self.sample)

    def stored(self) -> dict[str, Any]:
        """The stored keys of a dialogue or judgment: the version; the set unless the kit's; the sample
        unless 0 (so lines written before prompt sets and samples are the lines written now)."""
        return {PROMPT_VERSION: self.prompt_version, **({} if self.kit else {PROMPT_SET: self.prompt_set}),
                **({SAMPLE: self.sample} if self.sample else {})}

    def stored_in_full(self) -> dict[str, Any]:
        """The stored keys of a PERSONA Bench prediction: set and version always (sample 0 only)."""
        return {PROMPT_SET: self.prompt_set, PROMPT_VERSION: self.prompt_version}

    @classmethod
    def read(cls, data: Mapping[str, Any], fail: Callable[[str, str], NoReturn],
             known: Iterable[str]) -> Variant:
        """The variant of a stored line (`stored`'s layout); `fail(key, problem)` names the place of a
        key that does not fit, and `known` are the prompt sets a record may name."""
        known = list(known)
        version = data.get(PROMPT_VERSION)
        if not isinstance(version, str):
            fail(PROMPT_VERSION, f"must be a string, got {version!r:.80}" if PROMPT_VERSION in data
                 else "is missing")
        prompts = data.get(PROMPT_SET, KIT_PROMPTS)
        if prompts not in known:
            fail(PROMPT_SET, f"must be one of {known} (or absent: kit), got {prompts!r:.80}")
        sample = data.get(SAMPLE, 0)
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
            fail(SAMPLE, f"must be a whole number from 0 (or absent: 0), got {sample!r:.80}")
        return cls(version, prompts, sample)
