"""Folders checked before the first call, and every parameter checked in the setup cell (issue 29, parts 4
and 5): a read-only output folder, run store or parent folder stops the setup cell in one line naming
the folder, before any model call and with nothing written; a store inside a read-only parent can be
written (its writer lock lives inside it); a read-only store can still be read; a bad parameter is one
`SessionError` naming it, also when nothing would be done with it; notebook 07 takes `shard`."""

from __future__ import annotations

from pathlib import Path

import papermill
import pytest
from support.notebook_output import MAX_LINES, error_lines
from support.read_only import read_only
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants.reference_assistants import DESIGNED_ORDER
from personalens_utils.base import paths
from personalens_utils.data import load_benchmark, save_benchmark
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm.client import LLMClient
from personalens_utils.measures.scores import load_scores
from personalens_utils.reproduce.cli import parse_args, problems
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore, StoreError, merge_stores
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import SessionConfig, SessionError
from personalens_utils.simulation import SimulationConfig, run_simulation

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny generated benchmark on disk; runs/ and the response cache in the test's folder."""
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))
    save_benchmark(tiny_benchmark(n_users=2), tmp_path / "bench")
    return tmp_path / "bench"


def _config(bench: Path, tmp_path: Path, **given: object) -> SessionConfig:
    """The session of a notebook on `bench`, its run store and outputs in the test's folder unless given."""
    return SessionConfig(**{"benchmark_dir": bench, "run_dir": tmp_path / "run",  # type: ignore[arg-type]
                            "output_dir": tmp_path / "out", **given})


def _simulated(bench: Path, run_dir: Path, **config: object) -> RunStore:
    with LLMClient("offline", progress=False) as client:
        run_simulation(load_benchmark(bench), run_dir, client, SimulationConfig(**config))  # type: ignore[arg-type]
    return RunStore(run_dir)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message and error.value._render_traceback_() == [f"SessionError: {message}"]
    return message


def test_a_read_only_output_dir_stops_the_setup_cell_naming_it(bench: Path, tmp_path: Path) -> None:
    with read_only(tmp_path / "locked") as locked:
        for output_dir in (locked, locked / "out"):  # the folder itself, or the parent it would be made in
            with pytest.raises(SessionError) as refused:
                Session.open(_config(bench, tmp_path, output_dir=output_dir))
            message = _one_line(refused)
            assert message.startswith(f"parameter output_dir: cannot write to {output_dir} ({locked} is ")
        assert list(locked.iterdir()) == []
    assert not (tmp_path / "run").exists()


def test_a_read_only_run_store_is_refused_before_any_call_and_keeps_what_it_holds(
    bench: Path, tmp_path: Path
) -> None:
    store = _simulated(bench, tmp_path / "run", settings=("base",))
    before = _files(store.root)
    with read_only(store.root):
        with pytest.raises(SessionError) as refused:
            Session.open(_config(bench, tmp_path, run_dir=store.root, settings=["base+I"]))
        assert _one_line(refused).startswith(f"parameter run_dir: cannot write the run store {store.root} ")
        assert str(store.root) in str(refused.value)
        with LLMClient("offline", progress=False) as client, pytest.raises(StoreError) as stopped:
            run_simulation(load_benchmark(bench), store.root, client, SimulationConfig(settings=("base+I",)))
        assert client.totals()["calls"] == 0, "refused before the first call"
        assert str(stopped.value).startswith(f"cannot write the run store {store.root}: ")
        assert "\n" not in str(stopped.value)
        # a notebook that only reads the store (06 with annotation sheets, 07) opens it and reads it
        reader = Session.open(_config(bench, tmp_path, run_dir=store.root, writes_run_store=False))
        assert len(reader.run_store.read(Dialogue)) == 2 * 4
    assert _files(store.root) == before, "nothing was written into the read-only store"
    assert not (tmp_path / "out").exists()


def test_a_store_in_a_read_only_parent_is_written_and_one_not_yet_made_there_is_refused(
    bench: Path, tmp_path: Path
) -> None:
    parent = tmp_path / "parent"
    (parent / "store").mkdir(parents=True)
    with read_only(parent, inside=False):
        opened = Session.open(_config(bench, tmp_path, run_dir=parent / "store"))
        store = _simulated(bench, opened.run_store.root, settings=("base",))
        assert len(store.read(Dialogue)) == 2 * 4, "the writer lock is inside the store, not beside it"
        with pytest.raises(SessionError) as refused:
            Session.open(_config(bench, tmp_path, run_dir=parent / "new"))
        assert _one_line(refused).startswith(f"parameter run_dir: cannot write the run store {parent / 'new'}"
                                             f" ({parent} is not a folder this process can write)")
        assert sorted(p.name for p in parent.iterdir()) == ["store"]


def test_a_run_with_nothing_to_do_leaves_no_store_folder_behind(bench: Path, tmp_path: Path) -> None:
    store = _simulated(bench, tmp_path / "run", settings=("base",), task_types=())
    assert not store.root.exists()
    with store.writing("simulation"):
        assert sorted(p.name for p in store.root.iterdir()) == [".simulation.writer",
                                                                ".simulation.writer-info"]
    assert not store.root.exists()


def test_a_read_only_store_is_still_analysed(bench: Path, tmp_path: Path) -> None:
    store = _simulated(bench, tmp_path / "run", settings=("base",))
    with LLMClient("offline", progress=False) as client:
        run_judging(store, client, benchmark_contexts(load_benchmark(bench)),
                    JudgingConfig(judge_model="judge-sim", dimensions=["task_completion"]))
    before = _files(store.root)
    with read_only(store.root):
        reader = Session.open(_config(bench, tmp_path, run_dir=store.root, writes_run_store=False))
        tidy = load_scores(reader.run_store, judge_model="judge-sim")
    assert len(tidy) == len(store.read(Judgment)) == 2 * 4
    assert _files(store.root) == before


def test_a_read_only_response_cache_stops_a_session_on_a_network_backend(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with read_only(tmp_path / "locked") as locked:
        monkeypatch.setenv("PERSONALENS_CACHE", str(locked / "cache"))
        Session.open(_config(bench, tmp_path))  # the offline backend keeps no cache
        with pytest.raises(SessionError) as refused:
            Session.open(_config(bench, tmp_path, models={"judge_model": "anthropic:claude-sonnet-4-5"}))
        assert "PERSONALENS_CACHE" in _one_line(refused) and str(locked / "cache") in str(refused.value)


# timeouts, users and task types were refused so before (notebooks/test_session.py, llm/test_llm_timeouts.py)
BAD = [
    ({"max_concurrency": 0}, "max_concurrency=0"),
    ({"max_concurrency": "8"}, "max_concurrency='8'"),
    ({"max_concurrency": {"anthropic": 0}}, "max_concurrency['anthropic']=0"),
    ({"max_concurrency": {"antropic": 4}}, "max_concurrency['antropic']"),
    ({"max_cost_usd": -1}, "max_cost_usd"),
    ({"dimensions": ["wit"]}, "dimensions: unknown ['wit']"),
    ({"dimensions": "task_completion,wit"}, "dimensions: unknown ['wit']"),
    ({"dimensions": []}, "dimensions=[]"),
    ({"settings": ["base+X"]}, "settings: "),
    ({"settings": ["bass"]}, "settings: "),
    ({"shard": "3/2"}, "shard: "),
    ({"shard": "half"}, "shard: "),
    ({"repeats": 0}, "repeats"),
    ({"judge_samples": 1.5}, "judge_samples"),
    ({"backend": "antropic"}, "backend='antropic'"),
]


@pytest.mark.parametrize(("given", "named"), BAD, ids=[named for _, named in BAD])
def test_a_bad_parameter_is_one_line_naming_it(bench: Path, tmp_path: Path, given: dict, named: str) -> None:
    with pytest.raises(SessionError) as refused:
        Session.open(_config(bench, tmp_path, **given))
    message = _one_line(refused)
    assert named in message, message
    assert not (tmp_path / "run").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("given", "named"), BAD, ids=[named for _, named in BAD])
def test_a_notebook_s_bad_parameter_read_by_from_parameters_is_the_same_one_line(
        bench: Path, tmp_path: Path, given: dict, named: str) -> None:
    """`Session.from_parameters` (every notebook's setup cell) refuses as `Session.open` does."""
    parameters = {"benchmark_dir": bench, "run_dir": tmp_path / "run", "output_dir": tmp_path / "out",
                  **given}
    with pytest.raises(SessionError) as refused:
        Session.from_parameters(parameters)
    with pytest.raises(SessionError) as opened:
        Session.open(_config(bench, tmp_path, **given))
    assert _one_line(refused) == str(opened.value)
    assert not (tmp_path / "run").exists() and not (tmp_path / "out").exists()


def test_from_parameters_reads_a_notebook_s_fields_and_roles_by_name(bench: Path, tmp_path: Path) -> None:
    parameters = {"benchmark_dir": bench, "run_dir": tmp_path / "run", "output_dir": tmp_path / "out",
                  "settings": "base,base+I", "repeats": 2, "prompt_set": "not a kit prompt set",
                  "store": "a name the setup cell set", "user_model": "u", "second_judge_model": None,
                  "assistant_model": None, "seed": 3}
    opened = Session.from_parameters(parameters, models=("user_model", "second_judge_model"),
                                     assistants=("assistant_model",), optional=("second_judge_model",),
                                     not_session=("prompt_set",), default_output="trust")
    given = opened.parameters
    assert given.settings == ["base", "base+I"] and given.prompt_set == "kit" and given.repeats == 2
    assert opened.run_store.root == tmp_path / "run"
    assert sorted(given.model_specs) == ["user_model"] and given.model_specs["user_model"].model == "u"
    assert list(opened.runtime.assistant_specs) == ["assistant_model"]
    with pytest.raises(SessionError, match="declares no parameter 'judge_model'"):
        Session.from_parameters(parameters, models=("judge_model",), not_session=("prompt_set",))


def test_good_work_parameters_are_kept_read(bench: Path, tmp_path: Path) -> None:
    opened = Session.open(_config(bench, tmp_path, dimensions="task_completion,personalization",
                                  settings="base,base+I", shard="2/3", max_concurrency={"offline": 2},
                                  repeats=2))
    given = opened.parameters
    assert given.dimensions == ["task_completion", "personalization"] and given.repeats == 2
    assert given.settings == ["base", "base+I"] and given.shard == "2/3"
    assert given.max_concurrency == {"offline": 2}
    assert Session.open(_config(bench, tmp_path)).parameters.dimensions is None


def test_reproduce_checks_the_folders_it_writes_before_any_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with read_only(tmp_path / "runs") as runs:
        monkeypatch.setattr("personalens_utils.reproduce.cli.runs_dir", lambda: runs)
        monkeypatch.setattr("personalens_utils.reproduce.settings.runs_dir", lambda: runs)
        found = [line for line in problems(parse_args(["--run", "x"])) if "read-only" in line]
    why = f"({runs} is read-only or not a folder); nothing was run"
    assert found[:2] == [f"--run 'x': cannot write {runs / 'x'} {why}",
                         f"runs/LATEST: cannot write {runs} {why}"]


# -- through papermill: each stop is a few lines after papermill's own frame ----------------------------


def _run(notebook: str, executed: Path, parameters: dict) -> papermill.PapermillExecutionError:
    with pytest.raises(papermill.PapermillExecutionError) as caught:
        papermill.execute_notebook(str(NOTEBOOKS / notebook), str(executed), kernel_name="python3",
                                   progress_bar=False, parameters=parameters)
    shown = error_lines(executed)
    assert caught.value.ename == "SessionError", shown
    assert 1 <= len(shown) <= MAX_LINES, shown
    assert len(str(caught.value).strip().splitlines()) <= MAX_LINES
    return caught.value


@pytest.mark.slow
def test_notebook_04_with_an_unknown_dimension_stops_even_with_nothing_to_judge(bench: Path, tmp_path: Path):
    stopped = _run("04_judging.ipynb", tmp_path / "04.ipynb", {
        "benchmark_dir": str(bench), "run_dir": str(tmp_path / "run"), "output_dir": str(tmp_path / "out"),
        "dimensions": "wit"})
    assert "parameter dimensions: unknown ['wit']" in stopped.evalue
    assert not (tmp_path / "run").exists() and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_notebook_04_with_a_read_only_output_dir_judges_nothing(bench: Path, tmp_path: Path):
    store = _simulated(bench, tmp_path / "run", settings=("base",))
    before = _files(store.root)
    with read_only(tmp_path / "locked") as locked:
        stopped = _run("04_judging.ipynb", tmp_path / "04.ipynb", {
            "benchmark_dir": str(bench), "run_dir": str(store.root), "output_dir": str(locked / "judging")})
        assert list(locked.iterdir()) == []
    assert stopped.evalue.startswith(f"parameter output_dir: cannot write to {locked / 'judging'} ")
    assert _files(store.root) == before, "no judge call was made: no judgment is stored"


@pytest.mark.slow
def test_notebook_03_with_max_concurrency_0_stops_in_the_setup_cell(bench: Path, tmp_path: Path):
    stopped = _run("03_simulation.ipynb", tmp_path / "03.ipynb", {
        "benchmark_dir": str(bench), "run_dir": str(tmp_path / "run"), "output_dir": str(tmp_path / "out"),
        "max_concurrency": 0})
    assert stopped.evalue.startswith("parameter max_concurrency=0: give a whole number of at least 1")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_each_shard_of_notebook_07_simulates_and_judges_only_its_own_work(bench: Path, tmp_path: Path):
    """Two shards of 07 on one run store: the design's new dialogues (sample 1) and the judgments of the
    design split between them, none made twice."""
    pair = list(DESIGNED_ORDER[:2])
    store = RunStore(tmp_path / "run")
    benchmark = load_benchmark(bench)
    for model in pair:
        _simulated(bench, store.root, assistant_model=model, user_model="Claude 3 Sonnet")
    with LLMClient("offline", progress=False) as client:
        run_judging(store, client, benchmark_contexts(benchmark),
                    JudgingConfig(judge_model="Claude 3.5 Sonnet"))
    run_ids = {d.id for d in store.read(Dialogue)} | {j.id for j in store.read(Judgment)}
    new: dict[str, tuple[set[str], set[str]]] = {}
    for shard in ("1/2", "2/2"):
        out = tmp_path / f"out{shard[0]}"
        papermill.execute_notebook(str(NOTEBOOKS / "07_trust.ipynb"), str(tmp_path / f"07-{shard[0]}.ipynb"),
                                   kernel_name="python3", progress_bar=False, parameters={
            "benchmark_dir": str(bench), "users": "all", "run_dir": str(store.root), "output_dir": str(out),
            "second_judge_model": None, "assistant_models": pair, "probe_users": 2, "probe_tasks": 2,
            "n_resamples": 20, "shard": shard})
        trust = RunStore(out / "trust_store")
        new[shard] = ({d.id for d in trust.read(Dialogue)} - run_ids,
                      {j.id for j in trust.read(Judgment)} - run_ids)
    (first_dialogues, first_judgments), (second_dialogues, second_judgments) = new.values()
    assert first_dialogues and second_dialogues and not first_dialogues & second_dialogues
    assert first_judgments and second_judgments and not first_judgments & second_judgments
    merged = RunStore(tmp_path / "merged")
    merge_stores([tmp_path / "out1" / "trust_store", tmp_path / "out2" / "trust_store"], merged)
    assert {d.id for d in merged.read(Dialogue)} == run_ids & {d.id for d in store.read(Dialogue)} | \
        first_dialogues | second_dialogues
    assert {j.id for j in merged.read(Judgment)} >= first_judgments | second_judgments


@pytest.mark.slow
def test_notebook_01_with_a_read_only_generated_dir_generates_nothing(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))
    with read_only(tmp_path / "locked") as locked:
        stopped = _run("01_generation.ipynb", tmp_path / "01.ipynb", {
            "generated_dir": str(locked / "bench"), "run_dir": str(tmp_path / "steps"), "n_users": 2})
        assert list(locked.iterdir()) == []
    assert stopped.evalue.startswith(f"parameter output_dir: cannot write to {locked / 'bench'} ")
    assert not (tmp_path / "steps").exists(), "no generation step ran"
