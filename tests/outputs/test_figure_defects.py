"""The figure defects a first reading found (issue 31), checked on the drawn matplotlib artists: the
offline note is one line inside the image, no radar polygon lies on the edge of the chart's hole,
PERSONA Bench's radar prints no ring value over its data, Figure 5's "All SD tasks" line is drawn
over the domains' lines, and T3's axis says what it plots."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure
from support.figures import persona_radar
from support.synthetic_store import JUDGE, build_store, served_for_real

from personalens_utils import analysis
from personalens_utils.measures import scores
from personalens_utils.outputs import plots


def _note_problems(fig: Figure, name: str) -> list[str]:
    note = fig.get_suptitle()
    if not note:
        return []
    fig.canvas.draw()
    box = fig._suptitle.get_window_extent()
    figure_box = fig.bbox
    problems = []
    if "\n" in note:
        problems.append(f"{name}: the note takes {note.count(chr(10)) + 1} lines")
    if box.x0 < figure_box.x0 - 0.5 or box.x1 > figure_box.x1 + 0.5:
        problems.append(f"{name}: the note leaves the figure ({box.x0:.0f}-{box.x1:.0f} px)")
    return problems


def test_the_offline_note_is_one_line_inside_every_figure_at_both_widths(figures):
    drawn = {**figures, "persona": persona_radar().figure, "persona_text": persona_radar().at("text")}
    marked = [name for name, fig in drawn.items() if fig.get_suptitle() == plots.OFFLINE_NOTE]
    assert {"figure5", "figure5_text", "persona", "persona_text"} <= set(marked)
    assert [p for name, fig in drawn.items() for p in _note_problems(fig, name)] == []


@pytest.mark.parametrize("span", ["column", "text"])
def test_the_longest_note_naming_offline_roles_is_one_line_inside_the_figure(tmp_path, span):
    """A radar chart of one real assistant beside offline ones, user agent and judge offline."""
    tidy = served_for_real(scores.load_scores(build_store(tmp_path / "store", users=4), judge_model=JUDGE))
    radar = analysis.radar_chart(tidy, span=span).figure
    assert radar.get_suptitle() == "Offline user agent, judge, some assistants: rule-based"
    assert _note_problems(radar, span) == []


@pytest.mark.parametrize("span", ["column", "text"])
def test_no_radar_polygon_lies_on_the_edge_of_the_hole(tmp_path, span):
    """An assistant scoring the lowest personalization everywhere (like `ref-ignores-context`) draws a
    ring of its own inside the chart, not along the inner edge where the hole's spine is drawn."""
    tidy = scores.load_scores(build_store(tmp_path / "store"), judge_model=JUDGE)
    lowest = (tidy["assistant_model"] == "model-c") & (tidy["dimension"] == "personalization")
    tidy.loc[lowest, "score"] = 1.0
    ax = next(a for a in analysis.radar_chart(tidy).at(span).axes if a.name == "polar")
    inner, outer = ax.get_ylim()
    polygon = next(line for line in ax.get_lines() if line.get_label() == "model-c")
    assert min(polygon.get_ydata()) == 1.0
    assert 1.0 - inner >= 0.05 * (outer - inner), f"the polygon at 1 sits on the hole's edge ({inner})"


@pytest.mark.parametrize("span", ["column", "text"])
def test_persona_radar_prints_no_ring_value_over_its_data(span):
    result = persona_radar()
    ax = next(a for a in result.at(span).axes if a.name == "polar")
    assert [t.get_text() for t in ax.get_yticklabels() if t.get_visible() and t.get_text()] == []
    assert "rings at 0.25, 0.5, 0.75, 1" in result.caption


@pytest.mark.parametrize("name", ["figure5", "figure5_text"])
def test_figure5_draws_all_sd_tasks_over_the_domains(figures, name):
    lines = {line.get_label(): line.get_zorder() for line in figures[name].axes[0].get_lines()}
    overall = lines.pop("All SD tasks")
    assert lines and all(z < overall for z in lines.values()), (overall, lines)


def test_t3_axis_names_the_smallest_detectable_difference(exports):
    _, plan = exports
    for fig in (plan.figure.figure, plan.figure.at("text")):
        assert " ".join(fig.axes[0].get_ylabel().split()).startswith("smallest detectable P difference")
