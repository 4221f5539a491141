"""A table as a LaTeX float that prints in an ACL-style paper at its natural size.

Cells, headers and captions are escaped (Unicode such as κ, Δ, ≥ set in math mode, straight quotes
turned into typographic ones) by pylatexenc; numbers get a real minus sign and are right-aligned; a
missing value prints as `--`. The caption (the first sentence of the kit's caption) sits above the
table and the rest (provenance, the offline label, legends) is a note below it.

Nothing is scaled. The table is measured in Times (`latex_width`) and placed in the first of
`PLACES` that fits an ACL paper (11 pt, so `\\small` is 10 pt and `\\footnotesize` 9 pt, never
smaller): a one-column `table` at either size, possibly transposed when it has few rows, or a
two-column `table*` at `\\small`; else the same with its text columns wrapped onto lines of one
common width at `\\small`; a page-wide table goes down to `\\footnotesize` only when that does not
fit; else it is split into blocks of columns stacked in one `table*`, each block repeating the row
labels. A cell "mean [low, high] ..." prints the interval (and what follows it) on lines below the
mean, at the same size; a long header wraps onto several lines. A table taller than a page (its
height estimated from its lines) is cut into runs of rows, each its own float of the same kind
repeating the header; the first carries caption and label, the others say they continue it, and the
note goes under the last.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd
from pylatexenc.latexencode import UnicodeToLatexEncoder

from personalens_utils.outputs.latex_width import COLUMN_WIDTH_PT, TEXT_HEIGHT_PT, TEXT_WIDTH_PT, text_width

PACKAGES = ("booktabs",)
SIZES = (("small", 10.0), ("footnotesize", 9.0))
"""Table text sizes in an 11 pt paper (ACL's), largest first; nothing in a table prints smaller."""
CAPTION_PT = 10.95
"""The caption's size: the paper's own text size."""
BASELINE_PT = {10.0: 12.0, 9.0: 11.0, CAPTION_PT: 13.6}
"""The line spacing of each text size (the table's, and the caption's) in an 11 pt paper."""
RULES_PT = 14.0
"""Booktabs' rules with the space around them, at most."""
CAPTION_SKIP_PT = 13.0
"""The skips around a caption: above it (`\\abovecaptionskip`, 10 pt) and the `\\smallskip` under it."""
SKIP_PT = 6.0
"""A \\medskip: between the blocks of one float, and under a continued table's heading."""
FLOAT_SHARE = 0.92
"""A float fills at most this share of the text height: room for what the estimate of lines misses
(it counts every line at its full spacing, so it runs a little over what prints)."""
TABCOLSEP_PT = 4.0
SLACK_PT = 4.0
"""Room left beside the measured width for what the measure misses (kerning, math spacing)."""
HEADER_EMS = 4.5
"""A header wraps onto lines this many ems wide, or as wide as its widest cell."""
MAX_TRANSPOSED_ROWS = 4
MAX_KEYS = 4
"""At most this many leading text columns name a row (and are repeated when a table is split)."""
MISSING = "--"

_ENCODER = UnicodeToLatexEncoder(
    non_ascii_only=False, replacement_latex_protection="braces-all", unknown_char_policy="keep"
)
_NUMBER = re.compile(r"^[-−+]?\d[\d,]*(\.\d+)?(%|\s*\[.*)?$|^[-−]?\.\d+$")
_FIRST_NUMBER = re.compile(r"[-−]?\d+(?:\.\d+)?")
_STACKED = re.compile(r"^(\S+) (\[[^\]]*\]),? ?(.*)$")
_UNSTACKED = re.compile(r"^([-−+]?\d[\d,]*(?:\.\d+)?%?),? ((?:p ?[=<]|\((?:strict|official) ).*)$")
"""A number whose interval was withheld (thin data) and what followed the interval: a p-value or the
other scoring rule's mean, stacked as they are below an interval."""


@dataclass(frozen=True)
class Block:
    """Rows and columns printed as one tabular; the runs of equal values of `group` (a column) print
    as a heading row above their rows instead of in a column."""

    frame: pd.DataFrame
    group: str | None = None


@dataclass(frozen=True)
class Printed:
    """How a table prints when its own frame is not the best layout: blocks stacked in one float
    (each its own tabular), and a legend for the abbreviations they use, printed in the note."""

    blocks: tuple[Block, ...]
    legend: str = ""


def escape(text: object) -> str:
    """Plain text as LaTeX: special characters escaped, a leading minus typeset as one, quotes curled."""
    raw = re.sub(r"(?<![\w.])[-−](?=\.?\d)", "\u2212", str(text))
    raw = re.sub(r"(?<![\w'])'([^'\n]+?)'(?!\w)", "\u2018\\1\u2019", raw)
    raw = re.sub(r'"([^"\n]+?)"', "\u201c\\1\u201d", raw)
    return _ENCODER.unicode_to_latex(raw)


def label_for(number: int | str, slug: str) -> str:
    """A label that no other table of the kit shares: table number and slug."""
    return "tab:" + re.sub(r"[^A-Za-z0-9]+", "-", f"{number}-{slug}").strip("-").lower()


def split_caption(caption: str) -> tuple[str, str]:
    """The first sentence (the caption) and the rest (a note under the table)."""
    match = re.search(r"(?<=[.!?])\s+(?=[A-Z(])", caption)
    if match is None:
        return caption.strip(), ""
    return caption[: match.start()].strip(), caption[match.end() :].strip()


def _lines(value: object) -> list[str]:
    """A cell as the plain-text lines it prints on: an interval and what follows go below the value."""
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return [MISSING]
    if isinstance(value, bool):
        return ["yes" if value else "no"]
    text = str(value)
    if text in ("", "nan", "<NA>", "None"):
        return [MISSING]
    stacked = _STACKED.match(text) or _UNSTACKED.match(text)
    if stacked:
        return [part for part in stacked.groups() if part]
    return [text]


def _is_numeric(column: pd.Series) -> bool:
    """Numbers, right-aligned: a column of numbers where any other cell is a word ("n/a", "(reference)")."""
    present = [str(v).strip() for v in column if _lines(v) != [MISSING]]
    numbers = [v for v in present if _NUMBER.match(v) or _UNSTACKED.match(v)]
    return bool(numbers) and all(v in numbers or not re.search(r"\d", v) for v in present)


def _best_rows(column: pd.Series, direction: str) -> set[int]:
    """Row positions holding the best leading number of a column ("max" or "min")."""
    values = {}
    for pos, value in enumerate(column):
        found = _FIRST_NUMBER.search(str(value).replace("−", "-")) if _lines(value) != [MISSING] else None
        if found:
            values[pos] = float(found.group())
    if len(values) < 2:
        return set()
    best = max(values.values()) if direction == "max" else min(values.values())
    return {pos for pos, v in values.items() if v == best}


def _stack(lines: Sequence[str], align: str, anchor: str) -> str:
    body = "\\\\{}".join(escape(line) for line in lines)  # {}: a line starting "[" is no length
    if len(lines) == 1:
        return body
    return f"\\begin{{tabular}}[{anchor}]{{@{{}}{align}@{{}}}}{body}\\end{{tabular}}"


def _wrap(text: str, width: float, size: float) -> list[str]:
    """Words of `text` on lines no wider than `width` (a single long word keeps its own line)."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and text_width(f"{lines[-1]} {word}", size) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines


@dataclass(frozen=True)
class _Column:
    name: str
    align: str
    cells: tuple[tuple[str, ...], ...]
    bold: frozenset[int]

    def header(self, size: float) -> list[str]:
        return _wrap(self.name, max(self.cell_width(size), HEADER_EMS * size), size)

    def cell_width(self, size: float) -> float:
        return max(
            (text_width(line, size, bold=i in self.bold)
             for i, cell in enumerate(self.cells) for line in cell),
            default=0.0,
        )

    def width(self, size: float) -> float:
        return max([self.cell_width(size), *(text_width(h, size) for h in self.header(size))])

    def narrowest(self, size: float) -> float:
        """The width of its widest word (or line, for a number): no wrapping makes it narrower."""
        if self.align != "l":
            return self.cell_width(size)
        return max((text_width(word, size, bold=i in self.bold)
                    for i, cell in enumerate(self.cells) for line in cell for word in line.split(" ")),
                   default=0.0)

    def wrapped(self, width: float, size: float) -> _Column:
        """A text column with each line of its cells wrapped onto lines no wider than `width`."""
        if self.align != "l" or self.cell_width(size) <= width:
            return self
        return replace(self, cells=tuple(tuple(part for line in cell for part in _wrap(line, width, size))
                                         for cell in self.cells))


@dataclass(frozen=True)
class _Block:
    columns: tuple[_Column, ...]
    groups: tuple[str, ...] | None
    """One heading per row (a `Block.group`), printed where it changes."""
    keys: int
    """Leading columns that name a row; a split repeats them in every part."""

    def spans(self) -> list[tuple[str, int]]:
        """(prefix, number of columns) runs of a two-level header; [] when the headers share no prefix."""
        rest = [c.name for c in self.columns[self.keys :]]
        if not rest or not all(" " in n for n in rest):
            return []
        runs: list[tuple[str, int]] = []
        for name in rest:
            prefix = name.split(" ", 1)[0]
            if runs and runs[-1][0] == prefix:
                runs[-1] = (prefix, runs[-1][1] + 1)
            else:
                runs.append((prefix, 1))
        return runs if any(n > 1 for _, n in runs) else []

    def width(self, size: float) -> float:
        columns = self._shown()
        total = sum(c.width(size) + 2 * TABCOLSEP_PT for c in columns)
        heading = max((text_width(g, size) for g in self.groups or ()), default=0.0)
        return max(total, heading + 2 * TABCOLSEP_PT)

    def _shown(self) -> list[_Column]:
        """Columns as printed: under a two-level header each name loses its prefix."""
        if not self.spans():
            return list(self.columns)
        return [*self.columns[: self.keys],
                *(replace(c, name=c.name.split(" ", 1)[1]) for c in self.columns[self.keys :])]

    def latex(self, size: float) -> list[str]:
        columns = self._shown()
        spec = "".join(c.align for c in columns)
        lines = [f"\\begin{{tabular}}{{{spec}}}", "\\toprule"]
        spans = self.spans()
        if spans:
            cells, rules, start = [""] * self.keys, [], self.keys + 1
            for prefix, n in spans:
                cells.append(f"\\multicolumn{{{n}}}{{c}}{{{escape(prefix)}}}")
                rules.append(f"\\cmidrule(lr){{{start}-{start + n - 1}}}")
                start += n
            lines += [" & ".join(cells) + " \\\\", " ".join(rules)]
        lines.append(" & ".join(_stack(c.header(size), c.align, "b") for c in columns) + " \\\\")
        lines.append("\\midrule")
        previous = None
        for i in range(len(columns[0].cells)):
            if self.groups is not None and self.groups[i] != previous:
                if previous is not None:
                    lines.append("\\addlinespace")
                heading = f"\\textit{{{escape(self.groups[i])}}}"
                lines.append(f"\\multicolumn{{{len(columns)}}}{{@{{}}l}}{{{heading}}} \\\\")
                previous = self.groups[i]
            row = []
            for c in columns:
                cell = _stack(c.cells[i], c.align, "t")
                row.append(f"\\textbf{{{cell}}}" if i in c.bold else cell)
            lines.append(" & ".join(row) + " \\\\")
        return [*lines, "\\bottomrule", "\\end{tabular}"]

    def height(self, size: float) -> float:
        """At most how tall the block prints: its header wrapped as narrow as a header wraps, every
        line of every row, and a heading wherever the group changes."""
        line = BASELINE_PT[size]
        header = max(len(_wrap(c.name, HEADER_EMS * size, size)) for c in self._shown())
        rows = [max(len(c.cells[i]) for c in self.columns) for i in range(len(self.columns[0].cells))]
        headings = 0 if self.groups is None else sum(
            i == 0 or g != self.groups[i - 1] for i, g in enumerate(self.groups))
        spans = line + 3 if self.spans() else 0.0
        return RULES_PT + spans + (header + sum(rows) + headings) * line + max(headings - 1, 0) * 4

    def rows(self, start: int, stop: int) -> _Block:
        """Rows `start` to `stop` (not included) as a block of their own."""
        columns = tuple(replace(c, cells=c.cells[start:stop],
                                bold=frozenset(i - start for i in c.bold if start <= i < stop))
                        for c in self.columns)
        groups = None if self.groups is None else self.groups[start:stop]
        return _Block(columns, groups, self.keys)

    def pieces(self, room: float, size: float) -> list[_Block]:
        """The rows cut into the fewest runs, as long as one another, that are no taller than `room` each."""
        total = len(self.columns[0].cells)
        for count in range(1, total + 1):
            cuts = [round(k * total / count) for k in range(count + 1)]
            runs = [self.rows(start, stop) for start, stop in itertools.pairwise(cuts)]
            if all(run.height(size) <= room for run in runs):
                return runs
        return [self.rows(i, i + 1) for i in range(total)]

    def split(self, width: float, size: float) -> list[_Block]:
        """Parts of this block no wider than `width`, each repeating the key columns."""
        keys, rest = list(self.columns[: self.keys]), list(self.columns[self.keys :])
        units: list[list[_Column]] = []
        for n in [n for _, n in self.spans()] or [1] * len(rest):
            units.append(rest[:n])
            rest = rest[n:]
        parts: list[list[_Column]] = [[]]
        for unit in units:
            for piece in ([unit] if self._fits(keys + unit, width, size) else [[c] for c in unit]):
                if not self._fits(keys + piece, width, size):
                    widest = max(keys + piece, key=lambda c: c.width(size))
                    raise ValueError(f"column {widest.name!r} ({widest.width(size):.0f} pt) is too wide: "
                                     f"with the row labels it needs more than {width:.0f} pt")
                if parts[-1] and not self._fits(keys + parts[-1] + piece, width, size):
                    parts.append([])
                parts[-1] += piece
        return [self._part(keys + part) for part in parts]

    def wrapped(self, width: float, size: float) -> _Block | None:
        """This block no wider than `width` with its text columns wrapped at one common width (or a
        column's widest word, where that is wider), as wide as it can be; None when even their widest
        words leave it too wide."""
        def capped(cap: float) -> _Block:
            return replace(self, columns=tuple(c.wrapped(max(cap, c.narrowest(size)), size)
                                               for c in self.columns))

        text = [c for c in self.columns if c.align == "l"]
        low = min((c.narrowest(size) for c in text), default=0.0)
        high = max((c.cell_width(size) for c in text), default=0.0)
        if not text or capped(low).width(size) > width:
            return None
        while high - low > 1.0:  # the widest cap that fits, to a point
            middle = (low + high) / 2
            low, high = (middle, high) if capped(middle).width(size) <= width else (low, middle)
        return capped(low)

    def _part(self, columns: list[_Column]) -> _Block:
        return _Block(tuple(columns), self.groups, self.keys)

    def _fits(self, columns: list[_Column], width: float, size: float) -> bool:
        return self._part(columns).width(size) <= width - SLACK_PT


def _block(block: Block, best: Mapping[str, str], ties: list[str]) -> _Block:
    frame = block.frame
    groups = None
    if block.group is not None:
        groups = tuple(str(g) for g in frame[block.group])
        frame = frame.drop(columns=block.group)
    columns = []
    for name in map(str, frame.columns):
        values = frame[name]
        bold: set[int] = set()
        if name in best:
            bold = _best_rows(values, best[name])
            if len(bold) > 1:
                ties.append(name)
                bold = set()
        align = "r" if _is_numeric(values) else "l"
        columns.append(_Column(name, align, tuple(tuple(_lines(v)) for v in values), frozenset(bold)))
    leading = next((i for i, c in enumerate(columns) if c.align == "r"), len(columns))
    return _Block(tuple(columns), groups, min(max(leading, 1), MAX_KEYS, len(columns) - 1))


def _transposed(printed: Printed, best: Mapping[str, str]) -> Printed | None:
    """The table turned on its side, when it has a few uniquely named rows and more columns than rows."""
    if len(printed.blocks) != 1 or best or printed.blocks[0].group is not None:
        return None
    frame = printed.blocks[0].frame
    labels = [str(v) for v in frame.iloc[:, 0]]
    few = 1 <= len(frame) <= MAX_TRANSPOSED_ROWS and frame.shape[1] > len(frame) + 1
    if not few or len(set(labels)) != len(labels):
        return None
    turned = frame.iloc[:, 1:].T.astype(object)
    turned.columns = labels
    turned.insert(0, "", [str(c) for c in frame.columns[1:]])
    return replace(printed, blocks=(Block(turned.reset_index(drop=True)),))


PLACES = (
    ("table", 0, False), ("table", 1, False), ("table*", 0, False),
    ("table", 0, True), ("table*", 0, True),
    ("table*", 1, False), ("table", 1, True), ("table*", 1, True),
)
"""Where a table may print, in order of preference: (environment, index into `SIZES`, whether its text
columns wrap). As it is in one column at either size, or across the page at the larger; else with its
text wrapped at the larger size; a page-wide table is set smaller only when wrapping does not fit it."""


def _layout(
    printed: Printed, best: Mapping[str, str]
) -> tuple[str, tuple[str, float], list[_Block], list[str]]:
    """The environment, size, blocks and tied best columns of the first of `PLACES` that fits, else
    the table split into blocks of columns across the page."""
    variants = [printed, *filter(None, [_transposed(printed, best)])]
    for env, size_index, wrap in PLACES:
        width, size = (COLUMN_WIDTH_PT if env == "table" else TEXT_WIDTH_PT) - SLACK_PT, SIZES[size_index]
        for variant in variants:
            ties: list[str] = []
            blocks = [_block(b, best, ties) for b in variant.blocks]
            fitted = [b if b.width(size[1]) <= width else b.wrapped(width, size[1]) if wrap else None
                      for b in blocks]
            if all(fitted):
                return env, size, [b for b in fitted if b is not None], ties
    ties = []
    blocks = [_block(b, best, ties) for b in printed.blocks]
    size = SIZES[-1]
    return "table*", size, [part for b in blocks for part in b.split(TEXT_WIDTH_PT, size[1])], ties


def _lines_tall(text: str, width: float, size: float) -> float:
    """How tall `text` prints as a paragraph `width` wide."""
    return math.ceil(text_width(text, size) / width) * BASELINE_PT[size] if text else 0.0


def _floats(blocks: Sequence[_Block], size: float, room: float) -> list[list[_Block]]:
    """The blocks packed into floats no taller than `room` each, a block taller than that cut by rows."""
    floats: list[list[_Block]] = [[]]
    used = 0.0
    for block in blocks:
        for piece in block.pieces(room, size) if block.height(size) > room else [block]:
            tall = piece.height(size)
            if floats[-1] and used + SKIP_PT + tall > room:
                floats.append([])
            used = tall if not floats[-1] else used + SKIP_PT + tall
            floats[-1].append(piece)
    return floats


def _bold_note(best: Mapping[str, str], ties: Sequence[str]) -> str:
    if not best:
        return ""
    if not ties:
        return "Bold: the single best value of each column."
    return ("Bold: the single best value of a column; none in " + ", ".join(ties)
            + " (the best value is tied).")


def table_latex(
    frame: pd.DataFrame | Printed,
    caption: str,
    label: str,
    *,
    best: Mapping[str, str] | None = None,
) -> str:
    """The LaTeX of one table. `best` maps column names to "max" or "min": a column's single best cell
    is bold (a tie bolds none, and the note says where)."""
    printed = frame if isinstance(frame, Printed) else Printed((Block(frame),))
    names = {str(c) for b in printed.blocks for c in b.frame.columns}
    unknown = sorted(set(best or {}) - names)
    if unknown:
        raise ValueError(f"best: no column named {unknown} in this table (columns: {sorted(names)})")
    for name, direction in (best or {}).items():
        if direction not in ("max", "min"):
            raise ValueError(f"best[{name!r}] must be 'max' or 'min', got {direction!r}")
    try:
        env, (size_name, size), blocks, ties = _layout(printed, best or {})
    except ValueError as err:
        raise ValueError(f"table {label}: {err}; shorten or split that column") from None
    head, note = split_caption(caption)
    note = " ".join(filter(None, [note, printed.legend, _bold_note(best or {}, ties)]))
    width = COLUMN_WIDTH_PT if env == "table" else TEXT_WIDTH_PT
    room = (FLOAT_SHARE * TEXT_HEIGHT_PT - CAPTION_SKIP_PT - _lines_tall(head, width, CAPTION_PT)
            - _lines_tall(note, width, SIZES[-1][1]) - SKIP_PT)
    lines = [f"% requires: \\usepackage{{{','.join(PACKAGES)}}}"]
    parts = _floats(blocks, size, room)
    for n, part in enumerate(parts):
        lines += [f"\\begin{{{env}}}[t]", "\\centering"]
        if n:
            lines.append(f"Table~\\ref{{{label}}}, continued.\\par\\medskip")
        else:
            lines += [f"\\caption{{{escape(head)}}}", f"\\label{{{label}}}", "\\smallskip"]  # off the rule
        lines += [f"\\{size_name}", f"\\setlength{{\\tabcolsep}}{{{TABCOLSEP_PT:g}pt}}"]
        for i, block in enumerate(part):
            if i:
                lines.append("\\par\\medskip")
            lines += block.latex(size)
        if note and n == len(parts) - 1:
            lines += ["\\par\\smallskip", f"{{\\footnotesize {escape(note)}\\par}}"]
        lines.append(f"\\end{{{env}}}")
    return "\n".join([*lines, ""])

