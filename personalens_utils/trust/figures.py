"""The report card's probe checks as a figure: how far each probe moved each judge's scores.

One row per probe check (profile counterfactual, length sensitivity) and dimension, one marker per judge
at the mean paired change with its interval; a filled marker is a pass, a hollow one a fail. A check not
measured has no row. Scales differ (TCR 0-1, P 1-4, naturalness and coherence 1-5): the axis is the change
in the dimension's own score points, which is what each check's rule reads.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from personalens_utils.measures.display import provenance_note
from personalens_utils.outputs.plots import FigureResult, Span, greyscale_styles, mark_offline, new_figure
from personalens_utils.outputs.tables import TableResult
from personalens_utils.trust.report_card import NOT_MEASURED, PASS, CardError

PROBE_CHECKS = ("profile counterfactual", "length sensitivity")
ROW_HEIGHT_IN = 0.22
"""Inches per check row; the figure adds room for the legend and the offline note."""
NICE_REACH = (0.1, 0.2, 0.5, 1.0, 2.0, 4.0)
"""Half-widths the change axis may take (scores change by at most 4 points, on the 1-5 scales)."""


def _label(check: str) -> str:
    """'profile counterfactual (P drops)' -> 'swap: P'; 'length sensitivity (Nat.)' -> 'padding: Nat.'."""
    probe = "swap" if check.startswith(PROBE_CHECKS[0]) else "padding"
    return f"{probe}: {check.split('(')[-1].split()[0].rstrip(')')}"


def _reach(values: np.ndarray) -> float:
    """The axis' half-width: the smallest of `NICE_REACH` holding every value (with a little room)."""
    largest = float(np.nanmax(np.abs(values))) * 1.1 if np.isfinite(values).any() else 0.0
    return next((r for r in NICE_REACH if r >= largest), float(np.ceil(largest)))


def probe_figure(card: TableResult, span: Span = "column") -> FigureResult:
    """The probe rows of `card` (`report_card.report_card`) as a dot plot with intervals (at column width
    unless `span` says text; `at` draws the other)."""
    rows = card.frame[card.frame["check"].str.startswith(PROBE_CHECKS)
                      & (card.frame["verdict"] != NOT_MEASURED)]
    if rows.empty:
        raise CardError("the card has no measured probe check to draw; run the probes first "
                        "(trust.probes.run_probe)")
    checks = list(dict.fromkeys(rows["check"]))
    judges = list(dict.fromkeys(rows["judge"]))
    used = set(card.source.backends)
    reach = _reach(rows[["estimate", "ci_low", "ci_high"]].to_numpy(dtype=float))

    def draw(width: Span) -> Figure:
        fig, ax = new_figure(width, 0.9 + ROW_HEIGHT_IN * len(checks) * max(1, len(judges) / 2))
        offsets = np.linspace(-0.2, 0.2, len(judges)) if len(judges) > 1 else np.zeros(1)
        for judge, style, offset in zip(judges, greyscale_styles(len(judges)), offsets, strict=True):
            mine = rows[rows["judge"] == judge]
            y = np.array([checks.index(c) for c in mine["check"]], dtype=float) + offset
            est, low, high = (mine[c].to_numpy(dtype=float) for c in ("estimate", "ci_low", "ci_high"))
            err = np.vstack([est - low, high - est])
            ax.errorbar(est, y, xerr=err, fmt="none", ecolor=style["color"], elinewidth=0.9, capsize=1.5)
            passed = (mine["verdict"] == PASS).to_numpy()
            ax.plot(est[passed], y[passed], ls="none", marker=style["marker"], color=style["color"],
                    label=judge)
            ax.plot(est[~passed], y[~passed], ls="none", marker=style["marker"], mfc="white",
                    color=style["color"], label=f"{judge}, fail" if (~passed).any() else None)
        ax.axvline(0, color="0.5", lw=0.7, ls=":")
        ax.set_yticks(range(len(checks)), [_label(c) for c in checks])
        ax.set_ylim(len(checks) - 0.5, -0.5)
        ax.set_xlim(-reach, reach)
        ticks = np.linspace(-reach, reach, 5)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xlabel("change in score (probe minus original)")
        fig.legend(loc="outside lower center", ncol=1 if width == "column" else 2, frameon=False)
        mark_offline(fig, used)
        return fig

    caption = (
        "Probe checks of the judge report card: the mean paired change of each score when the judge is shown "
        "another user's profile (swap) or assistant turns padded with neutral text (padding), with its "
        "bootstrap interval over dialogues; filled markers pass, hollow ones fail. Each score changes on its "
        "own scale (TCR 0-1, P 1-4, naturalness and coherence 1-5). P must drop under the swap and TCR stay "
        "within the card's margin; no score may rise with padding." + provenance_note(used)
    )
    return FigureResult(draw(span), caption, card.source, rows.reset_index(drop=True), at=draw)
