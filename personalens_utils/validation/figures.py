"""Figure 3 of the paper: the demographic distribution of a benchmark's users.

Five horizontal bar panels (gender, age, ethnicity, religion, region), categories in the paper's
order top to bottom, each bar labelled with its share of users.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from personalens_utils import plots
from personalens_utils.validation.metrics import demographics_table

FIGURE3_PANELS: tuple[tuple[str, str], ...] = (
    ("Gender", "Gender"),
    ("Age", "Age"),
    ("Self-Reported Ethnicity", "Ethnicity"),
    ("Self-Reported Religion", "Religion"),
    ("Regions", "Location (region of birth)"),
)
"""(variable of Tables 6-7, panel title), in the figure's order."""

MIN_SLOTS = 7
"""Bar slots per panel at least, so panels with few categories keep the same bar thickness."""


def figure3(demographics: pd.DataFrame | list[dict[str, str]], title: str = "") -> plt.Figure:
    """Draw Figure 3 from a Tables 6-7 frame (`demographics_table` rows) or from raw demographic records."""
    table = demographics if isinstance(demographics, pd.DataFrame) else pd.concat(
        [demographics_table(demographics, 6), demographics_table(demographics, 7)], ignore_index=True
    )
    missing = [v for v, _ in FIGURE3_PANELS if v not in set(table["Variable"])]
    if missing:
        raise ValueError(f"Figure 3 needs the variables {missing}, absent from the table given")
    plots.apply_style()
    fig, axes = plt.subplots(
        1, len(FIGURE3_PANELS), figsize=(15, 3.1), gridspec_kw={"wspace": 0.95}, squeeze=True
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (ax, (variable, panel_title)) in enumerate(zip(axes, FIGURE3_PANELS, strict=True)):
        rows = table[table["Variable"] == variable]
        slots = max(len(rows), MIN_SLOTS)
        ys = [slots - 1 - k for k in range(len(rows))]
        ax.barh(ys, rows["Percent"], color=colors[i % len(colors)], height=0.7)
        top = rows["Percent"].max()
        for y, pct in zip(ys, rows["Percent"], strict=True):
            ax.text(pct + top * 0.02, y, f"{pct:.1f}%", va="center", fontsize=plots.FONT_SIZE - 2)
        ax.set_yticks(ys, rows["Category"])
        ax.set_xlim(0, top * 1.3)
        ax.set_ylim(-0.6, slots - 0.4)
        ax.set_title(panel_title)
        ax.set_xlabel("Share of users (%)")
        ax.grid(axis="y", visible=False)
        ax.tick_params(axis="y", length=0)
    if title:
        fig.suptitle(title, y=1.04)
    return fig
