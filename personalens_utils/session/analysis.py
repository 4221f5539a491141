"""Notebooks 05's and 06's setup, one call each: the session on the notebook's parameters and what the
notebook works on (05: its three roles checked and the ablation's users; 06: the judgments analysed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from personalens_utils.analysis.ablation import first_users
from personalens_utils.assistants import Assistant
from personalens_utils.data import Benchmark
from personalens_utils.llm.role import Role
from personalens_utils.measures.scores import load_scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import list_param

ABLATION = "05_ablation"
TABLE4 = OutputId("table", 4, notebook=ABLATION, name="Table 4", what="ablation over assistant settings",
                  models="ablation")
OWN_TABLE3 = OutputId("table", 3, notebook=ABLATION)
"""Table 3 of the assistant compared with the ablation assistant (`compare_assistant`)."""
ABLATION_OUTPUTS = (TABLE4, OWN_TABLE3)
"""Notebook 05's tables."""

ANALYSIS = "06_analysis"
TABLE3 = OutputId("table", 3, notebook=ANALYSIS, name="Table 3",
                  what="assistant models: TCR, P, Nat., Coh. (SD, MD)", models="judged")
TABLE5 = OutputId("table", 5, notebook=ANALYSIS, name="Table 5",
                  what="agreement of the judge with annotators",
                  models="judges")
TABLE11 = OutputId("table", 11, notebook=ANALYSIS, name="Table 11",
                   what="models: roles, backend ids, prices",
                   models="registry")
TABLE12 = OutputId("table", 12, notebook=ANALYSIS, name="Table 12",
                   what="user agent naturalness and coherence",
                   models="judged")
TABLE13 = OutputId("table", 13, notebook=ANALYSIS, name="Table 13", what="dialogue statistics",
                   models="focus_dialogues")
FIGURE4 = OutputId("figure", 4, notebook=ANALYSIS, name="Figure 4",
                   what="per-domain TCR and P of one assistant", models="focus")
FIGURE5 = OutputId("figure", 5, notebook=ANALYSIS, name="Figure 5", what="turn-level personalization",
                   models="focus")
RADAR = OutputId("figure", "", "radar", ANALYSIS, name="Radar chart",
                 what="per-domain P, one polygon per model (extra)", models="judged")
TABLE_J3 = OutputId("table", "J3", "judge_sanity", ANALYSIS)
ANALYSIS_OUTPUTS = (TABLE3, TABLE5, TABLE11, TABLE12, TABLE13, FIGURE4, FIGURE5, RADAR, TABLE_J3)
"""Notebook 06's tables and figures (its paper tables' files add a part: `table3_assistant_models`)."""


@dataclass(frozen=True)
class AblationRun:
    """What notebook 05 works on: the run store, the user agent, judge and assistant, and the first
    `ablation_users` of the session's users (`chosen`) with their benchmark."""

    default_output: ClassVar[str] = "analysis"

    store: RunStore
    out: Path
    user: Role
    judge: Role
    assistant: Assistant
    chosen: list[int]
    benchmark: Benchmark

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, AblationRun]:
        """The session (`compare_assistant`, when given, is read and loaded too) and the three roles
        checked once before the chosen users' benchmark is read."""
        session = Session.from_parameters(
            parameters, models=("user_model", "judge_model"),
            assistants=("assistant_model", "compare_assistant"), optional=("compare_assistant",),
            default_output=cls.default_output)
        user, judge = session.role("user_model"), session.role("judge_model")
        assistant = session.assistant("assistant_model")
        print(session.preflight({"user agent": user, "assistant": assistant, "judge": judge}))
        chosen = first_users(session.places.user_ids(), parameters["ablation_users"])
        return session, cls(session.run_store, session.output_dir, user, judge, assistant, chosen,
                            session.load_benchmark(chosen))


@dataclass(frozen=True)
class AnalysisRun:
    """What notebook 06 analyses: the run store, the judge's scores in the session's scope (`tidy`), the
    assistants judged in `setting` (`present`), those the tables show (`models`) and the one the figures
    look at (`focus`)."""

    default_output: ClassVar[str] = "analysis"

    store: RunStore
    out: Path
    tidy: pd.DataFrame
    present: list[str]
    models: list[str]
    focus: str
    figure5_domains: list[str] | None

    @classmethod
    def open(cls, parameters: Mapping[str, Any]) -> tuple[Session, AnalysisRun]:
        """The session (its store written only for Table 5's second judge, so without annotation sheets)
        and the judgments the tables read, required for the setting analysed."""
        session = Session.from_parameters(parameters, models=("second_judge_model",),
                                          default_output=cls.default_output,
                                          writes_run_store=not parameters["annotation_sheets"])
        given = session.assistant_names(list_param("assistant_models", parameters["assistant_models"]))
        domains = list_param("figure5_domains", parameters["figure5_domains"])
        store = session.run_store
        judge_model, user_model, setting = (parameters[k] for k in ("judge_model", "user_model", "setting"))
        tidy = session.scope(load_scores(store, judge_model=judge_model, user_model=user_model,
                                         judge_prompt_set=session.parameters.prompt_set,
                                         scoring=parameters["scoring"]))
        session.require(tidy[tidy["assistant_setting"] == setting], f"judgments by {judge_model} of "
                        f"dialogues with user agent {user_model} in setting {setting!r}",
                        "notebooks 03 and 04")
        present = sorted(tidy.loc[tidy["assistant_setting"] == setting, "assistant_model"].unique())
        models = list(given) if given else present
        focus = session.places.focus(parameters["focus_model"]) or models[0]
        print(f"run store {store.root}: {tidy['dialogue_id'].nunique()} judged dialogues; "
              f"assistants {models}; focus {focus}")
        return session, cls(store, session.output_dir, tidy, present, models, focus, domains)
