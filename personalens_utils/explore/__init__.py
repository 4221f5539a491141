"""Explore results in JupyterLab: a dialogue explorer, a side-by-side view and annotation widgets.

One call from any notebook cell (docs/explore.md):

    from personalens_utils.explore import explore, side_by_side, annotate
    explore(session)            # or explore("runs/simulation", benchmark=benchmark)
    side_by_side(session)
    annotate("runs/analysis/<run>/annotation", annotator="alice")   # the sheet of 06's run folder
    play_user(session, "user1/SD-Movies-task-1", person="alice")   # you type the user's turns

`catalog` queries the store (never reading it whole), `views` renders pages as HTML, `widgets`,
`annotate` and `play` (a person playing the user, `validity.people`) hold the widgets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from personalens_utils.assistants import Assistant, resolve_assistant
from personalens_utils.data import Benchmark
from personalens_utils.explore.annotate import Annotator
from personalens_utils.explore.catalog import Catalog, DialogueSummary, DialogueView, Filters, Page, as_stores
from personalens_utils.explore.play import PlayUser
from personalens_utils.explore.views import comparison_page, dialogue_page
from personalens_utils.explore.widgets import Explorer, SideBySide
from personalens_utils.judging import JudgingError, judge_context
from personalens_utils.llm.client import Clients
from personalens_utils.prompt_sets import KIT, ScenarioContext
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.validity.people import start_dialogue

__all__ = [
    "Annotator",
    "Catalog",
    "DialogueSummary",
    "DialogueView",
    "Explorer",
    "Filters",
    "Page",
    "PlayUser",
    "SideBySide",
    "annotate",
    "catalog",
    "comparison_page",
    "dialogue_page",
    "explore",
    "play_user",
    "side_by_side",
]


def _session_contexts(session: Any) -> Any:
    """Contexts from a session's benchmark folder, loading each user's profile on first use."""
    loaded: dict[int, Benchmark] = {}

    def context_for(dialogue: Dialogue) -> Mapping[str, Any]:
        if dialogue.user_id not in loaded:
            loaded[dialogue.user_id] = session.load_benchmark([dialogue.user_id])
        bench = loaded[dialogue.user_id]
        try:
            scenario = bench.scenario(dialogue.scenario_id)
        except KeyError:
            raise JudgingError(
                f"scenario {dialogue.scenario_id!r} is not in the benchmark at "
                f"{session.places.benchmark_dir}; open the session on the benchmark it was simulated on"
            ) from None
        return judge_context(ScenarioContext.of(scenario, bench.user(dialogue.user_id)), dialogue)

    return context_for


def catalog(source: Any, benchmark: Benchmark | None = None) -> Catalog:
    """A catalog of a Session's run store (profiles from its benchmark), a RunStore or a run folder, or a
    list of them (the shards of a `shard="i/n"` run, read together)."""
    if isinstance(source, Catalog):
        return source
    stores = as_stores(source)
    if stores is not None:
        return Catalog.of(stores, benchmark)
    if hasattr(source, "run_store") and hasattr(source, "load_benchmark"):
        if benchmark is not None:
            return Catalog.of(source.run_store, benchmark)
        return Catalog(source.run_store, _session_contexts(source))
    raise TypeError(
        f"explore needs a Session, a RunStore or a run folder (or a list of them), got "
        f"{type(source).__name__}")


def explore(source: Any, *, benchmark: Benchmark | None = None, judge_model: str | None = None) -> Explorer:
    """The dialogue explorer over a Session, a RunStore or a run folder; display it in a cell."""
    return Explorer(catalog(source, benchmark), judge_model=judge_model)


def side_by_side(
    source: Any, *, benchmark: Benchmark | None = None, judge_model: str | None = None
) -> SideBySide:
    """One scenario under two settings or assistants, over a Session, a RunStore or a run folder."""
    return SideBySide(catalog(source, benchmark), judge_model=judge_model)


def annotate(sheet: str | os.PathLike[str], *, annotator: str | None = None) -> Annotator:
    """Fill an annotation sheet (or your copy of the exported one: pass its folder and `annotator`)."""
    return Annotator(sheet, annotator=annotator)


def play_user(source: Any, scenario_id: str, *, person: str, assistant: Assistant | str | None = None,
              setting: str = "base", benchmark: Benchmark | None = None,
              max_turns: int | None = None) -> PlayUser:
    """A person (`person`, a short name) plays the user of one scenario against `assistant`, in a widget;
    the dialogue goes into the run store of `source` (a Session, with its prompt set; or a RunStore or
    run folder with `benchmark`, the kit's prompts) when it ends. `assistant` is an `Assistant` or a
    spec, read as the session reads assistant specs (None: the backend's default assistant)."""
    if hasattr(source, "run_store") and hasattr(source, "runtime"):
        store, bench, prompts = source.run_store, benchmark or source.benchmark, source.prompts
        clients, options = source.runtime.clients, source.parameters.assistant_options
    elif isinstance(source, RunStore | str | os.PathLike) and benchmark is not None:
        store, bench, prompts = source if isinstance(source, RunStore) else RunStore(source), benchmark, KIT
        clients, options = Clients(), None
    else:
        raise TypeError(f"play_user needs a Session, or a RunStore or run folder with benchmark=; got "
                        f"{type(source).__name__}")
    if not isinstance(assistant, Assistant):
        assistant = resolve_assistant(assistant, clients, options=options)
    dialogue = start_dialogue(bench, store, scenario_id, person, assistant, setting=setting, prompts=prompts,
                              max_turns=max_turns)
    return PlayUser(dialogue)
