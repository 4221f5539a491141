"""Runs exported as Inspect logs and as a Hugging Face dataset folder, and imported back (offline backend)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from inspect_ai.log import read_eval_log

from personalens_utils import analysis
from personalens_utils.analysis import dialogue_stats, scores
from personalens_utils.data import load_benchmark
from personalens_utils.export.formats import ExportError, import_run, to_hf_dataset, to_inspect
from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm import LLMClient
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.run_card import read_card
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig
from personalens_utils.simulation.runner import run_simulation

pytestmark = pytest.mark.slow
CHROMIUM = os.environ.get("PERSONALENS_CHROMIUM") or shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 2-user benchmark, dialogues of two assistants, judged on every dimension by one offline judge."""
    root = tmp_path_factory.mktemp("export")
    config = GenerationConfig(n_users=2, seed=3, sd_tasks_per_domain=1, md_tasks=1,
                              domains=("Alarm", "Movies", "Music"))
    with LLMClient("offline", progress=False, use_cache=False) as client:
        generate_benchmark(config, client=client, output_dir=root / "bench", run_dir=root / "gen")
        benchmark = load_benchmark(root / "bench")
        store = RunStore(root / "store")
        for model in ("model-x", "model-y"):
            run_simulation(benchmark, store, client,
                           SimulationConfig(assistant_model=model, user_model="user-sim"))
        run_judging(store, client, benchmark_contexts(benchmark), JudgingConfig(judge_model="judge-1"))
    return root


def test_inspect_logs_read_back_with_every_dialogue_and_score(run, tmp_path):
    store = RunStore(run / "store")
    benchmark = load_benchmark(run / "bench")
    written = to_inspect(store, tmp_path / "logs", benchmark=benchmark)
    dialogues = {d.id: d for d in store.read(Dialogue)}
    judgments = store.read(Judgment)
    assert len(written) == 2  # two assistants, one setting, one judge
    seen = set()
    for path in written:
        log = read_eval_log(str(path))
        assert log.eval.metadata["run_card"] == read_card(store.root)
        for sample in log.samples:
            dialogue = dialogues[sample.id]
            assert log.eval.model == dialogue.assistant_model
            seen.add(sample.id)
            assert sample.messages[0].role == "system" and sample.messages[0].text
            turns = [(t.role, t.content) for t in dialogue.turns]
            assert [(m.role, m.text) for m in sample.messages[1:]] == turns
            mine = {j.dimension: j for j in judgments if j.dialogue_id == dialogue.id}
            assert set(sample.scores) == set(mine)
            for dimension, score in sample.scores.items():
                want = mine[dimension].score
                assert score.value == (want if want is not None else "missing")
                assert score.explanation == mine[dimension].explanation
    assert seen == set(dialogues)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not found (apt-get install chromium)")
def test_inspect_view_bundle_shows_a_dialogue(run, tmp_path):
    from playwright.sync_api import sync_playwright

    store = RunStore(run / "store")
    to_inspect(store, tmp_path / "logs", benchmark=load_benchmark(run / "bench"))
    bundle = tmp_path / "bundle"
    subprocess.run([sys.executable, "-m", "inspect_ai", "view", "bundle", "--log-dir", str(tmp_path / "logs"),
                    "--output-dir", str(bundle)], check=True, capture_output=True, timeout=300)
    dialogue = store.read(Dialogue)[0]
    words = " ".join(dialogue.turns[0].content.split()[:6])
    server = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"], cwd=bundle,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = _port(server)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, timeout=60_000)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/", timeout=60_000)
            page.get_by_text(Path(_log_of(tmp_path / "logs", dialogue)).stem.split("_")[0]).first.click(
                timeout=60_000)
            page.get_by_text(dialogue.id).first.click(timeout=60_000)
            page.get_by_text(words).first.wait_for(timeout=60_000)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


def _port(server: subprocess.Popen[str]) -> int:
    line = server.stdout.readline() if server.stdout else ""
    return int(line.split("port ")[1].split()[0])


def _log_of(folder: Path, dialogue: Dialogue) -> Path:
    return next(p for p in folder.glob("*.eval") if p.name.startswith(dialogue.assistant_model))


def _tables(store: RunStore, out: Path) -> dict[str, bytes]:
    """Notebook 06's CSV tables (3, 12, 13) of a store, as its cells make them."""
    tidy = scores.load_scores(store, judge_model="judge-1", user_model="user-sim", judge_prompt_set="kit")
    models = sorted(tidy["assistant_model"].unique())
    analysis.table3(tidy, setting="base", models=models, seed=0).save(out, 3, "assistant_models")
    analysis.table12(tidy, setting="base", seed=0).save(out, 12, "user_agent")
    frame = dialogue_stats.dialogues_frame(store)
    dialogue_stats.table13(frame[frame["user_model"] == "user-sim"], assistant_model=models[0],
                           assistant_setting="base", task_types=["SD", "MD"]).save(out, 13, "dialogue_stats")
    return {p.name: p.read_bytes() for p in sorted(out.rglob("*.csv"))}


def test_dataset_round_trip_gives_the_same_store_and_tables(run, tmp_path):
    store = RunStore(run / "store")
    folder = to_hf_dataset(store, tmp_path / "dataset", license="cc-by-nc-4.0")
    card = (folder / "README.md").read_text()
    assert card.startswith("---\nlicense: cc-by-nc-4.0\n") and "\n- protocol: " in card
    cache = str(tmp_path / "hf-cache")  # datasets' own cache could answer from an earlier folder's files
    loaded = datasets.load_dataset(str(folder), "dialogues", cache_dir=cache)["train"]
    assert len(loaded) == len(store.read(Dialogue))
    everything = datasets.DatasetDict({
        name: datasets.load_dataset(str(folder), name, cache_dir=cache)["train"]
        for name in ("dialogues", "judgments", "run_card")})
    imported = import_run(everything, tmp_path / "imported")
    for kind in (Dialogue, Judgment):
        assert imported.path(kind).read_bytes() == store.path(kind).read_bytes()
    card_bytes = (run / "store" / "run_card.json").read_bytes()
    assert (tmp_path / "imported" / "run_card.json").read_bytes() == card_bytes
    assert import_run(folder, tmp_path / "from_folder").path(Judgment).read_bytes() == \
        store.path(Judgment).read_bytes()
    original = _tables(store, tmp_path / "t_original")
    again = _tables(imported, tmp_path / "t_imported")
    assert set(original) >= {"table3_assistant_models.csv", "table12_user_agent.csv"} and original == again


def test_imported_run_is_judged_again_by_another_judge(run, tmp_path):
    folder = to_hf_dataset(RunStore(run / "store"), tmp_path / "ds", license="mit")
    imported = import_run(folder, tmp_path / "run")
    before = len(imported.read(Judgment))
    with LLMClient("offline", progress=False, use_cache=False) as client:
        run_judging(imported, client, benchmark_contexts(load_benchmark(run / "bench")),
                    JudgingConfig(judge_model="judge-2"))
    judges = {j.judge_model for j in imported.read(Judgment)}
    assert judges == {"judge-1", "judge-2"} and len(imported.read(Judgment)) == 2 * before
    assert [j["model"] for j in read_card(imported.root)["judges"]] == ["judge-1", "judge-2"]  # the card too


def test_bad_inputs_name_what_is_wrong(run, tmp_path):
    store = RunStore(run / "store")
    card = (run / "store" / "run_card.json").read_bytes()
    with pytest.raises(ExportError, match="license"):
        to_hf_dataset(store, tmp_path / "ds")
    folder = to_hf_dataset(store, tmp_path / "ds", license="mit")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "dialogues.jsonl").write_bytes(b'{"id": "x"}\n')
    with pytest.raises(ExportError, match="already holds"):
        import_run(folder, taken)
    assert (taken / "dialogues.jsonl").read_bytes() == b'{"id": "x"}\n'
    with pytest.raises(ExportError, match="not a PersonaLens dataset folder"):
        import_run(tmp_path, tmp_path / "new")
    with pytest.raises(ExportError, match="holds no dialogues"):
        to_inspect(RunStore(tmp_path / "empty"), tmp_path / "logs")
    assert (run / "store" / "run_card.json").read_bytes() == card  # exports write nothing into the store
