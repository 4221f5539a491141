"""The id of each table and figure a notebook writes, declared once beside the notebook's stage (its
session facade), read by the save call that names the files and by the index of a reproduction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Kind = Literal["table", "figure"]


@dataclass(frozen=True)
class OutputId:
    """One table or figure of a notebook: its files are `<kind><number>_<slug>[_<part>]`.

    The id belongs to a notebook's use of a table function, not to the function: one function makes
    Table T6 in notebook 07 and Table R6 in notebook 10. `slug` is the stem every file of the id shares;
    a paper table or figure has none (its number names it, each of its files adds a part: `table3_` holds
    `table3_assistant_models` and `table3_assistant_models_data`). `name`, `what` and `models` are how
    INDEX.md lists it (`models`: whose dialogues and judgments made it, read by `reproduce.index`); an id
    without a name is not listed.
    """

    kind: Kind
    number: int | str
    slug: str = ""
    notebook: str = ""
    name: str = ""
    what: str = ""
    models: str = ""

    @property
    def stem(self) -> str:
        """The start of every file name of this id."""
        return f"{self.kind}{self.number}_{self.slug}"

    def file_slug(self, part: str = "") -> str:
        """The slug after `<kind><number>_` of one file set: the id's own slug, then `part`."""
        slug = "_".join(text for text in (self.slug, part) if text)
        if not slug:
            raise ValueError(f"{self.kind} {self.number} has no slug: name its file with a part")
        return slug

    def of_kind(self, kind: Kind) -> OutputId:
        """This id, after checking it names a `kind` (a figure saved under a table's id is a slip)."""
        if self.kind != kind:
            raise ValueError(f"{self.kind} {self.number} is not a {kind}'s id")
        return self


def listed(outputs: Iterable[OutputId]) -> tuple[OutputId, ...]:
    """The ids INDEX.md lists, in the order given."""
    return tuple(output for output in outputs if output.name)
