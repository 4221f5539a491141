"""The one result type of every table-making function, and export of tables as CSV, LaTeX
(booktabs) and Markdown under one naming convention."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from personalens_utils.base.paths import CARD_FILE
from personalens_utils.base.safe_names import inside
from personalens_utils.outputs.display import frame_html
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.latex import Printed, label_for, table_latex

Layout = Callable[[pd.DataFrame], Printed]
"""A table's print layout: its frame as shown (floats formatted) -> the blocks a paper prints."""
Words = Callable[[pd.DataFrame], pd.DataFrame]
"""A table's printed words: its frame as shown -> the same columns, in the same order, with headers and
ids (column names, dimension ids) as a reader names them; the CSV keeps the ids."""


RUN_STORE = "run store "
"""How an origin that is a run store begins (`Source.describe` then points to its run card)."""


@dataclass(frozen=True)
class Source:
    """Where a table's numbers come from, so a reader can tell which run and which models made them.

    `origin` names the run store or benchmark by folder name only (never a full path), so two runs
    in different folders write the same bytes.
    """

    origin: str
    n: int
    unit: str
    backends: tuple[str, ...] = ()
    models: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, origin: str, n: int, unit: str, backends: Iterable[str] = (), models: Iterable[str] = ()
    ) -> Source:
        """A source with backends and models sorted and deduplicated (they often come from sets)."""
        return cls(origin, int(n), unit, tuple(sorted(set(backends))), tuple(sorted(set(models))))

    def describe(self) -> str:
        """One sentence naming the source (the caption itself carries the offline label)."""
        parts = [f"Source: {self.origin}, {self.n} {self.unit}"]
        if self.models:  # offline, no model answered: the names are the roles the rules played
            named = "offline rules in the roles of" if self.backends == ("offline",) else "models"
            parts.append(f"{named} {', '.join(map(_model_shown, self.models))}")
        if self.backends:
            parts.append(f"backend {', '.join(self.backends)}")
        if self.origin.startswith(RUN_STORE):  # what the run was: its card (`run_card`)
            parts.append(f"run card {self.origin.removeprefix(RUN_STORE).rstrip('/')}/{CARD_FILE}")
        return "; ".join(parts) + "."


def _model_shown(model: str) -> str:
    """A model id as a source names it: a Python assistant in a file by the file's name and its class
    (`mine.py:Mine`), since the file's folder differs from machine to machine; any other id as it is."""
    folder, sep, rest = model.partition(".py:")
    return f"{Path(folder).name}.py:{rest}" if sep and os.path.isabs(folder) else model


@dataclass(frozen=True)
class TableResult:
    """A table to show (`frame`), its caption, where its numbers come from, optionally the long
    numeric frame behind a formatted display (`data`, e.g. means and interval bounds as floats), and
    for a table that compares systems the direction in which each column is better (`best`, bold
    in the LaTeX export), and for a table too wide to print as it is shown, its print layout
    (`printed`; without one the LaTeX export splits a wide table by itself), and for a frame of ids
    the words its LaTeX and Markdown print instead (`words`)."""

    frame: pd.DataFrame
    caption: str
    source: Source
    data: pd.DataFrame | None = None
    best: Mapping[str, str] | None = None
    precision: int = 2
    """Decimals of the floats shown in a notebook (`_repr_html_`), the table's own precision."""
    printed: Layout | None = None
    words: Words | None = None

    def save(
        self,
        output_dir: str | os.PathLike[str],
        output: OutputId,
        part: str = "",
        *,
        float_format: str | None = None,
        best: Mapping[str, str] | None = None,
    ) -> dict[str, Path]:
        """`save_table` of the frame with the caption as the table `output` (its file `part`, if any),
        floats at the table's `precision` unless `float_format` says otherwise; `best` (default: the
        table's own) bolds the best value of those columns."""
        float_format = float_format or f"{{:.{self.precision}f}}"
        number, slug = output.of_kind("table").number, output.file_slug(part)
        return save_table(
            self.frame, output_dir, number, slug, self.caption, float_format=float_format,
            best=self.best if best is None else best, printing=Printing(self.words, self.printed),
        )

    def save_data(
        self,
        output_dir: str | os.PathLike[str],
        output: OutputId,
        part: str = "",
        *,
        note: str = " Long form.",
        float_format: str = "{:.4f}",
    ) -> dict[str, Path]:
        """`save_table` of the long numeric frame (the frame itself when there is none) as the table
        `output` (its file `part`, if any), printed in the table's `words`."""
        frame = self.frame if self.data is None else self.data
        number, slug = output.of_kind("table").number, output.file_slug(part)
        return save_table(frame, output_dir, number, slug, self.caption + note, float_format=float_format,
                          printing=Printing(self.words))

    def describe(self) -> str:
        """Caption and source, for showing above the table in a notebook."""
        return f"{self.caption} {self.source.describe()}"

    def _repr_html_(self) -> str:
        """Caption and source above the table: no row numbers, floats at the table's precision,
        blank where a value is undefined, scrolling sideways when wide."""
        return frame_html(self.frame, precision=self.precision, caption=self.describe())


def table_paths(output_dir: str | os.PathLike[str], number: int | str, slug: str) -> dict[str, Path]:
    """Where a table's files go; the slug may come from data (a setting or model name), so each name
    goes through `safe_names.inside`."""
    folder = Path(output_dir) / "tables"
    return {ext: inside(folder, f"table{number}_{slug}", suffix=f".{ext}") for ext in ("csv", "tex", "md")}


@dataclass(frozen=True)
class Printing:
    """How a paper prints a frame: the words its ids print as (`words`), then its layout (`layout`)."""

    words: Words | None = None
    layout: Layout | None = None


def save_table(
    df: pd.DataFrame,
    output_dir: str | os.PathLike[str],
    number: int | str,
    slug: str,
    caption: str,
    *,
    float_format: str = "{:.2f}",
    best: Mapping[str, str] | None = None,
    printing: Printing | None = None,
) -> dict[str, Path]:
    """Write `df` as `<output_dir>/tables/table<number>_<slug>.{csv,tex,md}`; the caption goes in the
    LaTeX and the Markdown, not the CSV.

    The CSV is plain (its first line is the header, so `pandas.read_csv` reads it as it is) and
    keeps full precision; LaTeX and Markdown are rounded with `float_format` for reading. The LaTeX
    compiles as it is in a paper (`latex`), with a label made from the table's number and slug,
    where `best` names columns ("max"/"min"), their best values in bold; `printing` gives the words
    both print (headers and ids as a reader names them; the CSV keeps the ids) and the LaTeX layout.
    """
    paths = table_paths(output_dir, number, slug)
    paths["csv"].parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(paths["csv"], index=False)
    shown = df.copy()
    for col in shown.columns:
        if pd.api.types.is_float_dtype(shown[col]):
            shown[col] = shown[col].map(lambda v: "" if pd.isna(v) else float_format.format(v))
    shown = shown.astype(object).where(shown.notna(), "")  # a blank, not `<NA>` or `nan`, where undefined
    printing = printing or Printing()
    if printing.words is not None:
        shown = printing.words(shown)
    layout = shown if printing.layout is None else printing.layout(shown)
    latex = table_latex(layout, caption, label_for(number, slug), best=best)
    paths["tex"].write_text(latex, encoding="utf-8")
    align = ["right" if pd.api.types.is_numeric_dtype(df[col]) else "left" for col in df.columns]
    body = shown.to_markdown(index=False, disable_numparse=True, colalign=align)
    markdown = f"**Table {number}.** {caption}\n\n{body}\n"
    paths["md"].write_text(markdown, encoding="utf-8")
    return paths


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read back a CSV written by `save_table`, ids and numbers as written (no `#` comment handling,
    since a cell may start with one)."""
    return pd.read_csv(path, comment=None)


def read_caption(path: str | os.PathLike[str]) -> str:
    """The caption of a table written by `save_table`, from its Markdown sidecar (`path` may name any
    of the three files)."""
    first = Path(path).with_suffix(".md").read_text(encoding="utf-8").split("\n", 1)[0]
    return first.split("** ", 1)[1] if first.startswith("**Table ") else first
