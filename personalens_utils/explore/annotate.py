"""Fill a Table 5 annotation sheet in the notebook, one dialogue at a time.

The widget reads and writes the very sheet `labels.sheets` exports and reads back (same
columns, same quoting), so a sheet filled here flows into Table 5 like one filled in a spreadsheet.
Every rating is checked on entry with the same reader as Table 5's (`labels.reading.rating`); a
refused entry says why and writes nothing. Each saved item is written to the sheet at once, by
an atomic replace, so a closed tab loses nothing; a new widget on the same sheet opens at the
first item with no rating. Stable CSS classes (docs/explore.md): `pl-annotate`,
`pl-annotate-progress`, `pl-annotate-item`, `pl-annotate-guidelines`, `pl-annotate-<dimension>`,
`pl-annotate-annotator`, `pl-annotate-notes`, `pl-annotate-save`, `pl-annotate-skip`,
`pl-annotate-previous`, `pl-annotate-message`.
"""

from __future__ import annotations

import os
from typing import Any

import ipywidgets as widgets

from personalens_utils.labels import AnnotationError, reading, sheets
from personalens_utils.labels.sheets import RATED
from personalens_utils.outputs.display import esc, inline

_CONTEXT = (
    ("task_type", "task type"),
    ("domains", "domains"),
    ("task_description", "task"),
    ("task_goal", "goal"),
    ("demographics", "demographics"),
    ("preferences", "preferences"),
    ("past_interactions", "past interactions"),
    ("situation", "situation"),
)


class Annotator(widgets.VBox):
    """One annotator's sheet: the item, the guidelines, a field per rated column, save and move on."""

    def __init__(
        self, sheet: str | os.PathLike[str], *, annotator: str | None = None, guidelines: str | None = None
    ) -> None:
        self.path = sheets.sheet_for(sheet, annotator)
        self.header, self.rows, self.delimiter = sheets.read_table(self.path)
        missing = [c for c in ("dialogue_id", *RATED) if c not in self.header]
        if missing:
            raise AnnotationError(
                f"{self.path}: missing column(s) {missing}; use a sheet exported by notebook 06"
            )
        if not self.rows:
            raise AnnotationError(f"{self.path}: the sheet has no rows")
        beside = self.path.with_name(sheets.GUIDELINES_NAME)
        text = guidelines or (
            beside.read_text(encoding="utf-8") if beside.is_file() else sheets.guidelines()
        )
        names = {(r.get("annotator") or "").strip() for r in self.rows} - {""}
        self.progress = widgets.HTML()
        self.progress.add_class("pl-annotate-progress")
        self.item = widgets.HTML()
        self.item.add_class("pl-annotate-item")
        self.guide = widgets.HTML(
            inline(
                f'<details class="pl-annotate-guidelines"><summary>Guidelines (what the '
                f'judge is told, per column)</summary><div class="pl-explanation">{esc(text)}'
                "</div></details>"
            )
        )
        self.annotator = widgets.Text(
            value=annotator or (sorted(names)[0] if names else ""),
            description="annotator",
            placeholder="your name or id",
        )
        self.annotator.add_class("pl-annotate-annotator")
        self.fields = {}
        for dim in RATED:
            box = widgets.Text(description=dim, placeholder=sheets.scale(dim),
                               style={"description_width": "12em"})
            box.add_class(f"pl-annotate-{dim}")
            self.fields[dim] = box
        self.notes = widgets.Textarea(description="notes", placeholder="optional")
        self.notes.add_class("pl-annotate-notes")
        self.message = widgets.HTML()
        self.message.add_class("pl-annotate-message")
        buttons = {}
        for name, label in (("previous", "Previous"), ("skip", "Skip"), ("save", "Save and next")):
            buttons[name] = widgets.Button(
                description=label, button_style="primary" if name == "save" else ""
            )
            buttons[name].add_class(f"pl-annotate-{name}")
        buttons["previous"].on_click(lambda _: self.go(self.index - 1))
        buttons["skip"].on_click(lambda _: self.go(self.index + 1))
        buttons["save"].on_click(lambda _: self.save())
        super().__init__(
            [
                self.progress,
                self.guide,
                self.item,
                self.annotator,
                *self.fields.values(),
                self.notes,
                widgets.HBox(list(buttons.values())),
                self.message,
            ]
        )
        self.add_class("pl-annotate")
        self.index = 0
        self.go(self.first_unrated())

    def first_unrated(self) -> int:
        """The first item with no rating (the end of the sheet when every item has one)."""
        return next((i for i, row in enumerate(self.rows) if not sheets.is_rated(row)), len(self.rows))

    @property
    def rated(self) -> int:
        return sum(sheets.is_rated(row) for row in self.rows)

    def go(self, index: int) -> None:
        """Show item `index` (clamped to the sheet), with what is stored for it."""
        self.index = max(0, min(index, len(self.rows)))
        done = self.index == len(self.rows)
        self.progress.value = inline(
            f"<b>{self.rated} of {len(self.rows)} dialogues rated</b> · "
            + ("end of the sheet" if done else f"item {self.index + 1} of {len(self.rows)}")
            + f' · <span class="pl-muted">{esc(self.path)}</span>'
        )
        if done:
            self.item.value = inline(
                f'<div class="pl-annotate-done">Every item has been shown; '
                f"{len(self.rows) - self.rated} have no rating yet (Previous to go back). "
                "Pass this sheet to notebook 06 as annotation_sheets for Table 5.</div>"
            )
            return
        row = self.rows[self.index]
        parts = [
            f'<div><b>{esc(label)}</b>: <span class="pl-explanation">{esc(row.get(col, ""))}</span></div>'
            for col, label in _CONTEXT
            if row.get(col)
        ]
        self.item.value = inline(
            f'<div data-dialogue="{esc(row["dialogue_id"])}">{"".join(parts)}'
            f'<div><b>conversation</b></div><div class="pl-explanation pl-turn">'
            f"{esc(row.get('conversation', ''))}</div></div>"
        )
        for dim, box in self.fields.items():
            box.value = row.get(dim) or ""
        self.notes.value = row.get("notes") or ""

    def enter(self, notes: str | None = None, **ratings: Any) -> None:
        """Type ratings into the fields by column name (as a person would); nothing is saved yet."""
        unknown = sorted(set(ratings) - set(self.fields))
        if unknown:
            raise ValueError(f"unknown columns {unknown}; the rated columns are {list(RATED)}")
        for dim, value in ratings.items():
            self.fields[dim].value = "" if value is None else str(value)
        if notes is not None:
            self.notes.value = notes

    def save(self) -> bool:
        """Check the fields; if every entry is a rating on its scale, write the item to the sheet and
        move to the next; otherwise say what is wrong and write nothing."""
        if self.index >= len(self.rows):
            self.message.value = inline(
                '<span class="pl-error">No item is open; use Previous to go back.</span>'
            )
            return False
        problems, values = [], {}
        for dim, box in self.fields.items():
            try:
                values[dim] = reading.rating(box.value, dim, f"{dim}")
            except AnnotationError as exc:
                problems.append(f"{exc} (the column takes {sheets.scale(dim)})")
        if not problems and all(v is None for v in values.values()):
            problems.append("no rating entered: rate at least one column, or press Skip")
        name = self.annotator.value.strip()
        owners = {(r.get("annotator") or "").strip() for i, r in enumerate(self.rows) if i != self.index} - {
            ""
        }
        if owners and name not in owners:
            problems.append(
                f"this sheet holds the ratings of {', '.join(sorted(owners))}; one sheet is one "
                "annotator (Table 5 refuses a sheet with two names): keep that name, or pass "
                "another annotator= to fill your own copy"
            )
        if problems:
            self.message.value = inline(
                '<div class="pl-error">Not saved: ' + "<br>".join(esc(p) for p in problems) + "</div>"
            )
            return False
        # the sheet as it is on disk now: another widget on it (a re-run cell) may have saved items since
        header, rows, delimiter = sheets.read_table(self.path)
        wanted = self.rows[self.index]["dialogue_id"]
        at = next((i for i, r in enumerate(rows) if r.get("dialogue_id") == wanted), None)
        if at is None:
            self.message.value = inline(
                f'<span class="pl-error">Not saved: dialogue {esc(wanted)} is no '
                f"longer in {esc(self.path)}; it was changed outside this widget.</span>"
            )
            return False
        row = dict(rows[at])
        row.update({dim: "" if v is None else sheets.stored_rating(dim, v) for dim, v in values.items()})
        row["notes"] = self.notes.value
        if "annotator" in header:
            row["annotator"] = name
        rows[at] = row
        sheets.write_table(self.path, header, rows, delimiter)
        self.header, self.rows, self.delimiter, self.index = header, rows, delimiter, at
        self.message.value = inline(
            f'<span class="pl-muted">Saved item {self.index + 1} to {esc(self.path.name)}.</span>'
        )
        self.go(self.index + 1)
        return True
