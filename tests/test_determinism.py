"""Same store contents and parameters give byte-identical tables and figures (issue 9, item 6).

Records reach the run store in thread-completion order, so two runs of the same work append them
in different orders. Two stores hold the same records appended in two orders (one shuffled with a
fixed seed); every analysis and validation table and every figure made from them must be the same
bytes, also in a fresh interpreter with another PYTHONHASHSEED (set and dict order of strings).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest
from test_analysis_support import JUDGE, SECOND_JUDGE, build_benchmark, build_store

from personalens_utils import analysis
from personalens_utils.analysis import annotation, dialogue_stats, scores
from personalens_utils.analysis.stats import bootstrap_ci, paired_comparison, sign_flip_pvalue
from personalens_utils.data.demographics import sample_demographics
from personalens_utils.outputs.tables import save_table
from personalens_utils.reference.schema import load_schema
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.validation import lexical
from personalens_utils.validation import metrics as V
from personalens_utils.validation import tables as VT
from personalens_utils.validation.figures import figure3

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("determinism")]
TESTS = Path(__file__).resolve().parent
SHUFFLE_SEED = 7
SELF_BLEU_SAMPLE = 200  # below the store's utterance count, so Table 10 really samples


def shuffled_copy(source: RunStore, target: Path) -> RunStore:
    """The records of `source` appended to a new store in another (seeded random) order."""
    store = RunStore(target)
    for kind in (Dialogue, Judgment):
        records = source.read(kind)
        random.Random(SHUFFLE_SEED).shuffle(records)
        store.extend(records)
    return store


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
    table3.save(out, 3, "assistant_models")
    table3.save_data(out, 3, "assistant_models_data")
    analysis.table12(tidy).save(out, 12, "user_agent")
    table4 = analysis.table4(tidy, assistant_model="model-a")
    table4.save(out, 4, "ablation")
    table4.save_data(out, 4, "ablation_data")
    rated = tidy[tidy["dimension"].isin(analysis.AGREEMENT_DIMENSIONS)]
    second = second[second["dimension"].isin(analysis.AGREEMENT_DIMENSIONS)]
    analysis.table5(
        rated[rated["dialogue_id"].isin(set(second["dialogue_id"]))],
        None,
        judge_model=JUDGE,
        second_judge=second,
        second_judge_model=SECOND_JUDGE,
        backend_names=scores.backends(rated),
    ).save(out, 5, "agreement", float_format="{:.3f}")
    analysis.judge_missing(store, JUDGE, "v1").save(out, "J1", "judge_missing_rate")
    analysis.judge_scores(tidy).save(out, "J2", "judge_scores")
    dialogues = dialogue_stats.dialogues_frame(store)
    dialogue_stats.table13(dialogues, assistant_model="model-a", assistant_setting="base").save(
        out, 13, "dialogue_stats"
    )
    VT.table10(store_dir, self_bleu_sample=SELF_BLEU_SAMPLE).save(out, 10, "lexical_diversity")
    annotation.export_sheet(store, build_benchmark(), out / "annotation", n=20, seed=3)
    analysis.figure4(tidy, assistant_model="model-a").save(out, 4, "domains")
    fig5 = analysis.figure5(scores.turn_frame(tidy), assistant_model="model-a")
    fig5.save(out, 5, "turns")
    save_table(fig5.data, out, "F5", "curves", "Figure 5 curves.")
    analysis.radar_chart(tidy).save(out, "_radar", "personalization")
    people, prefs, tasks = _benchmark_records(order_seed)
    for number in (6, 7):
        save_table(V.demographics_table(people, number), out, number, "demographics", "Demographics.")
    save_table(V.preference_table(prefs), out, 8, "preferences", "Preferences.")
    per_domain, totals = V.task_table(tasks, tasks)
    save_table(per_domain, out, 1, "tasks", "Tasks.")
    save_table(totals, out, 1, "totals", "Totals.")
    figure3(people).save(out, 3, "demographics")


def _files(out: Path) -> dict[str, bytes]:
    """Every output file by relative path; the manifest is left out (it names the store's folder)."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != annotation.MANIFEST_NAME
    }


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    root = tmp_path_factory.mktemp("determinism")
    first = build_store(root / "a" / "store")
    shuffled_copy(first, root / "b" / "store")
    assert [r["id"] for _, r in first.iter_lines(Dialogue)] != [
        r["id"] for _, r in RunStore(root / "b" / "store").iter_lines(Dialogue)
    ], "the two stores must hold their records in different orders"
    write_outputs(root / "a" / "store", root / "a" / "out")
    write_outputs(root / "b" / "store", root / "b" / "out", order_seed=SHUFFLE_SEED)
    hash_seed = str(int(os.environ.get("PYTHONHASHSEED", "0") or 0) + 12345)
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
        "from test_determinism import write_outputs; "
        "write_outputs(Path(sys.argv[2]), Path(sys.argv[3]), order_seed=int(sys.argv[4]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "MPLBACKEND": "Agg"}
    subprocess.run(
        [sys.executable, "-c", script, str(TESTS), str(root / "b" / "store"), str(root / "c" / "out"), "3"],
        check=True,
        env=env,
        cwd=TESTS.parent,
    )
    return {name: _files(root / name / "out") for name in ("a", "b", "c")}


EXPECTED = {
    "tables/table3_assistant_models.csv",
    "tables/table3_assistant_models_data.csv",
    "tables/table4_ablation.csv",
    "tables/table4_ablation_data.csv",
    "tables/table5_agreement.csv",
    "tables/table10_lexical_diversity.csv",
    "tables/table12_user_agent.csv",
    "tables/table13_dialogue_stats.csv",
    "tables/tableJ1_judge_missing_rate.csv",
    "tables/tableJ2_judge_scores.csv",
    "tables/table1_tasks.csv",
    "tables/table6_demographics.csv",
    "tables/table8_preferences.csv",
    "annotation/annotation_sheet.csv",
    "figures/figure3_demographics.pdf",
    "figures/figure4_domains.png",
    "figures/figure5_turns.pdf",
    "figures/figure_radar_personalization.png",
}


def _differing(first: dict[str, bytes], second: dict[str, bytes]) -> list[str]:
    return sorted(name for name in first.keys() | second.keys() if first.get(name) != second.get(name))


def test_every_output_is_written(outputs):
    assert set(outputs["a"]) >= EXPECTED


def test_two_append_orders_give_the_same_bytes(outputs):
    tables = [n for n in outputs["a"] if n.endswith((".csv", ".md", ".tex"))]
    assert len(tables) >= 3 * 15
    assert _differing(outputs["a"], outputs["b"]) == []


def test_another_interpreter_and_hash_seed_give_the_same_bytes(outputs):
    assert _differing(outputs["a"], outputs["c"]) == []


def test_resampling_ignores_the_order_of_its_input():
    values = [float(v % 5) for v in range(300)]
    reordered = random.Random(1).sample(values, len(values))
    assert bootstrap_ci(values, seed=4) == bootstrap_ci(reordered, seed=4)
    diffs = [float(v % 3) - 1.0 for v in range(40)]
    assert sign_flip_pvalue(diffs, seed=2) == sign_flip_pvalue(diffs[::-1], seed=2)
    treatment, control = [float(v % 4) for v in range(50)], [float(v % 3) for v in range(50)]
    pairs = list(zip(treatment, control, strict=True))
    random.Random(3).shuffle(pairs)
    again = paired_comparison([t for t, _ in pairs], [c for _, c in pairs], seed=5)
    assert paired_comparison(treatment, control, seed=5) == again


def test_the_self_bleu_sample_ignores_the_order_of_the_dialogues():
    rng = random.Random(4)
    words = ["jazz", "movie", "alarm", "tonight", "quiet", "book", "table", "for", "two", "please"]
    dialogues = [
        {"id": f"d{i}", "task_type": "SD", "status": "terminated",
         "turns": [{"role": "user", "content": " ".join(rng.choices(words, k=rng.randint(3, 9)))}
                   for _ in range(3)]}
        for i in range(40)
    ]
    reordered = random.Random(9).sample(dialogues, len(dialogues))
    first = lexical.lexical_diversity(dialogues, self_bleu_sample=30)
    assert first.equals(lexical.lexical_diversity(reordered, self_bleu_sample=30))
