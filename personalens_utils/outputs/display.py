"""HTML for notebooks: tables and chat transcripts that read well in JupyterLab and in executed copies.

Pure functions of plain values (no widgets, no package imports), so records, the engine and
`tables.TableResult` can give themselves a `_repr_html_` without reaching up the layers. Every
text goes through `html.escape`. Tables show no index, floats at the table's precision, blank
cells where a value is undefined, and scroll sideways (`overflow-x: auto`) instead of clipping.
The CSS classes (`pl-*`) are stable names that tests and browser checks target (docs/explore.md).
"""

from __future__ import annotations

import html
import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

CSS: dict[str, str] = {
    # contain: its own width never widens what holds it (a widget's flex box), so a wide table
    # scrolls inside this box instead of pushing the page past the output's right edge
    "pl-scroll": "overflow-x: auto; max-width: 100%; contain: inline-size",
    "pl-table": "border-collapse: collapse; font-size: 0.9em; margin: 4px 0; line-height: 1.4",
    # a table whose columns share the width and wrap their words (the explorer's relevant preferences):
    # it never needs to scroll, however narrow the output
    "pl-fit": "width: 100%; table-layout: fixed",
    "pl-fit-cell": "white-space: normal; overflow-wrap: anywhere",  # after `th`/`td`, so it wins
    # cells break between words only (not "anywhere", which a page sets for its text): a table too wide
    # for its box scrolls inside it (pl-scroll) rather than splitting words letter by letter
    "th": "padding: 2px 8px; border-bottom: 1px solid #ccc; vertical-align: top; text-align: left; "
    "background-color: #f4f4f4; white-space: nowrap; overflow-wrap: normal",
    "td": "padding: 2px 8px; border-bottom: 1px solid #e4e4e4; vertical-align: top; text-align: left; "
    "overflow-wrap: normal",
    "pl-num": "text-align: right; white-space: nowrap",
    "pl-wrap": "white-space: normal",  # a long header that may wrap (after `th`, so it wins)
    "pl-caption": "margin: 4px 0",
    "pl-chat": "display: flex; flex-direction: column; gap: 6px; max-width: 60em; min-width: 0",
    "pl-turn": "border-radius: 6px; padding: 6px 10px; white-space: pre-wrap; overflow-wrap: anywhere; "
    "word-break: normal; line-height: 1.4; min-width: 0",
    "pl-turn-user": "background-color: #eef3fb; margin-right: 4em",
    "pl-turn-assistant": "background-color: #f3f8ee; margin-left: 4em",
    "pl-turn-head": "font-size: 0.8em; color: #555; white-space: normal",
    "pl-turn-score": "margin-top: 4px; white-space: normal",
    "pl-badge": "display: inline-block; font-size: 0.8em; border-radius: 4px; padding: 0 5px; "
    "margin: 2px 4px 0 0; background-color: #fff3c4; white-space: normal",
    "pl-judgment": "border-left: 3px solid #bbb; padding: 2px 8px; margin: 6px 0",
    "pl-explanation": "white-space: pre-wrap; overflow-wrap: anywhere; word-break: normal; line-height: 1.4",
    "pl-muted": "color: #666",
    "pl-side": "display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 12px",
    "pl-side-cell": "min-width: 0; overflow-wrap: anywhere",
    # a page's text wraps anywhere it must (ids, model names), so no line is wider than the output; its
    # lines are spaced as text (a widget's HTML box sets its line height to a button's, 28 px)
    "pl-page": "max-width: 100%; min-width: 0; white-space: normal; overflow-wrap: anywhere; "
    "line-height: 1.4",
    "pl-compare": "max-width: 100%; min-width: 0; white-space: normal; overflow-wrap: anywhere; "
    "line-height: 1.4",
    "pl-error": "color: #a00; font-weight: bold",
}
"""How each class looks. Written inline on every element (`inline`): a notebook that is not trusted
(an executed copy opened later) drops `<style>` blocks but keeps inline styles."""

_TAG = re.compile(r"<(\w+)((?:\s+[\w-]+=\"[^\"]*\")*)\s*>")
_CLASS = re.compile(r'\sclass="([^"]*)"')


def _styled(match: re.Match[str]) -> str:
    tag, attributes = match.group(1), match.group(2)
    if " style=" in attributes:
        return match.group(0)
    found = _CLASS.search(attributes)
    names = ([tag] if tag in ("th", "td") else []) + (found.group(1).split() if found else [])
    style = "; ".join(CSS[name] for name in names if name in CSS)
    return f'<{tag}{attributes} style="{style}">' if style else match.group(0)


def inline(markup: str) -> str:
    """The kit's HTML with each element's class styles written inline (idempotent).

    Only for markup this module and the explorer make: their text is escaped, so every `<` is a tag.
    """
    return _TAG.sub(_styled, markup)


def esc(value: Any) -> str:
    """Text for HTML: escaped, None as blank."""
    return "" if value is None else html.escape(str(value))


def is_blank(value: Any) -> bool:
    """A value with nothing to show: None, NaN, pandas' missing markers."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    try:
        return bool(pd.isna(value)) if not isinstance(value, list | tuple | dict) else False
    except (TypeError, ValueError):
        return False


def cell(value: Any, precision: int = 2) -> str:
    """One table cell's text: blank for undefined, floats at `precision` (two significant digits for a
    non-zero value that would round to zero, e.g. a p-value), everything else as text."""
    if is_blank(value):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        text = f"{float(value):.{precision}f}"
        if value and not float(text):  # a small non-zero value never reads as zero
            return f"{float(value):.2g}"
        return text
    if isinstance(value, list | tuple):
        return ", ".join(cell(v, precision) for v in value)
    return str(value)


_NUM = ' class="pl-num"'


def _precision(column: Any, precision: int) -> int:
    """Costs in dollars keep four decimals (a call costs fractions of a cent); other floats `precision`."""
    return max(precision, 4) if "cost" in str(column).lower() else precision


def meaningful_index(frame: pd.DataFrame) -> bool:
    """Whether the index says something (a pivot's or a groupby's named levels), not row positions."""
    return any(name is not None for name in frame.index.names)


def frame_html(
    frame: pd.DataFrame,
    *,
    precision: int = 2,
    caption: str = "",
    index: bool | None = None,
    css_class: str = "pl-table",
) -> str:
    """A frame as a scrolling HTML table: formatted floats, blank cells for undefined values, and
    no index column unless it means something (`index=None`: a named index, e.g. a pivot's, is kept
    as leading columns; row numbers are not). A frame longer than pandas' `display.max_rows` shows its
    first and last rows (`display.min_rows`) and how many are left out, as pandas does."""
    title = f'<div class="pl-caption">{esc(caption)}</div>' if caption else ""
    if frame.empty:
        return inline(f'{title}<div class="pl-empty pl-muted">No rows.</div>')
    keep = meaningful_index(frame) if index is None else index
    shown = frame.reset_index() if keep else frame
    columns = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in shown.columns]
    kinds = []
    for position in range(shown.shape[1]):
        series = shown.iloc[:, position]
        numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        kinds.append((numeric, _precision(columns[position], precision)))
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)

    def body(part: pd.DataFrame) -> list[str]:
        return [
            "<tr>"
            + "".join(
                f"<td{_NUM if numeric else ''}>{esc(cell(v, digits))}</td>"
                for v, (numeric, digits) in zip(values, kinds, strict=True)
            )
            + "</tr>"
            for values in part.itertuples(index=False, name=None)
        ]

    limit, keep_rows = pd.get_option("display.max_rows"), pd.get_option("display.min_rows") or 10
    if limit is not None and len(shown) > limit:  # as pandas does: the first and last rows, and how many
        half = max(keep_rows // 2, 1)
        gap = (
            f'<tr><td class="pl-muted" colspan="{len(columns)}">… {len(shown) - 2 * half} more rows, '
            f"{len(shown)} in all …</td></tr>"
        )
        rows = [*body(shown.iloc[:half]), gap, *body(shown.iloc[-half:])]
    else:
        rows = body(shown)
    return inline(
        f'{title}<div class="pl-scroll"><table class="{css_class}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def use_in_notebook() -> bool:
    """Show every DataFrame of the running IPython kernel as `frame_html`; False outside IPython.

    `Session.open` calls it, so every notebook's tables read the same way without a call per cell.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a requirement, but the package runs without it
        return False
    shell = get_ipython()
    if shell is None:
        return False
    shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, lambda f: frame_html(f))
    return True


def fields_html(fields: Mapping[str, Any], *, precision: int = 2) -> str:
    """A record's fields as a two-column table (name, value), blanks for undefined values."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(cell(v, precision))}</td></tr>" for k, v in fields.items())
    return inline(f'<div class="pl-scroll"><table class="pl-table pl-fields">{rows}</table></div>')


def turn_html(number: int, role: str, content: str, *, notes: Sequence[str] = (), extra: str = "") -> str:
    """One chat bubble: who speaks and the turn number (user messages count turns), the text, badges.

    `notes` are short texts shown as badges under the turn; `extra` is ready-made HTML (already escaped).
    """
    badges = "".join(f'<span class="pl-badge">{esc(n)}</span>' for n in notes)
    return inline(
        f'<div class="pl-turn pl-turn-{esc(role)}" data-turn="{number}">'
        f'<div class="pl-turn-head">{esc(role)} · turn {number}</div>{esc(content)}'
        f"{'<div>' + badges + '</div>' if badges else ''}{extra}</div>"
    )


def chat_html(
    turns: Iterable[tuple[str, str]],
    *,
    notes: Mapping[int, Sequence[str]] | None = None,
    extra: Mapping[int, str] | None = None,
    start: int = 0,
) -> str:
    """A transcript as chat bubbles; turn numbers count user messages, as the paper does.

    `notes` and `extra` are keyed by the index of the message in `turns`; `start` is the number of
    user messages before them (for a part of a transcript).
    """
    parts, number = [], start
    for index, (role, content) in enumerate(turns):
        number += role == "user"
        parts.append(
            turn_html(
                number, role, content, notes=(notes or {}).get(index, ()), extra=(extra or {}).get(index, "")
            )
        )
    if not parts:
        return inline('<div class="pl-chat pl-muted">(no turns)</div>')
    return inline(f'<div class="pl-chat">{"".join(parts)}</div>')


class UsageTable:
    """A stage's model calls for display: the table, or one line when the stage made none (a rerun
    after a finished run has nothing to do; an empty table there says nothing)."""

    def __init__(self, frame: pd.DataFrame, stage: str | None = None) -> None:
        self.frame = frame
        self.stage = stage

    def line(self) -> str:
        """The one line shown instead of an empty table."""
        where = f"{self.stage}: " if self.stage else ""
        return f"{where}no model calls in this session (nothing to do, or nothing that needed a model)."

    def _repr_html_(self) -> str:
        if self.frame.empty:
            return inline(f'<div class="pl-usage pl-usage-none pl-muted">{esc(self.line())}</div>')
        return frame_html(self.frame, caption=f"model calls{f' ({self.stage})' if self.stage else ''}")

    def __repr__(self) -> str:
        return self.line() if self.frame.empty else self.frame.to_string(index=False)
