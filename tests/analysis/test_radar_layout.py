"""The radar chart's layout (issue 39): at both widths, for a few or many assistants and long names, the
legend and every label stay inside the figure and off each other, and no ring value sits on a polygon.
Boxes are the ones matplotlib's renderer draws."""

from __future__ import annotations

from itertools import combinations, pairwise

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox
from support.synthetic_store import JUDGE, build_store

from personalens_utils import analysis
from personalens_utils.measures import scores

LONG_NAMES = (
    "python:/home/someone/projects/assistants/my_retrieval_assistant.py:MyRetrievalAssistant?k=3",
    "openai@http://localhost:8000/v1:meta-llama/Llama-3.1-70B-Instruct-Turbo-quantized-awq-4bit-final",
)


@pytest.fixture(scope="module")
def tidy(tmp_path_factory) -> pd.DataFrame:
    """The synthetic store's scores, model-c's personalization just above the lowest score everywhere,
    so its polygon runs along the innermost ring (where a ring value "1" would sit)."""
    frame = scores.load_scores(build_store(tmp_path_factory.mktemp("radar") / "store"), judge_model=JUDGE)
    frame["assistant_model"] = frame["assistant_model"].astype(str)
    near_one = (frame["assistant_model"] == "model-c") & (frame["dimension"] == "personalization")
    frame.loc[near_one, "score"] = 1.1
    return frame


def _with(tidy: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """`tidy` with more assistants: model-a's rows under each name, personalization shifted apart."""
    base = tidy[tidy["assistant_model"] == "model-a"]
    extra = []
    for i, name in enumerate(names):
        rows = base.assign(assistant_model=name)
        shifted = rows["dimension"] == "personalization"
        rows.loc[shifted, "score"] = np.clip(rows.loc[shifted, "score"] - 0.25 * (i % 10), 1, 4)
        extra.append(rows)
    return pd.concat([tidy, *extra], ignore_index=True)


CASES = {
    "three": [],
    "long_names": list(LONG_NAMES),
    "many": [f"assistant-variant-{i:02d}-with-retrieval" for i in range(12)],
}


def _boxes(fig: Figure) -> dict[str, list[tuple[str, Bbox]]]:
    """The drawn boxes, in display pixels: the legend, its texts, the spoke and ring labels, the note."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = next(a for a in fig.axes if a.name == "polar")
    legend = fig.legends[0]
    shown = [t for t in ax.get_yticklabels() if t.get_visible() and t.get_text().strip()]
    return {
        "legend": [("legend", legend.get_window_extent(renderer))],
        "legend texts": [(t.get_text(), t.get_window_extent(renderer)) for t in legend.get_texts()],
        "spoke labels": [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts],
        "ring labels": [(t.get_text(), t.get_window_extent(renderer)) for t in shown],
        "note": [("note", fig._suptitle.get_window_extent(renderer))] if fig._suptitle else [],
    }


def _overlap(a: Bbox, b: Bbox) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1


def layout_problems(fig: Figure) -> list[str]:
    """Boxes leaving the figure, and boxes overlapping: labels among themselves, any label and the
    legend, a ring label and a polygon (its line and markers)."""
    boxes = _boxes(fig)
    page = fig.bbox
    problems = [f"{kind} {text!r} leaves the figure" for kind, found in boxes.items() for text, box in found
                if min(box.x0 - page.x0, box.y0 - page.y0, page.x1 - box.x1, page.y1 - box.y1) < -1]
    labels = [*boxes["spoke labels"], *boxes["ring labels"], *boxes["note"]]
    problems += [f"{a!r} overlaps {b!r}" for (a, box_a), (b, box_b) in combinations(labels, 2)
                 if _overlap(box_a, box_b)]
    problems += [f"{a!r} overlaps the legend" for a, box in labels if _overlap(box, boxes["legend"][0][1])]
    ax = next(a for a in fig.axes if a.name == "polar")
    for line in ax.get_lines():
        corners = line.get_transform().transform(line.get_xydata())
        points = np.concatenate([np.linspace(p, q, 60) for p, q in pairwise(corners)])
        reach = (line.get_markersize() / 2 + line.get_linewidth() / 2) * fig.dpi / 72
        for text, box in boxes["ring labels"]:
            inside = ((points[:, 0] > box.x0 - reach) & (points[:, 0] < box.x1 + reach)
                      & (points[:, 1] > box.y0 - reach) & (points[:, 1] < box.y1 + reach))
            if inside.any():
                problems.append(f"ring label {text!r} sits on the polygon of {line.get_label()!r}")
    return problems


@pytest.mark.parametrize("span", ["column", "text"])
@pytest.mark.parametrize("case", list(CASES))
def test_nothing_of_the_radar_leaves_the_figure_or_overlaps(tidy, case, span):
    result = analysis.radar_chart(_with(tidy, CASES[case]))
    fig = result.at(span)
    assert layout_problems(fig) == []
    assert len(fig.legends[0].get_texts()) == 3 + len(CASES[case])  # every assistant is named


def test_the_legend_names_a_python_assistant_as_its_table_row_and_wraps_a_long_name(tidy):
    fig = analysis.radar_chart(_with(tidy, list(LONG_NAMES))).figure
    shown = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "MyRetrievalAssistant (k=3)" in shown
    wrapped = next(t for t in shown if t.startswith("openai@"))
    assert "\n" in wrapped and wrapped.replace("\n", "") == LONG_NAMES[1].replace(" ", "")


def test_the_caption_gives_the_ring_values_the_figure_leaves_out(tidy):
    result = analysis.radar_chart(tidy)
    assert "rings at 1, 2, 3, 4 from the centre out" in result.caption
    assert _boxes(result.figure)["ring labels"] == []


def test_the_checks_see_a_label_on_a_polygon_and_a_legend_off_the_page(tidy):
    fig = analysis.radar_chart(tidy).figure
    ax = next(a for a in fig.axes if a.name == "polar")
    ax.set_yticks([1.0, 2.0, 3.0, 4.0], ["1", "2", "3", "4"])
    ax.set_rlabel_position(0)
    fig.legends[0].set_bbox_to_anchor((1.5, 0.5), transform=fig.transFigure)
    problems = layout_problems(fig)
    assert "ring label '1' sits on the polygon of 'model-c'" in problems
    assert "legend 'legend' leaves the figure" in problems
