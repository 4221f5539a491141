"""Every record's identity, in one place: the id of a dialogue or a judgment is computed from what
changes it, and from nothing else.

A dialogue: its scenario, the assistant setting, the prompt set and its version, each role's model
name, backend and resolved model id (the id the backend is called with, and where it is served when
that decides which model answers: an OpenAI-compatible server other than OpenAI's API, `llm.endpoints`),
a sample index (the k-th repetition of the same work; sample 0 is a run's first, and gives the ids
records always had), and the user agent's style unless it is the paper's (`prompt_templates.user_styles`).
A judgment: the dialogue, the dimension, the judge's model name, backend and resolved id, the judge
prompt set and version, and a sample index. Records made with the kit's prompts leave the prompt set
out of their id, so ids written before prompt sets existed are still the ids computed here.

What a record is a version of (prompt set, prompt version, sample) is one value, a `Variant`: records
hold it and store it through it (a set other than the kit's is stored right after the version, a
sample other than 0 after that; a kit record of sample 0 stores neither), and analysis reads it from
the columns `DIALOGUE_COLUMNS` and `JUDGE_COLUMNS` name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from personalens_utils.llm.role import Role
from personalens_utils.outputs.frames import fill_missing
from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS
from personalens_utils.prompt_sets.variant import (
    PROMPT_SET,
    PROMPT_VERSION,
    SAMPLE,
    IdentityError,
    Variant,
)
from personalens_utils.prompt_templates.user_styles import COOPERATIVE


def stable_id(*parts: Any) -> str:
    """A short id that depends only on the given parts (order matters)."""
    raw = orjson.dumps([str(p) for p in parts])
    return hashlib.sha256(raw).hexdigest()[:20]


def samples(count: int, parameter: str) -> range:
    """The sample indices 0..count-1 of a run asked for `count` independent repetitions (`repeats`,
    `judge_samples`); a count that is not a whole number of at least 1 is refused, naming `parameter`."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise IdentityError(f"{parameter} must be a whole number of at least 1 (independent repetitions "
                            f"of the same work), got {count!r}")
    return range(count)


@dataclass(frozen=True)
class VariantColumns:
    """Where an analysis frame holds one role's variant: the columns of its prompt version, prompt set
    and sample (rows of records that stored none read as the kit's prompts and sample 0)."""

    prompt_version: str
    prompt_set: str
    sample: str

    def renames(self) -> dict[str, str]:
        """Stored key -> this role's column, for `DataFrame.rename`."""
        return {PROMPT_VERSION: self.prompt_version, PROMPT_SET: self.prompt_set, SAMPLE: self.sample}

    def fill(self, frame: Any) -> None:
        """Give rows without a stored set or sample the ones they read as (in place, a DataFrame; a
        column no row stored is added)."""
        for column, default in ((self.prompt_set, KIT_PROMPTS), (self.sample, 0)):
            frame[column] = fill_missing(frame[column], default) if column in frame else default
        frame[self.sample] = frame[self.sample].astype(int)


USER_STYLE = "user_style"
"""The key a dialogue's user-agent style is stored under, its id part's label and its frame column."""
STORED_KEYS = (PROMPT_VERSION, PROMPT_SET, SAMPLE)
"""The variant's keys in a stored line, in their order."""
STORED_COLUMNS = VariantColumns(*STORED_KEYS)
"""The variant in a frame of a table's lines as stored (`RunStore.frame`)."""
DIALOGUE_COLUMNS = VariantColumns("dialogue_prompt_version", "dialogue_prompt_set", "sample")
"""The simulation's variant in the tidy score frame: `sample` is the dialogue's repetition."""
JUDGE_COLUMNS = VariantColumns("judge_prompt_version", "judge_prompt_set", "judge_sample")
"""The judge's variant in the tidy score frame: `judge_sample` is the judgment's repetition."""
DIALOGUE_PROMPTS, JUDGE_PROMPTS = DIALOGUE_COLUMNS.prompt_set, JUDGE_COLUMNS.prompt_set


def dialogue_id(scenario_id: str, setting: str, *, user: Role, assistant: Role, variant: Variant) -> str:
    """The run-store id of a dialogue."""
    parts = (scenario_id, user.model, assistant.model, setting, variant.prompt_version,
             user.backend, user.model_id, assistant.backend, assistant.model_id)
    return stable_id(*_styled(variant.parts(parts), user))


def judgment_id(dialogue_id: str, dimension: str, *, judge: Role, variant: Variant) -> str:
    """The run-store id of one judgment; `judge.model` is the judge's key (its registry name), `variant`
    the judge prompts' and the judge sample."""
    parts = (dialogue_id, dimension, judge.model, variant.prompt_version, judge.backend, judge.model_id)
    return stable_id(*variant.parts(parts))


def blame_id(dialogue_id: str, *, reviewer: Role, judge: Role, variant: Variant) -> str:
    """The run-store id of a failure review: the dialogue, the reviewer, the judge whose verdicts it
    read (another judge's verdicts make another review) and the reviewer prompts' variant."""
    parts = (dialogue_id, "blame", reviewer.model, reviewer.backend, reviewer.model_id, judge.model,
             judge.backend, judge.model_id, variant.prompt_version)
    return stable_id(*variant.parts(parts))


def judgment_id_tail(dimension: str, *, judge: Role, variant: Variant) -> str:
    """What `judgment_id` hashes after the dialogue id, the same for every dialogue: `stable_id` hashes
    `[` + the JSON string of the dialogue id + this (a planner over many dialogues encodes it once)."""
    parts = ("", dimension, judge.model, variant.prompt_version, judge.backend, judge.model_id)
    return _tail(variant.parts(parts))


def judgment_ids(dimension: str, *, judge: Role, variant: Variant) -> Callable[[str], str]:
    """`judgment_id` of any dialogue on one dimension by one judge and variant: the same ids, with the
    parts they share encoded once (`judgment_id_tail`)."""
    return _ids_after(judgment_id_tail(dimension, judge=judge, variant=variant))


def dialogue_ids(setting: str, *, user: Role, assistant: Role, variant: Variant) -> Callable[[str], str]:
    """`dialogue_id` of any scenario in one setting with these roles and variant: the same ids, with the
    parts they share encoded once."""
    parts = ("", user.model, assistant.model, setting, variant.prompt_version, user.backend, user.model_id,
             assistant.backend, assistant.model_id)
    return _ids_after(_tail(_styled(variant.parts(parts), user)))


def _styled(parts: tuple[Any, ...], user: Role) -> tuple[Any, ...]:
    """Dialogue id parts with the user agent's style added unless it is cooperative, so the ids of the
    paper's user agent are the ids dialogues always had."""
    return parts if user.style == COOPERATIVE else (*parts, USER_STYLE, user.style)


def _tail(parts: tuple[Any, ...]) -> str:
    """The JSON `stable_id` hashes for `parts`, after the first part's string."""
    return "," + orjson.dumps([str(p) for p in parts[1:]])[1:].decode()


def _ids_after(tail: str) -> Callable[[str], str]:
    """`stable_id` of a first part followed by the parts encoded in `tail`."""
    shared = tail.encode()
    return lambda first: hashlib.sha256(b"[" + orjson.dumps(str(first)) + shared).hexdigest()[:20]


def variant_named(name: str, variants: Sequence[Variant]) -> Variant:
    """The one of `variants` made with the prompt set `name`; another name is refused, naming them."""
    for variant in variants:
        if variant.prompt_set == name:
            return variant
    known = " or ".join(repr(v.prompt_set) for v in variants)
    raise IdentityError(f"prompt_set must be {known}, got {name!r}")


def item_key(dataset: str, variant: Variant, task: str, setting: str, target: str) -> str:
    """A PERSONA Bench item's identity in its dataset: the kit's and the authors' items differ."""
    return stable_id(dataset, variant.prompt_set, task, setting, target)


def prediction_id(item: str, model: Role, variant: Variant) -> str:
    """The run-store id of a model's answer to a PERSONA Bench item (`item`: its `item_key`)."""
    return stable_id(item, model.model, model.backend, model.model_id, variant.prompt_version)
