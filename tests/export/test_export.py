"""Runs exported as Inspect logs and as a Hugging Face dataset folder, and imported back (offline backend)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from personalens_utils import analysis
from personalens_utils.analysis import dialogue_stats
from personalens_utils.data import load_benchmark
from personalens_utils.export.arguments import ExportArgumentError
from personalens_utils.export.formats import ExportError, import_run, read_run_card, to_hf_dataset, to_inspect
from personalens_utils.export.official import (
    dialogue_path,
    dialogue_root,
    evaluation_of,
    evaluation_root,
    export_official,
    import_official,
    import_official_run,
    iter_dialogue_files,
    iter_evaluation_files,
    plan_export,
    read_dialogue_file,
)
from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm import LLMClient
from personalens_utils.measures import scores
from personalens_utils.outputs.ids import OutputId
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
    from inspect_ai.log import read_eval_log  # here: inspect-ai takes a worker a second to import

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
    table3 = analysis.table3(tidy, setting="base", models=models, seed=0)
    table3.save(out, OutputId("table", 3, "assistant_models"))
    analysis.table12(tidy, setting="base", seed=0).save(out, OutputId("table", 12, "user_agent"))
    frame = dialogue_stats.dialogues_frame(store)
    dialogue_stats.table13(frame[frame["user_model"] == "user-sim"], assistant_model=models[0],
                           assistant_setting="base", task_types=["SD", "MD"]).save(
        out, OutputId("table", 13, "dialogue_stats"))
    return {p.name: p.read_bytes() for p in sorted(out.rglob("*.csv"))}


def test_dataset_round_trip_gives_the_same_store_and_tables(run, tmp_path):
    import datasets

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


class _Place(os.PathLike):
    """A path-like that is not a pathlib.Path, as other libraries make them."""

    def __init__(self, path: Path):
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)


def test_every_path_argument_takes_a_str_and_a_pathlike(run, tmp_path):
    store, bench = run / "store", run / "bench"
    stored = RunStore(store).read(Dialogue)
    benchmark = load_benchmark(bench)
    for i, kind in enumerate((str, _Place)):
        logs = to_inspect(kind(store), kind(tmp_path / f"logs{i}"))
        assert len(logs) == 2 and all(p.is_file() for p in logs)
        assert read_run_card(kind(store)) == read_card(store)
        folder = to_hf_dataset(kind(store), kind(tmp_path / f"ds{i}"), benchmark_dir=kind(bench))
        imported = import_run(kind(folder), kind(tmp_path / f"run{i}"))
        assert imported.path(Dialogue).read_bytes() == RunStore(store).path(Dialogue).read_bytes()
        root, into = tmp_path / f"official{i}", kind(tmp_path / f"into{i}")
        written = export_official(kind(store), kind(root), benchmark=benchmark, allow_unofficial=True)
        assert set(plan_export(kind(store), kind(root), benchmark=benchmark).files) == set(written)
        assert dialogue_path(kind(root), stored[0]) in written
        assert read_dialogue_file(kind(written[0])) in stored
        assert len(import_official(kind(root), into=into)) == len(written)
        assert len(import_official_run(kind(root), into=into).dialogues) == len(written)
        answer = root / "output" / "evaluation" / "user0" / "m" / "personalization" / "j" / "SD-Alarm-1.txt"
        assert evaluation_of(kind(answer)) == ("SD-Alarm-1", "personalization")
        assert dialogue_root(kind(root)) == root / "output" / "dialogue"
        assert evaluation_root(kind(root)) == root / "output" / "evaluation"
        assert list(iter_dialogue_files(kind(root))) == sorted(written)
        assert list(iter_evaluation_files(kind(root))) == []


@pytest.mark.parametrize(("call", "named"), [
    (lambda run, out: to_inspect(42, out), "to_inspect(store) takes a RunStore or its folder"),
    (lambda run, out: to_inspect(run / "store", 3.5), "to_inspect(out_dir) takes a path"),
    (lambda run, out: to_inspect(run / "store", out, benchmark=str(run / "bench")), "load_benchmark("),
    (lambda run, out: to_hf_dataset(run / "store", bytes(out)), "to_hf_dataset(out_dir) takes a path"),
    (lambda run, out: to_hf_dataset(run / "store", out, benchmark_dir=1), "benchmark_dir takes a path"),
    (lambda run, out: read_run_card(None), "read_run_card(store)"),
    (lambda run, out: export_official(7, out), "source takes a RunStore, its folder"),
    (lambda run, out: export_official([object()], out), "source item 1 is a object"),
    (lambda run, out: plan_export(run / "store", None), "plan_export(root) takes a path"),
    (lambda run, out: import_official(out, into=3), "import_official(into)"),
    (lambda run, out: evaluation_of(None), "evaluation_of(path) takes a path"),
    (lambda run, out: read_dialogue_file(b"x_dialogue.json"), "read_dialogue_file(path) takes a path"),
    (lambda run, out: import_run(5, out), "import_run(source) takes a dataset folder"),
    (lambda run, out: import_run(run / "store", 5), "import_run(run_dir) takes a path"),
])
def test_an_argument_of_another_type_is_named(run, tmp_path, call, named):
    with pytest.raises(ExportArgumentError, match=re.escape(named)):
        call(run, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _card(folder: Path) -> str:
    return (folder / "README.md").read_text(encoding="utf-8")


def test_a_generated_benchmark_gives_its_license_and_the_card_says_where_it_came_from(run, tmp_path):
    store, inherited = RunStore(run / "store"), "inherited from the benchmark the run was made on"
    card = _card(to_hf_dataset(store, tmp_path / "inherited", benchmark_dir=run / "bench"))
    assert card.startswith("---\nlicense: apache-2.0\n")  # the kit's: the kit generated it offline
    assert f"apache-2.0, {inherited} (the kit's own license" in card
    given = _card(to_hf_dataset(store, tmp_path / "given", license="mit", benchmark_dir=run / "bench"))
    assert given.startswith("---\nlicense: mit\n")
    assert "mit, as given by whoever exported the run (`license=`)." in given and "inherited" not in given
    stated = tmp_path / "stated"
    shutil.copytree(run / "bench", stated)
    (stated / "LICENSE").write_text("cc-by-4.0\n\nThe full text.\n")
    card = _card(to_hf_dataset(store, tmp_path / "from_file", benchmark_dir=stated))
    assert f"cc-by-4.0, {inherited} (the first line of the benchmark's LICENSE file)" in card


def test_a_benchmark_a_model_generated_is_refused_for_the_reason_it_has(run, tmp_path):
    made = tmp_path / "made"
    shutil.copytree(run / "bench", made)
    manifest = json.loads((made / "generation.json").read_text())
    (made / "generation.json").write_text(json.dumps({**manifest, "backend": "anthropic", "label": None}))
    with pytest.raises(ExportError, match="generated by backend 'anthropic'") as refused:
        to_hf_dataset(run / "store", tmp_path / "ds", benchmark_dir=made)
    assert "benchmark_dir=" not in str(refused.value)  # it was given: the message must not ask for it
    assert not (tmp_path / "ds").exists()
    with pytest.raises(ExportError, match="no LICENSE file") as plain:
        to_hf_dataset(run / "store", tmp_path / "ds", benchmark_dir=tmp_path)
    assert "benchmark_dir=" not in str(plain.value)
