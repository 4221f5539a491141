"""Figure 3 of the paper: the demographic distribution of a benchmark's users.

Five horizontal bar panels (gender, age, ethnicity, religion, region) at text width, in two rows,
categories in the paper's order top to bottom, each bar labelled with its share of users.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

import pandas as pd
from matplotlib.figure import Figure

from personalens_utils.benchmark_validation.metrics import demographics_table
from personalens_utils.measures.display import provenance_note
from personalens_utils.outputs.plots import (
    FigureResult,
    Span,
    current_style,
    mark_given,
    mark_offline,
    new_figure,
)
from personalens_utils.outputs.tables import Source
from personalens_utils.reference import demographics as demo

FIGURE3_PANELS: tuple[tuple[str, str], ...] = (
    ("Gender", "Gender"),
    ("Age", "Age"),
    ("Self-Reported Ethnicity", "Ethnicity"),
    ("Self-Reported Religion", "Religion"),
    ("Regions", "Region of birth"),
)
"""(variable of Tables 6-7, panel title), in the figure's order."""

REGIONS_APART: tuple[tuple[str, str], ...] = (("US", "Northern America"), ("UK", "Europe"))
"""(a country Table 7 counts as a region of its own, the region it lies in): the paper's grouping of
birth countries (the PRISM survey's), which the kit's regions.json follows. The official data records
countries, and its users born in the United States (338) and Canada (50) are Table 7's "US" and
"Northern America" exactly, so a figure listing both shows the paper's split, not a mapping error."""
PANEL_COLUMNS = 3
LABEL_CHARS = 22
"""Category labels longer than this wrap onto a second line, so panels keep room for their bars."""
SLOT_HEIGHT_IN = 0.2
"""Height of one bar's slot: room for a wrapped two-line label at the style's small font."""


def _in_order(variable: str, rows: pd.DataFrame) -> pd.DataFrame:
    """Categories top to bottom as Tables 6-7 list them: age groups from the youngest (`reading_order`)."""
    field = "age" if variable == "Age" else variable
    order = demo.reading_order(field, [str(c) for c in rows["Category"]])
    return rows.set_index(rows["Category"].astype(str)).loc[order].reset_index(drop=True)


def regions_note(regions: pd.DataFrame) -> str:
    """The caption's sentence on regions shown beside the region that holds them (`REGIONS_APART`), or ""
    when the figure lists no such pair."""
    shown = set(regions.loc[regions["Count"] > 0, "Category"].astype(str))
    pairs = [(own, wider) for own, wider in REGIONS_APART if {own, wider} <= shown]
    if not pairs:
        return ""

    def apart(own: str, wider: str) -> str:
        members = demo.region_members()[wider]
        named = f" (to which the kit maps {', '.join(members)})" if len(members) <= 3 else ""
        return f'"{own}" apart from "{wider}"{named}'

    return (" As in the paper's Table 7, regions of birth count " + " and ".join(apart(*p) for p in pairs)
            + ": the data records birth countries, grouped here as the paper groups them.")


def figure3(
    demographics: pd.DataFrame | list[dict[str, str]],
    *,
    origin: str = "sampled demographics",
    backend_names: Iterable[str] = (),
    span: Span = "text",
) -> FigureResult:
    """Draw Figure 3 from a Tables 6-7 frame (`demographics_table` rows) or from raw demographic records.

    `origin` names the benchmark in the caption's source sentence; N is the number of users counted.
    `backend_names` are the backends that generated the users: the offline one is marked in the
    figure, and none at all (users the benchmark ships) prints `plots.GIVEN_NOTE` there instead.
    At text width the panels stand three to a row, at column width one (`at` draws the other).
    """
    table = (
        demographics
        if isinstance(demographics, pd.DataFrame)
        else pd.concat(
            [demographics_table(demographics, 6), demographics_table(demographics, 7)], ignore_index=True
        )
    )
    missing = [v for v, _ in FIGURE3_PANELS if v not in set(table["Variable"])]
    if missing:
        raise ValueError(f"Figure 3 needs the variables {missing}, absent from the table given")
    panels = [_in_order(variable, table[table["Variable"] == variable]) for variable, _ in FIGURE3_PANELS]
    used = sorted(set(backend_names))

    def draw(width: Span) -> Figure:
        per_row = PANEL_COLUMNS if width == "text" else 1
        row_slots = [max(len(rows) for rows in panels[start : start + per_row])
                     for start in range(0, len(panels), per_row)]
        noted = "offline" in used or not used
        height = sum(slots * SLOT_HEIGHT_IN + 0.3 for slots in row_slots) + (0.2 if noted else 0)
        fig, axes = new_figure(width, height, nrows=len(row_slots), ncols=per_row, squeeze=False,
                               gridspec_kw={"height_ratios": row_slots})
        flat = list(axes.flat)
        small = current_style().small
        for i, (ax, rows, (_, panel_title)) in enumerate(zip(flat, panels, FIGURE3_PANELS, strict=False)):
            slots = row_slots[i // per_row]
            ys = [slots - 1 - k for k in range(len(rows))]
            ax.barh(ys, rows["Percent"], color=f"C{i}", height=0.7)
            top = float(rows["Percent"].max())
            for y, pct in zip(ys, rows["Percent"], strict=True):
                ax.text(pct + top * 0.03, y, f"{pct:.1f}%", va="center", fontsize=small)
            labels = [textwrap.fill(str(c), LABEL_CHARS) for c in rows["Category"]]
            ax.set_yticks(ys, labels, linespacing=0.9)
            ax.set_xlim(0, top * 1.5)
            ax.set_ylim(-0.6, slots - 0.4)
            ax.set_title(panel_title, fontsize=current_style().font_size)
            ax.set_xticks([])
            ax.grid(visible=False)
            ax.tick_params(axis="y", length=0, pad=2)
            for side in ("top", "right", "bottom"):
                ax.spines[side].set_visible(False)
        for ax in flat[len(panels) :]:
            ax.set_axis_off()
        if used:
            mark_offline(fig, used)
        else:
            mark_given(fig)
        return fig

    n = int(panels[0]["Count"].sum())
    caption = (
        "Demographic distribution of the users: share of users per category of gender, age, "
        "self-reported ethnicity, self-reported religion and region of birth."
        + regions_note(table[table["Variable"] == "Regions"]) + provenance_note(used)
    )
    return FigureResult(draw(span), caption, Source.of(origin, n, "users", used), table, at=draw)
