"""The notebook session: one meaning per parameter, every notebook set up and closed through it."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pandas as pd
import papermill
import pytest
from support.records import dialogue

from personalens_utils import reproduce
from personalens_utils.base import paths
from personalens_utils.base.paths import project_root
from personalens_utils.data import SAMPLES, load_benchmark
from personalens_utils.llm import CallKind, LLMClient, Message, Request
from personalens_utils.reproduce import Settings
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import ReproductionStore, RunStore, StoreError
from personalens_utils.session import places
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import (
    SessionConfig,
    SessionError,
    list_param,
    resolve_session_users,
)

NOTEBOOKS = sorted((project_root() / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PARAMETERS_DOC = project_root() / "docs" / "parameters.md"


def _official_like(root: Path, users: list[int]) -> Path:
    for u in users:
        (root / "profile" / f"user{u}").mkdir(parents=True)
    (root / "task").mkdir()
    return root


def test_users_has_one_meaning(tmp_path):
    official = _official_like(tmp_path / "official", sorted(SAMPLES["sample_50"]))
    generated = _official_like(tmp_path / "generated", [0, 1, 2])
    assert resolve_session_users(official, None) == sorted(SAMPLES["sample_50"])
    assert resolve_session_users(generated, None) is None  # every user of a generated benchmark
    assert resolve_session_users(official, "all") is None
    assert resolve_session_users(official, "sample_30") == sorted(SAMPLES["sample_30"])
    assert resolve_session_users(generated, [2, 0, 2]) == [0, 2]
    with pytest.raises(SessionError, match="users='sample_7'"):
        resolve_session_users(generated, "sample_7")
    with pytest.raises(SessionError, match=r"users=3\.5"):
        resolve_session_users(generated, 3.5)


def test_list_parameters_from_papermill_p_are_read_or_refused_with_a_pointer_to_y(tmp_path):
    generated = _official_like(tmp_path / "generated", [0, 1, 2, 7, 66])
    assert list_param("task_types", "SD,MD") == ["SD", "MD"]
    assert list_param("task_types", "SD") == ["SD"]  # not "S" and "D"
    assert list_param("settings", " base , base+I ") == ["base", "base+I"]
    assert list_param("users", 7, item=int) == [7]
    assert list_param("settings", ("base",)) == ["base"] and list_param("dimensions", None) is None
    assert resolve_session_users(generated, "66,7") == [7, 66]
    assert resolve_session_users(generated, 7) == [7]
    assert resolve_session_users(generated, "sample_50") == sorted(SAMPLES["sample_50"])
    refused = [("users", "[7, 66]", int), ("users", "7,x", int), ("settings", "base,,base+I", str),
               ("task_types", 3, str), ("users", True, int), ("settings", "", str)]
    for name, value, item in refused:
        with pytest.raises(SessionError, match=rf"parameter {name}=.*-y '{name}: \[a, b\]'"):
            list_param(name, value, item=item)
    with pytest.raises(SessionError, match=r"users='7,x'.*-y"):
        resolve_session_users(generated, "7,x")


def test_open_resolves_folders_and_closes_the_client(tmp_path, monkeypatch):
    bench = _official_like(tmp_path / "bench", [0, 1])
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path / "runs")
    closed = []
    real_close = LLMClient.close
    monkeypatch.setattr(LLMClient, "close", lambda self: closed.append(self) or real_close(self))
    with Session.open(SessionConfig(benchmark_dir=bench, users=[1], task_types=["SD"])) as s:
        assert s.run_store.root == tmp_path / "runs" / places.DEFAULT_RUN
        assert s.output_dir.parent == tmp_path / "runs" / "analysis" and s.users == [1]
        client = s.client
        assert s.client is client and client.backend_name == "offline"
        frame = pd.DataFrame({"user_id": [0, 1, 1], "task_type": ["SD", "SD", "MD"]})
        assert s.scope(frame).index.tolist() == [1]
        keep = s.in_scope()
        assert keep(dialogue("a", user_id=1, task_type="SD"))
        assert not keep(dialogue("b", user_id=0, task_type="SD"))
    assert closed == [client]  # closed on leaving the block
    no_store = Session.open(SessionConfig(benchmark_dir=bench, default_run_store=False,
                                          output_dir=tmp_path / "o"))
    assert not no_store.places.has_run_store
    with pytest.raises(SessionError, match="run_dir"):
        _ = no_store.run_store
    with pytest.raises(SessionError, match="task_types"):
        Session.open(SessionConfig(benchmark_dir=bench, task_types=["XD"]))
    config = SessionConfig(benchmark_dir=bench, task_types="MD,SD", output_dir=tmp_path / "o")
    assert Session.open(config).task_types == ("MD", "SD")


def test_each_run_on_default_output_has_a_folder_of_its_own(tmp_path, monkeypatch, capsys):
    """Two runs of a notebook on its defaults never share an output folder (issue 31); `output_dir` given
    wins, then the executed copy's folder the kit's entry point names; records a notebook keeps from run
    to run (07's trust store) stay in one place: the output folder named, else the parent of the run
    folders (issue 39: 09's store went there although an output was named)."""
    bench = _official_like(tmp_path / "bench", [0, 1])
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.delenv(paths.OUTPUT_ENV, raising=False)
    config = SessionConfig(benchmark_dir=bench, default_output="trust")
    first, second = (Session.open(config) for _ in range(2))
    assert first.output_dir != second.output_dir and first.output_dir.is_dir() and second.output_dir.is_dir()
    assert first.output_dir.parent == second.output_dir.parent == tmp_path / "runs" / "trust"
    assert first.records_dir == second.records_dir == tmp_path / "runs" / "trust"
    assert paths.newest_output("trust") == second.output_dir
    said = capsys.readouterr().out.splitlines()
    assert said == [f"this run's tables and figures go to {s.output_dir}" for s in (first, second)]
    monkeypatch.setenv(paths.OUTPUT_ENV, str(tmp_path / "executed"))
    beside = Session.open(config)
    assert beside.output_dir == beside.records_dir == tmp_path / "executed"
    made = paths.new_output_dir("trust")  # the entry point with no executed copy named
    monkeypatch.setenv(paths.OUTPUT_ENV, str(made))
    unnamed = Session.open(config)
    assert unnamed.output_dir == made and unnamed.records_dir == tmp_path / "runs" / "trust"
    given = Session.open(SessionConfig(benchmark_dir=bench, output_dir=tmp_path / "mine"))
    assert given.output_dir == given.records_dir == tmp_path / "mine"
    assert paths.newest_output("trust") == made and paths.newest_output("analysis") is None


def test_the_newest_run_folder_is_found_by_start_and_counter(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path / "runs")
    for name in ("20010102-120000-2", "20010102-120000-10", "20010101-235959-99", "notes"):
        (tmp_path / "runs" / "analysis" / name).mkdir(parents=True)
    assert paths.newest_output("analysis") == tmp_path / "runs" / "analysis" / "20010102-120000-10"
    made = paths.new_output_dir("analysis")
    assert paths.newest_output("analysis") == made and made.name.endswith("-1")


def test_a_benchmark_of_loaded_users_is_taken_from_the_session(official_data, monkeypatch):
    with Session.open(SessionConfig(benchmark_dir=official_data, users=[3, 5, 7], default_run_store=False,
                                    output_dir=official_data.parent / "out")) as s:
        loaded = s.benchmark
        monkeypatch.setattr(places, "load_benchmark", lambda *a, **k: pytest.fail("read the folder again"))
        part = s.load_benchmark([7, 3])
    assert part == load_benchmark(official_data, users=[3, 7]) and part.users[7] is loaded.users[7]
    assert list(part.scenarios["user_id"].unique()) == [3, 7]


def _declared(notebook: Path) -> dict[str, str]:
    return {name: info["help"] for name, info in papermill.inspect_notebook(str(notebook)).items()}


def test_every_notebook_opens_a_session_and_closes_it():
    for notebook in NOTEBOOKS:
        cells = [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
        opened = re.search(r"(Session\.from_parameters|\w+Run\.open)\(globals\(\)", cells[1].source)
        assert opened, f"{notebook.name}: the setup cell opens no Session on its parameters"
        assert "session.close()" in cells[-1].source, f"{notebook.name}: the last cell does not close it"
        assert not any("LLMClient(" in c.source for c in cells), f"{notebook.name} makes its own client"


def _code_lines(source: str) -> list[str]:
    return [line for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_the_setup_cell_after_the_parameters_is_at_most_ten_code_lines(notebook):
    cells = nbformat.read(notebook, as_version=4).cells
    at = next(k for k, cell in enumerate(cells) if "parameters" in cell.metadata.get("tags", []))
    setup = next(cell for cell in cells[at + 1:] if cell.cell_type == "code")
    lines = _code_lines(setup.source)
    assert len(lines) <= 10, f"{notebook.name}: the setup cell has {len(lines)} code lines"


def test_seed_means_sampling_everywhere_and_the_other_seeds_have_their_own_names():
    for notebook in NOTEBOOKS:
        declared = _declared(notebook)
        if "seed" in declared:
            assert re.search(r"bootstrap|sample", declared["seed"]), f"{notebook.name}: {declared['seed']}"
        if "backend" in declared:
            assert "backend_seed" in declared, f"{notebook.name} calls a model but has no backend_seed"
    assert "demographics_seed" in _declared(NOTEBOOKS[0]) and "seed" not in _declared(NOTEBOOKS[0])
    assert "seed" not in _declared(NOTEBOOKS[2])  # 03 samples nothing; its backend has backend_seed


def test_parameters_doc_lists_every_notebook_parameter():
    text = PARAMETERS_DOC.read_text(encoding="utf-8")
    for notebook in NOTEBOOKS:
        for name in _declared(notebook):
            assert re.search(rf"^\| `{name}` \|.*{notebook.name[:2]}", text, re.M), (notebook.name, name)


def test_reproduce_passes_each_seed_under_its_own_name(monkeypatch, tmp_path):
    calls: dict[str, dict] = {}

    def record(settings, name, out, params, label="", counter=""):
        calls[name + label] = params
        return reproduce.StepResult(name + label, None, 0.0, True)

    monkeypatch.setattr(reproduce.pipeline, "run_notebook", record)
    monkeypatch.setattr(reproduce.settings, "runs_dir", lambda: tmp_path)
    settings = Settings(run="r", seed=4, backend_seed=5, demographics_seed=6, assistant_models=("m",))
    reproduce.run_pass(settings, "generated", None)
    assert calls["01_generation"]["demographics_seed"] == 6
    for name, params in calls.items():
        assert params["seed"] == 4 and params["backend_seed"] == 5, name
    assert reproduce.parse_args(["--seed", "2", "--backend-seed", "3"]).backend_seed == 3


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """An empty checkout: no official data, nothing generated, no reproduction."""
    monkeypatch.setattr(paths, "project_root", lambda: tmp_path)
    monkeypatch.delenv(paths.DATA_ENV, raising=False)
    (tmp_path / "runs").mkdir()
    return tmp_path


def test_defaults_follow_the_latest_reproduction_and_the_store_follows_the_benchmark(checkout):
    folder = checkout / "runs" / "small" / "generated"
    bench = _official_like(folder / "benchmark", [0, 1])
    latest = paths.write_latest(folder, bench)
    assert "folder: small/generated" in latest.read_text() and "benchmark: small/generated/benchmark" in \
        latest.read_text()  # relative: a copied checkout still finds them
    with Session.open() as s:
        assert s.places.benchmark_dir == bench and s.run_store.root == folder / "store" and s.users is None
    other = _official_like(checkout / "elsewhere", [0])
    elsewhere = Session.open(SessionConfig(benchmark_dir=other))
    assert elsewhere.run_store.root == checkout / "runs" / places.DEFAULT_RUN
    assert Session.open(SessionConfig(benchmark_dir=bench)).run_store.root == folder / "store"
    mine = _official_like(checkout / "data" / "generated" / "default", [0, 1, 2])  # notebook 01 ran since
    with Session.open() as s:
        assert s.places.benchmark_dir == mine and s.run_store.root == checkout / "runs" / places.DEFAULT_RUN
    official = _official_like(checkout / "data" / "personalens", [3])
    assert paths.default_benchmark_dir() == official


def test_a_later_reproduction_is_extended_in_its_own_folder_not_refused(checkout):
    first, second = (checkout / "runs" / run / "generated" for run in ("small", "other"))
    for folder in (first, second):
        paths.write_latest(folder, _official_like(folder / "benchmark", [0, 1]))
        RunStore(folder / "store").append(dialogue("d1"))
    paths.write_latest(first, first / "benchmark")
    with Session.open() as s:  # notebook 03 on its defaults adds an assistant to the first reproduction
        s.run_store.append(dialogue("d2"))
    paths.write_latest(second, second / "benchmark")  # `make reproduce RUN=other`
    with Session.open() as s:  # notebooks on their defaults now extend the second one, in its folder
        assert s.run_store.root == second / "store"
        s.run_store.append(dialogue("d3"))
        assert s.run_store.root == second / "extended_store"
        assert sorted(d.id for d in s.run_store.read(Dialogue)) == ["d1", "d3"]
    assert sorted(d.id for d in RunStore(first / "extended_store").read(Dialogue)) == ["d1", "d2"]


def test_defaults_read_a_finished_reproduction_and_write_only_to_their_own_run(checkout, capsys):
    folder = checkout / "runs" / "small" / "generated"
    bench = _official_like(folder / "benchmark", [0, 1])
    paths.write_latest(folder, bench, assistant_models=["ref-a", "ref-b"], focus_model="ref-b")
    RunStore(folder / "store").append(dialogue("d1"))
    held = (folder / "store" / "dialogues.jsonl").read_bytes()
    validation = SessionConfig(stage="validation", default_run_store=False)
    assert Session.open(validation).run_store.root == folder / "store"  # 02 reads it too
    with Session.open() as s:  # the reproduction's own rows, not every assistant its store holds
        assert s.assistant_names(None) == ["ref-a", "ref-b"] and s.places.focus(None) == "ref-b"
        assert s.assistant_names(["mine"]) == ["mine"] and s.places.focus("mine") == "mine"
        assert [d.id for d in s.run_store.read(Dialogue)] == ["d1"]
        s.run_store.append(dialogue("d2"))
        own = folder / "extended_store"
        assert s.run_store.root == own and sorted(d.id for d in s.run_store.read(Dialogue)) == ["d1", "d2"]
    assert (folder / "store" / "dialogues.jsonl").read_bytes() == held  # the reproduction is unchanged
    said = capsys.readouterr().out
    assert f"{folder / 'store'} is a finished `make reproduce` store" in said and str(own) in said
    for s in (Session.open(), Session.open(validation)):  # the next ones go on there
        assert s.run_store.root == own and len(s.run_store.read(Dialogue)) == 2
    RunStore(folder / "store").append(dialogue("d3"))  # a new `make reproduce` into the same folder
    with Session.open() as s, pytest.raises(StoreError, match="extends an earlier `make reproduce`"):
        assert s.run_store.root == folder / "store"  # the old run is not this reproduction's
        s.run_store.append(dialogue("d4"))
    assert len(RunStore(own).read(Dialogue)) == 2
    with Session.open(SessionConfig(run_dir=folder / "store")) as s:  # named by hand: a store like any other
        assert type(s.run_store) is RunStore and s.assistant_names(None) is None
        assert s.places.focus(None) is None


def test_a_store_of_its_own_calls_the_store_under_it_a_reproduction_only_when_it_is_one(checkout, capsys):
    folder = checkout / "runs" / "small" / "generated"
    paths.write_latest(folder, _official_like(folder / "benchmark", [0, 1]))
    RunStore(folder / "store").append(dialogue("d1"))
    plain = RunStore(checkout / "runs" / "simulation")
    plain.append(dialogue("d1"))
    ReproductionStore.over(plain, checkout / "trust_store").append(dialogue("d2"))
    said = capsys.readouterr().out
    assert "make reproduce" not in said and f"{plain.root} stays as it is" in said
    assert str(checkout / "trust_store") in said
    with Session.open() as s:  # on its defaults: the reproduction's store, nothing written over it yet
        ReproductionStore.over(s.run_store, checkout / "trust_store2").append(dialogue("d2"))
        assert f"{folder / 'store'} is a finished `make reproduce` store" in capsys.readouterr().out
        s.run_store.append(dialogue("d3"))  # now the session's own run: not the reproduction's
        capsys.readouterr()
        ReproductionStore.over(s.run_store, checkout / "validity_store").append(dialogue("d4"))
        said = capsys.readouterr().out
        assert "make reproduce" not in said and f"{folder / 'extended_store'} stays as it is" in said
    for name in ("trust", "validity"):  # the setups of 07 and 09, which keep their records apart this way
        setup = Path(__file__).parents[2] / "personalens_utils" / "session" / f"{name}.py"
        source = setup.read_text(encoding="utf-8")
        assert "ReproductionStore.over(run, " in source and "ReproductionStore(run.root" not in source


def test_a_gone_reproduction_is_ignored_and_no_benchmark_is_one_line(checkout):
    paths.write_latest(checkout / "runs" / "old" / "generated", checkout / "runs" / "old" / "benchmark")
    assert paths.latest_run() is None  # its folder was cleaned away
    with pytest.raises(SessionError) as error:
        Session.open()
    lines = error.value._render_traceback_()
    assert len(lines) == 1 and "run notebook 01 or `make reproduce` first, or set benchmark_dir" in lines[0]
    assert lines[0].startswith("SessionError: benchmark_dir=None: no benchmark found")


def test_require_names_the_empty_store_and_what_fills_it(checkout):
    bench = _official_like(checkout / "bench", [0])
    s = Session.open(SessionConfig(benchmark_dir=bench, users=[0], task_types=["SD"],
                                   run_dir=checkout / "store"))
    frame = pd.DataFrame({"user_id": [0]})
    assert s.require(frame, "judgments", "notebooks 03 and 04") is frame
    with pytest.raises(SessionError) as error:
        s.require(frame.iloc[:0], "judgments by J", "notebooks 03 and 04")
    assert str(error.value) == (f"the run store {checkout / 'store'} holds no judgments by J (1 users, "
                                "task_types=['SD']): run notebooks 03 and 04 first, or set run_dir to a run "
                                "store that has them")


def test_require_says_which_prompt_set_the_store_holds(checkout):
    """After `make reproduce --prompt-set official` a notebook on its defaults (prompt_set="kit") finds
    nothing to analyse: the one line names the store's prompt set and the parameter that reads it."""
    bench = _official_like(checkout / "bench", [0])
    store = checkout / "store"
    s = Session.open(SessionConfig(benchmark_dir=bench, users=[0], task_types=["SD"], run_dir=store))
    identity = dict(user_backend="offline", user_model_id="user-sim", assistant_backend="offline",
                    assistant_model_id="assistant")
    s.run_store.append(dialogue("d-official", user_id=0, prompt_set="official", **identity))
    with pytest.raises(SessionError) as error:
        s.require(pd.DataFrame({"user_id": []}), "judgments by J", "notebooks 03 and 04")
    lines = error.value._render_traceback_()
    assert lines == [
        f"SessionError: the run store {store} holds no judgments by J (1 users, task_types=['SD'], "
        "prompt_set='kit'): its dialogues were made with prompt_set 'official': set prompt_set='official' "
        "to analyse them (papermill -p prompt_set official), or run notebooks 03 and 04 with "
        "prompt_set='kit' first"]
    assert s.places.prompt_sets_held() == ["official"]
    s.run_store.append(dialogue("d-kit", user_id=0, prompt_set="kit", **identity))
    with pytest.raises(SessionError, match=r"\): run notebooks 03 and 04 first, or set run_dir"):
        s.require(pd.DataFrame({"user_id": []}), "judgments by J", "notebooks 03 and 04")


def test_usage_rows_answered_offline_name_the_rules_not_the_model(checkout):
    bench = _official_like(checkout / "bench", [0])
    with Session.open(SessionConfig(benchmark_dir=bench, models={"judge_model": "Claude 3.5 Sonnet"})) as s:
        judge = s.role("judge_model")
        judge.client.complete(Request(CallKind.USER_TURN, (Message("user", "hi"),), model=judge.model))
        asked = s.usage_frame()["model"].tolist()  # the books keep the model id the call asked for
        assert asked == ["claude-3-5-sonnet-20241022"]
        assert s.usage().frame["model"].tolist() == [f"offline rules in the role of {asked[0]}"]
