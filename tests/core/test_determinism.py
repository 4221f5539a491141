"""Same store contents and parameters give byte-identical tables and figures (issue 9, item 6).

Records reach the run store in thread-completion order, so two runs of the same work append them
in different orders. Two stores hold the same records appended in two orders (one shuffled with a
fixed seed); every analysis and validation table and every figure made from them must be the same
bytes: those of the first written in this session (`paper_outputs`), those of the shuffled one by a
fresh interpreter with another PYTHONHASHSEED (set and dict order of strings) and its inputs in another
order.
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
from support.checkout import ROOT

from personalens_utils.benchmark_validation import lexical
from personalens_utils.labels.sheets import MANIFEST_NAME
from personalens_utils.measures.stats import bootstrap_ci, paired_comparison, sign_flip_pvalue
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("determinism")]  # one worker makes `outputs`
SHUFFLE_SEED = 7


def shuffled_copy(source: RunStore, target: Path) -> RunStore:
    """The records of `source` appended to a new store in another (seeded random) order."""
    store = RunStore(target)
    for kind in (Dialogue, Judgment):
        records = source.read(kind)
        random.Random(SHUFFLE_SEED).shuffle(records)
        store.extend(records)
    return store


def _files(out: Path) -> dict[str, bytes]:
    """Every output file by relative path; the manifest is left out (it names the store's folder)."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != MANIFEST_NAME
    }


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, paper_outputs) -> dict[str, dict[str, bytes]]:
    root = tmp_path_factory.mktemp("determinism")
    first = RunStore(paper_outputs / "store")
    shuffled_copy(first, root / "b" / "store")
    assert [r["id"] for _, r in first.iter_lines(Dialogue)] != [
        r["id"] for _, r in RunStore(root / "b" / "store").iter_lines(Dialogue)
    ], "the two stores must hold their records in different orders"
    hash_seed = str(int(os.environ.get("PYTHONHASHSEED", "0") or 0) + 12345)
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
        "from support.paper_outputs import write_outputs; "
        "write_outputs(Path(sys.argv[2]), Path(sys.argv[3]), order_seed=int(sys.argv[4]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "MPLBACKEND": "Agg"}
    subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "tests"), str(root / "b" / "store"),
         str(root / "b" / "out"), str(SHUFFLE_SEED)],
        check=True,
        env=env,
        cwd=ROOT,
    )
    return {"a": _files(paper_outputs / "out"), "b": _files(root / "b" / "out")}


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


def test_another_append_order_interpreter_and_hash_seed_give_the_same_bytes(outputs):
    tables = [n for n in outputs["a"] if n.endswith((".csv", ".md", ".tex"))]
    assert len(tables) >= 3 * 15
    assert _differing(outputs["a"], outputs["b"]) == []


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
