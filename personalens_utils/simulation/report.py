"""What notebook 03 shows: this run's dialogues and how they ended."""

from __future__ import annotations

import pandas as pd

from personalens_utils.assistants.python import PYTHON
from personalens_utils.data import Benchmark
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.llm.role import Role
from personalens_utils.runstore.engine import StageReport
from personalens_utils.runstore.records import OFFLINE, Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation.config import SimulationConfig
from personalens_utils.simulation.loop import ERROR, TERMINATED, TURN_CAP
from personalens_utils.simulation.runner import planned_ids
from personalens_utils.simulation.settings import AssistantSetting


def run_dialogues(store: RunStore, benchmark: Benchmark, config: SimulationConfig, *, user: Role,
                  ) -> pd.DataFrame:
    """The stored dialogues of the configured scenarios, settings, assistant and prompt set with `user` as
    the user agent; other runs in the store, other backends, endpoints and prompt sets included, are left
    out."""
    names = [AssistantSetting.parse(s).name for s in config.settings]
    frame = benchmark.scenarios[benchmark.scenarios["task_type"].isin(list(config.task_types))]
    wanted = set(planned_ids(list(frame["scenario_id"]), names, config, user).values())
    records = [r for r in store.records(Dialogue) if r["id"] in wanted]
    return pd.DataFrame.from_records(records)


def outcome_table(dialogues: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """How the dialogues ended, per assistant setting and task type, with turns, retries and cost."""
    columns = ["assistant_setting", "task_type", "n_dialogues", TERMINATED, TURN_CAP, ERROR, "mean_turns",
               "retries", "cost_usd"]
    if dialogues.empty:
        return pd.DataFrame(columns=columns), "No dialogues stored for this selection."
    counts = pd.crosstab([dialogues["assistant_setting"], dialogues["task_type"]], dialogues["status"])
    counts = counts.reindex(columns=[TERMINATED, TURN_CAP, ERROR], fill_value=0)
    grouped = dialogues.groupby(["assistant_setting", "task_type"])
    table = counts.assign(n_dialogues=grouped.size(), mean_turns=grouped["n_turns"].mean(),
                          retries=grouped["retries"].sum(), cost_usd=grouped["cost_usd"].sum())
    table = table.reset_index()[columns]
    backends = sorted(set(dialogues["backend"]))
    roles = {role: set(dialogues.get(f"{role}_backend", dialogues["backend"]).dropna()) - {PYTHON}
             for role in ("user", "assistant")}
    offline_roles = [role for role, made in roles.items() if OFFLINE in made]
    models = sorted(set().union(*roles.values()) - {OFFLINE})
    caption = ("How the dialogues ended (terminated by the user, turn cap of 20 SD / 30 MD, or error), "
               "mean turns, retried calls and cost per assistant setting and task type.")
    if offline_roles and models:  # e.g. the offline user agent talking to a real assistant
        who = " and ".join("the user agent" if role == "user" else "the assistant" for role in offline_roles)
        caption += f" Made in part with the {OFFLINE_LABEL} ({who}), in part with {', '.join(models)}."
    elif offline_roles:
        caption += f" Made with the {OFFLINE_LABEL}."
    else:
        caption += f" Backend: {', '.join(backends)}."
    return table, caption


def nothing_to_describe(dialogues: pd.DataFrame, report: StageReport) -> str | None:
    """Markdown for the describing cells when no finished dialogue of the selection is stored: why
    (the run's budget, its errors, an empty selection) and what to do; None when there is one."""
    if not dialogues.empty and (dialogues["status"] != ERROR).any():
        return None
    why = report.why_nothing() or "the run store holds none of them"
    return f"**Nothing to describe:** no finished dialogue is stored for this selection: {why}."
