"""A table as a LaTeX float that compiles in an ACL-style paper as it is.

Cells, headers and captions are escaped (and Unicode such as κ, Δ, ≥ set in math mode) by
pylatexenc; numbers get a real minus sign and are right-aligned; a missing value prints as `--`.
The caption is the first sentence of the kit's caption; the rest (provenance, the offline label)
is a small note under the table, so it stays visible without making the caption long. A table
wider than one column of a two-column paper becomes `table*`, and `adjustbox` shrinks it only if it
would still be wider than the text. The packages a table needs are listed in its first line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pandas as pd
from pylatexenc.latexencode import UnicodeToLatexEncoder

PACKAGES = ("booktabs", "adjustbox")
COLUMN_WIDTH_PT = 219.0
"""One column of an ACL paper (7.7 cm); a wider table spans both columns."""
CHAR_PT = 5.0
"""Rough width of one character at \\small in Times, for deciding between `table` and `table*`."""
COLUMN_SEP_PT = 12.0
MISSING = "--"

_ENCODER = UnicodeToLatexEncoder(
    non_ascii_only=False, replacement_latex_protection="braces-all", unknown_char_policy="keep"
)
_NUMBER = re.compile(r"^[-−+]?\d[\d,]*(\.\d+)?(%|\s*\[.*)?$|^[-−]?\.\d+$")
_FIRST_NUMBER = re.compile(r"[-−]?\d+(?:\.\d+)?")
_WITH_INTERVAL = re.compile(r"^(\S+) (\[.*)$")


def escape(text: object) -> str:
    """Plain text as LaTeX: special characters escaped, a leading minus typeset as one."""
    raw = re.sub(r"(?<![\w.])[-−](?=\.?\d)", "\u2212", str(text))
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


def _cell(value: object) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    if text in ("", "nan", "<NA>", "None"):
        return MISSING
    stacked = _WITH_INTERVAL.match(text)
    if stacked:  # "mean [low, high], p=..." prints as the mean over a small line with the rest
        head, rest = stacked.groups()
        lines = f"{escape(head)}\\\\{{\\scriptsize {escape(rest)}}}"
        return f"\\begin{{tabular}}[t]{{@{{}}r@{{}}}}{lines}\\end{{tabular}}"
    return escape(text)


def _is_numeric(column: pd.Series) -> bool:
    present = [str(v).strip() for v in column if _cell(v) != MISSING]
    return bool(present) and all(_NUMBER.match(v) for v in present)


def _best_rows(column: pd.Series, direction: str) -> set[int]:
    """Row positions holding the best leading number of a column ("max" or "min")."""
    values = {}
    for pos, value in enumerate(column):
        found = _FIRST_NUMBER.search(str(value).replace("−", "-")) if _cell(value) != MISSING else None
        if found:
            values[pos] = float(found.group())
    if len(values) < 2:
        return set()
    best = max(values.values()) if direction == "max" else min(values.values())
    return {pos for pos, v in values.items() if v == best}


def _text_pt(value: object) -> float:
    """Rough printed width of a cell: a stacked interval is as wide as its longer line."""
    stacked = _WITH_INTERVAL.match(str(value))
    if stacked:
        head, rest = stacked.groups()
        return max(len(head) * CHAR_PT, len(rest) * CHAR_PT * 0.7)
    return len(str(value)) * CHAR_PT


def _width_pt(frame: pd.DataFrame) -> float:
    """Rough printed width: the widest text of each column (header or cell)."""
    return sum(
        max([_text_pt(name)] + [_text_pt(v) for v in frame[name]]) + COLUMN_SEP_PT for name in frame.columns
    )


def table_latex(
    frame: pd.DataFrame,
    caption: str,
    label: str,
    *,
    best: Mapping[str, str] | None = None,
) -> str:
    """The LaTeX of one table. `best` maps column names to "max" or "min": those cells are bold."""
    unknown = sorted(set(best or {}) - set(map(str, frame.columns)))
    if unknown:
        raise ValueError(f"best: no column named {unknown} in this table (columns: {list(frame.columns)})")
    cells = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
    for name, direction in (best or {}).items():
        if direction not in ("max", "min"):
            raise ValueError(f"best[{name!r}] must be 'max' or 'min', got {direction!r}")
        j = list(map(str, frame.columns)).index(name)
        for i in _best_rows(frame.iloc[:, j], direction):
            cells[i][j] = f"\\textbf{{{cells[i][j]}}}"
    spec = "".join("r" if _is_numeric(frame[c]) else "l" for c in frame.columns)
    wide = _width_pt(frame) > COLUMN_WIDTH_PT
    env = "table*" if wide else "table"
    head, note = split_caption(caption)
    lines = [
        f"% requires: \\usepackage{{{','.join(PACKAGES)}}}",
        f"\\begin{{{env}}}[t]",
        "\\centering",
        "\\small",
        "\\begin{adjustbox}{max width=\\linewidth}",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(escape(c) for c in frame.columns) + " \\\\",
        "\\midrule",
        *(" & ".join(row) + " \\\\" for row in cells),
        "\\bottomrule",
        "\\end{tabular}",
        "\\end{adjustbox}",
    ]
    if note:
        lines.append(f"\\par\\smallskip\\footnotesize {escape(note)}")
    lines += [f"\\caption{{{escape(head)}}}", f"\\label{{{label}}}", f"\\end{{{env}}}", ""]
    return "\n".join(lines)


def standalone_document(tables: Sequence[str]) -> str:
    """A minimal article holding the given tables, for checking that they compile."""
    return "\n".join([
        "\\documentclass{article}",
        "\\usepackage[T1]{fontenc}",
        "\\usepackage[textwidth=16cm]{geometry}",
        f"\\usepackage{{{','.join(PACKAGES)}}}",
        "\\begin{document}",
        *tables,
        "\\clearpage",
        "\\end{document}",
        "",
    ])
