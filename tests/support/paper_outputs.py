"""Every table and figure of notebooks 02 and 04-06 written from one run store (the synthetic store of
`support.synthetic_store`), for the determinism, figure and LaTeX checks."""

from __future__ import annotations

import random
from pathlib import Path

import matplotlib

from support.synthetic_store import JUDGE, SECOND_JUDGE, build_benchmark

matplotlib.use("Agg")

from personalens_utils import analysis
from personalens_utils.analysis import dialogue_stats
from personalens_utils.benchmark_validation import metrics
from personalens_utils.benchmark_validation import tables as validation_tables
from personalens_utils.benchmark_validation.figures import figure3
from personalens_utils.data.demographics import sample_demographics
from personalens_utils.labels.agreement import AGREEMENT_DIMENSIONS
from personalens_utils.labels.sheets import export_sheet
from personalens_utils.measures import scores
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.tables import save_table
from personalens_utils.reference.schema import load_schema
from personalens_utils.runstore.store import RunStore

SELF_BLEU_SAMPLE = 200  # below the store's utterance count, so Table 10 really samples


def _benchmark_records(order_seed: int | None) -> tuple[list, list, list]:
    """Demographics, preferences and (type, domains) task pairs, in a seeded order when asked."""
    schema = load_schema()
    rng = random.Random(11)
    people = sample_demographics(60, seed=5)
    prefs = [
        {
            d.name: {p.name: rng.choice(p.options) if p.options else f"free text {rng.randint(0, 3)}"}
            for d in schema.domains[:6]
            for p in d.preferences[:2]
        }
        for _ in people
    ]
    tasks = [("SD", [d]) for d in schema.domain_names] + [
        ("MD", rng.sample(schema.domain_names, 3)) for _ in range(10)
    ]
    if order_seed is not None:
        for part in (people, prefs, tasks):
            random.Random(order_seed).shuffle(part)
    return people, prefs, tasks


def write_outputs(store_dir: Path, out: Path, order_seed: int | None = None) -> None:
    """Every table of notebooks 02 and 04-06 (and their figures) from one store, under `out`."""
    store = RunStore(store_dir)
    tidy = scores.load_scores(store, judge_model=JUDGE)
    second = scores.load_scores(store, judge_model=SECOND_JUDGE)
    table3 = analysis.table3(tidy)
    table3.save(out, OutputId("table", 3, "assistant_models"))
    table3.save_data(out, OutputId("table", 3, "assistant_models_data"))
    analysis.table12(tidy).save(out, OutputId("table", 12, "user_agent"))
    table4 = analysis.table4(tidy, assistant_model="model-a")
    table4.save(out, OutputId("table", 4, "ablation"))
    table4.save_data(out, OutputId("table", 4, "ablation_data"))
    rated = tidy[tidy["dimension"].isin(AGREEMENT_DIMENSIONS)]
    second = second[second["dimension"].isin(AGREEMENT_DIMENSIONS)]
    analysis.table5(
        rated[rated["dialogue_id"].isin(set(second["dialogue_id"]))],
        None,
        judge_model=JUDGE,
        second_judge=second,
        second_judge_model=SECOND_JUDGE,
        backend_names=scores.backends(rated),
    ).save(out, OutputId("table", 5, "agreement"), float_format="{:.3f}")
    analysis.judge_missing(store, JUDGE, "v1").save(out, OutputId("table", "J1", "judge_missing_rate"))
    analysis.judge_scores(tidy).save(out, OutputId("table", "J2", "judge_scores"))
    dialogues = dialogue_stats.dialogues_frame(store)
    dialogue_stats.table13(dialogues, assistant_model="model-a", assistant_setting="base").save(
        out, OutputId("table", 13, "dialogue_stats"))
    table10 = validation_tables.table10(store_dir, self_bleu_sample=SELF_BLEU_SAMPLE)
    table10.save(out, OutputId("table", 10, "lexical_diversity"))
    export_sheet(store, build_benchmark(), out / "annotation", n=20, seed=3)
    analysis.figure4(tidy, assistant_model="model-a").save(out, OutputId("figure", 4, "domains"))
    fig5 = analysis.figure5(scores.turn_frame(tidy), assistant_model="model-a")
    fig5.save(out, OutputId("figure", 5, "turns"))
    save_table(fig5.data, out, "F5", "curves", "Figure 5 curves.")
    analysis.radar_chart(tidy).save(out, OutputId("figure", "_radar", "personalization"))
    people, prefs, tasks = _benchmark_records(order_seed)
    for number in (6, 7):
        save_table(metrics.demographics_table(people, number), out, number, "demographics", "Demographics.")
    save_table(metrics.preference_table(prefs), out, 8, "preferences", "Preferences.")
    per_domain, totals = metrics.task_table(tasks, tasks)
    save_table(per_domain, out, 1, "tasks", "Tasks.")
    save_table(totals, out, 1, "totals", "Totals.")
    figure3(people).save(out, OutputId("figure", 3, "demographics"))
