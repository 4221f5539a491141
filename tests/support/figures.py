"""Checks on drawn matplotlib figures, and a PERSONA Bench radar near the top of its scale, for the
figure tests of the analysis, trust and PERSONA Bench outputs."""

from __future__ import annotations

from itertools import combinations
from unittest import mock

import matplotlib

matplotlib.use("Agg")

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from personalens_utils.outputs import plots
from personalens_utils.persona_bench import report


def overlaps_and_overflows(fig: Figure) -> list[str]:
    """Pairs of texts whose boxes overlap, and texts reaching outside the figure."""
    drawn: list[Text] = []
    original = Text.draw

    def record(text: Text, renderer) -> None:  # tick labels outside the view exist but are not drawn
        original(text, renderer)
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)

    canvas = FigureCanvasAgg(fig)
    with mock.patch.object(Text, "draw", record):
        canvas.draw()
    renderer = canvas.get_renderer()
    page = fig.bbox
    texts = list(dict.fromkeys(drawn))
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    problems = [
        f"{text!r} leaves the page"
        for text, box in boxes
        if box.x0 < page.x0 - 1 or box.y0 < page.y0 - 1 or box.x1 > page.x1 + 1 or box.y1 > page.y1 + 1
    ]
    for (a, box_a), (b, box_b) in combinations(boxes, 2):
        inter_w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
        inter_h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
        if inter_w > 1 and inter_h > 1:
            problems.append(f"{a!r} overlaps {b!r}")
    return problems


def persona_radar() -> plots.FigureResult:
    """PERSONA Bench's radar with every setting near the top of the scale on every metric."""
    metrics = ["Accuracy", "F1", "MCC", "ROUGE-1", "ROUGE-L", "BLEU"]
    summary = pd.DataFrame([{"model": "m", "setting": s, "metric": m, "value": 0.97 - 0.01 * i}
                            for i, s in enumerate(("P-Conv", "P-NonConv", "NP-Conv")) for m in metrics])
    frame = pd.DataFrame({"model": ["m"], "backend": ["offline"]})
    return report.radar(summary, frame, "m", data_label="synthetic", origin="test")
