"""The explorer and the side-by-side view as ipywidgets (JupyterLab and classic Notebook).

Each is a `VBox` of controls above an `HTML` page (`views`). Its display also carries the page as
plain `text/html`, so a front end without the widget manager (an exported copy, a viewer) still
shows the current selection; executed copies keep the widget state papermill saves. Stable CSS
classes, for browser tests (docs/explore.md): `pl-explorer`, `pl-explorer-<filter>` for each filter
(`assistant_model`, `setting`, `task_type`, `domain`, `user`, `judge_model`, `dimension`),
`pl-explorer-score`, `pl-explorer-count`, `pl-explorer-search`, `pl-explorer-earlier`,
`pl-explorer-later`, `pl-explorer-dialogue-select`, `pl-explorer-page`; and
`pl-compare-widget`, `pl-compare-search`, `pl-compare-scenario`, `pl-compare-left`, `pl-compare-right`,
`pl-compare-page`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets

from personalens_utils.explore.catalog import Catalog, Filters
from personalens_utils.explore.views import comparison_page, dialogue_page, dimension_name
from personalens_utils.judging import DIMENSIONS, judge_model_key
from personalens_utils.outputs.display import esc, inline

FILTERS = (
    ("assistant_model", "assistant"),
    ("setting", "setting"),
    ("task_type", "task type"),
    ("domain", "domain"),
    ("user", "user"),
    ("judge_model", "judge"),
    ("dimension", "dimension"),
)
"""The explorer's filters: the `Filters` field and the label shown."""

_WIDE = {"description_width": "initial"}
_FULL = {"width": "auto", "max_width": "100%"}
"""A widget spans the output area and never more (no fixed widths: the pane may be narrow). Auto, not
100%: a box stretches to its container's width less its own margins, where 100% adds them on top."""
ANY = "(any)"
"""The value of a filter left open (a dropdown shows no selection for None, so it gets a label)."""
SHOWN = 200
"""At most this many dialogues in the list at once (a store may hold tens of thousands): the rest are
reached with the filters, the search box or the page buttons."""


def _dropdown(name: str, description: str, values: Sequence[Any], css: str) -> widgets.Dropdown:
    shown = dimension_name if name == "dimension" else str
    box = widgets.Dropdown(
        options=[(ANY, ANY), *((shown(v), v) for v in values)],
        value=ANY,
        description=description,
        style=_WIDE,
        layout=widgets.Layout(width="auto"),
    )
    box.add_class(css)
    return box


def _empty(message: str) -> str:
    return inline(f'<div class="pl-page pl-empty">{esc(message)}</div>')


class _Page(widgets.VBox):
    """Controls above a page; the page also goes out as text/html for front ends without widgets."""

    page: widgets.HTML

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/html"] = self.page.value
        return bundle


class Explorer(_Page):
    """Filter a run store's dialogues, pick one, read it with its profile and every judgment."""

    def __init__(self, catalog: Catalog, *, judge_model: str | None = None) -> None:
        self.catalog = catalog
        self.filters = {
            name: _dropdown(name, label, catalog.values(name), f"pl-explorer-{name}")
            for name, label in FILTERS
        }
        if judge_model and judge_model_key(judge_model) in catalog.values("judge_model"):
            self.filters["judge_model"].value = judge_model_key(judge_model)
        self.score = widgets.FloatRangeSlider(
            value=(0, 5),
            min=0,
            max=5,
            step=1,
            description="score",
            disabled=True,
            readout_format=".0f",
            style=_WIDE,
            continuous_update=False,
        )
        self.score.add_class("pl-explorer-score")
        self.count = widgets.HTML()
        self.count.add_class("pl-explorer-count")
        self.search = widgets.Text(placeholder="words of the line: user 7, a task id, a status",
                                   description="search", style=_WIDE, continuous_update=False,
                                   layout=widgets.Layout(**_FULL))
        self.search.add_class("pl-explorer-search")
        self.earlier = widgets.Button(description="previous page", layout=widgets.Layout(width="auto"))
        self.later = widgets.Button(description="next page", layout=widgets.Layout(width="auto"))
        self.earlier.add_class("pl-explorer-earlier")
        self.later.add_class("pl-explorer-later")
        self.first = 0
        self._shown: tuple[Any, ...] | None = None
        self.dialogue = widgets.Select(
            options=[], rows=8, description="dialogue", style=_WIDE, layout=widgets.Layout(**_FULL)
        )
        self.dialogue.add_class("pl-explorer-dialogue-select")
        self.page = widgets.HTML(layout=widgets.Layout(**_FULL))
        self.page.add_class("pl-explorer-page")
        wrap = widgets.Layout(flex_flow="row wrap", **_FULL)
        controls = widgets.HBox(list(self.filters.values()), layout=wrap)
        pages = widgets.HBox([self.count, self.earlier, self.later], layout=wrap)
        parts = [controls, self.score, self.search, pages, self.dialogue, self.page]
        super().__init__(parts, layout=widgets.Layout(**_FULL))
        self.add_class("pl-explorer")
        self.filters["dimension"].observe(self._rescale, names="value")  # the scale first: one query
        for box in self.filters.values():
            box.observe(self._refilter, names="value")
        self.score.observe(self._refilter, names="value")
        self.search.observe(self._refilter, names="value")
        self.earlier.on_click(lambda _: self.turn_page(-1))
        self.later.on_click(lambda _: self.turn_page(1))
        self.dialogue.observe(self._show, names="value")
        self._refilter()

    def chosen(self, name: str) -> Any:
        """One filter's value; None when it is left open."""
        value = self.filters[name].value
        return None if value == ANY else value

    def current(self) -> Filters:
        """The filters as set in the controls."""
        values = {name: self.chosen(name) for name in self.filters}
        return Filters(**values, score_range=tuple(self.score.value) if values["dimension"] else None,
                       search=self.search.value)

    def set_filters(self, **values: Any) -> None:
        """Set filters by name (None: any), as a user would in the dropdowns; `score_range` too."""
        score = values.pop("score_range", None)
        unknown = sorted(set(values) - set(self.filters))
        if unknown:
            raise ValueError(
                f"unknown explorer filters {unknown}; known: {sorted(self.filters)} and score_range"
            )
        for name, value in values.items():
            box = self.filters[name]
            if value is not None and value not in [v for _, v in box.options]:
                raise ValueError(
                    f"{name}={value!r} is not in this run store; it holds {list(box.options)[1:]}"
                )
            box.value = ANY if value is None else value
        if score is not None:
            self.score.value = tuple(score)

    def _rescale(self, _: Any = None) -> None:
        name = self.chosen("dimension")
        if name is None:
            self.score.disabled = True
            return
        dim = DIMENSIONS.get(name)
        low, high = (dim.low, dim.high) if dim else (0, 5)
        turn_level = bool(dim and dim.turn_level)  # its score is the mean of the turns' scores
        self.score.step, self.score.readout_format = (0.25, ".2f") if turn_level else (1, ".0f")
        with self.hold_trait_notifications():
            self.score.min, self.score.max = min(self.score.min, low), max(self.score.max, high)
            self.score.value = (low, high)
            self.score.min, self.score.max = low, high
        self.score.disabled = False

    def turn_page(self, step: int) -> None:
        """Show the next (1) or previous (-1) page of the list."""
        self.first = max(0, self.first + step * SHOWN)
        self._refilter(keep_page=True)

    def _refilter(self, _: Any = None, *, keep_page: bool = False) -> None:
        """Query the page of dialogues the filters and search leave (never the whole list)."""
        filters = self.current()
        if not keep_page:
            self.first = 0
        found = self.catalog.select(filters, offset=self.first, limit=SHOWN)
        if self.first and not found.dialogues:  # the page ran past the end (fewer now pass)
            self.first = 0
            found = self.catalog.select(filters, offset=0, limit=SHOWN)
        options = [(Catalog.label(d), d.id) for d in found.dialogues]
        shown = f"; showing {self.first + 1}-{self.first + len(options)}" if found.total > SHOWN else ""
        self.count.value = f"{found.total} of {self.catalog.total} dialogues{shown}"
        self.earlier.disabled = self.first == 0
        self.later.disabled = self.first + SHOWN >= found.total
        previous = self.dialogue.value
        self.dialogue.options = options
        ids = [i for _, i in options]
        self.dialogue.value = previous if previous in ids else (ids[0] if ids else None)
        self._show()

    def _show(self, _: Any = None) -> None:
        shown = (self.dialogue.value, self.chosen("judge_model"), self.catalog.total)
        if shown != self._shown:  # a new list holding the same pick: the page stands
            self.page.value = self.html()
            self._shown = shown

    def select(self, dialogue_id: str) -> None:
        """Open one dialogue (it must pass the current filters and search), on whichever page it is."""
        at = self.catalog.position(dialogue_id, self.current())
        if at is not None:
            self.first = at // SHOWN * SHOWN
            self._refilter(keep_page=True)
        self.dialogue.value = dialogue_id

    def html(self) -> str:
        """The page of the dialogue picked (or one line saying why there is none)."""
        if not self.catalog.total:
            return _empty(
                f"The run store {self.catalog.where} holds no dialogues yet: run notebook 03 "
                "(and 04 for judgments) first, or pass another store."
            )
        if self.dialogue.value is None:
            return _empty("No dialogue passes these filters; set some of them back to (any).")
        return dialogue_page(self.catalog.view(self.dialogue.value, self.chosen("judge_model")))


class SideBySide(_Page):
    """One scenario under two settings or two assistants, transcripts aligned turn by turn."""

    def __init__(
        self, catalog: Catalog, *, judge_model: str | None = None, scenarios: Sequence[str] | None = None
    ) -> None:
        self.catalog = catalog
        self.judge_model = judge_model_key(judge_model) if judge_model else None
        self.pool = None if scenarios is None else list(scenarios)
        self.scenario = widgets.Dropdown(description="scenario", style=_WIDE,
                                         layout=widgets.Layout(max_width="100%"))
        self.scenario.add_class("pl-compare-scenario")
        self.search = widgets.Text(placeholder="words of the scenario id: user7, MD-task-3",
                                   description="find", style=_WIDE, continuous_update=False,
                                   layout=widgets.Layout(**_FULL))
        self.search.add_class("pl-compare-search")
        self._offer()
        half = {"width": "auto", "flex": "1 1 0", "min_width": "0"}  # halves of the row, however wide
        self.left = widgets.Dropdown(description="left", style=_WIDE, layout=widgets.Layout(**half))
        self.right = widgets.Dropdown(description="right", style=_WIDE, layout=widgets.Layout(**half))
        self.left.add_class("pl-compare-left")
        self.right.add_class("pl-compare-right")
        self.page = widgets.HTML(layout=widgets.Layout(**_FULL))
        self.page.add_class("pl-compare-page")
        pair = widgets.HBox([self.left, self.right], layout=widgets.Layout(**_FULL))
        super().__init__([self.search, self.scenario, pair, self.page], layout=widgets.Layout(**_FULL))
        self.add_class("pl-compare-widget")
        self.search.observe(self._offer, names="value")
        self.scenario.observe(self._runs, names="value")
        self.left.observe(self._show, names="value")
        self.right.observe(self._show, names="value")
        self._runs()

    def _offer(self, _: Any = None) -> None:
        """The scenarios offered: the first `SHOWN` of those compared whose id holds the words searched
        (a run of two settings compares every scenario it holds: tens of thousands)."""
        if self.pool is None:
            found = self.catalog.compared_scenarios(self.judge_model, search=self.search.value, limit=SHOWN)
        else:
            words = self.search.value.lower().split()
            found = [s for s in self.pool if all(w in s.lower() for w in words)]
        self.scenario.options = found
        self.scenario.value = found[0] if found else None

    @staticmethod
    def run_label(dialogue: Any) -> str:
        return f"{dialogue.assistant_model} · {dialogue.assistant_setting} · {dialogue.assistant_backend}"

    def _runs(self, _: Any = None) -> None:
        runs = self.catalog.runs_of(self.scenario.value, self.judge_model) if self.scenario.value else []
        options = [(self.run_label(d), d.id) for d in runs]
        with self.hold_trait_notifications():
            self.left.options, self.right.options = options, options
            if len(options) >= 2:
                self.left.value, self.right.value = options[0][1], options[1][1]
        self._show()

    def _show(self, _: Any = None) -> None:
        self.page.value = self.html()

    def choose(
        self, scenario_id: str, left: Callable[[Any], bool] | str, right: Callable[[Any], bool] | str
    ) -> None:
        """Pick a scenario and its two runs, each a dialogue id or a test on the dialogue's list fields."""
        if scenario_id not in self.scenario.options:  # not among the first offered: find it by its id
            self.search.value = scenario_id
        self.scenario.value = scenario_id
        runs = self.catalog.runs_of(scenario_id, self.judge_model)

        def find(which: Callable[[Any], bool] | str) -> str:
            found = [d.id for d in runs if (d.id == which if isinstance(which, str) else which(d))]
            if not found:
                raise ValueError(
                    f"scenario {scenario_id} has no such run; it has {[self.run_label(d) for d in runs]}"
                )
            return found[0]

        self.left.value, self.right.value = find(left), find(right)

    def html(self) -> str:
        if self.left.value is None or self.right.value is None:
            return _empty(
                "No scenario of this run store has two dialogues to compare (two settings or two "
                "assistants); run notebook 03 or 05 with more than one."
            )
        return comparison_page(
            self.catalog.view(self.left.value, self.judge_model),
            self.catalog.view(self.right.value, self.judge_model),
        )
