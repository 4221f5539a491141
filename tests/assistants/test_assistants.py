"""The assistant under test as one protocol: only `assistants/` reads its specs, the package has no import
cycle, the functions of the roles' modules take at most 8 parameters, malformed specs stop the setup
cell with one line, and a faulty Python assistant (hangs, raises, says nothing) is named, not obeyed."""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import grimp
import pytest
from support.source_trees import source_tree
from support.tiny_benchmark import tiny_benchmark

import personalens_utils
from personalens_utils.assistants import Assistant, AssistantError, PythonOptions, resolve_assistant
from personalens_utils.data import save_benchmark
from personalens_utils.llm.client import Clients
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import SessionConfig, SessionError
from personalens_utils.simulation import SimulationConfig, run_simulation

PACKAGE_DIR = Path(personalens_utils.__file__).resolve().parent
SPEC_WORDS = re.compile(r'python:|ref-|"python"')
"""What names an assistant's kind in its spec: the `python:` prefix, reference names, the backend word."""
OWN_MODULES = ("assistants", "llm/role.py", "session/base.py", "analysis/own_assistant.py",
               "simulation/report.py", "llm/specs.py", "llm/client.py")
"""The modules of the roles and assistants (issue 19, items 1, 2 and 8)."""
MAX_PARAMETERS = 8


def test_only_the_assistants_package_knows_the_kinds_of_assistant_spec():
    outside = [p for p in sorted(PACKAGE_DIR.rglob("*.py"))
               if "assistants" not in p.relative_to(PACKAGE_DIR).parts]
    found = [f"{path.relative_to(PACKAGE_DIR)}:{n}: {line.strip()}" for path in outside
             for n, line in enumerate(path.read_text().splitlines(), 1) if SPEC_WORDS.search(line)]
    assert not found, "\n".join(found)
    inside = [p for p in (PACKAGE_DIR / "assistants").rglob("*.py") if SPEC_WORDS.search(p.read_text())]
    assert inside  # the scan sees them where they belong


def test_the_package_has_no_import_cycle():
    graph = grimp.build_graph("personalens_utils", exclude_type_checking_imports=True)
    cycles = {}
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back:
                cycles[module] = (module, *back)
    assert not cycles, "\n".join(" -> ".join(chain) for chain in cycles.values())
    assert graph.find_shortest_chain(importer="personalens_utils.session.base",
                                     imported="personalens_utils.llm.types")  # the graph is not empty


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [f"*{a.arg}" for a in (args.vararg, args.kwarg) if a is not None]
    return [n for n in names if n not in ("self", "cls")]


def test_the_functions_of_the_roles_modules_take_at_most_eight_parameters():
    paths = [p for own in map(PACKAGE_DIR.joinpath, OWN_MODULES)
             for p in (sorted(own.rglob("*.py")) if own.is_dir() else [own])]
    long = []
    for path in paths:
        for node in ast.walk(source_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = _parameters(node)
                if len(names) > MAX_PARAMETERS or any(n.startswith("**") for n in names):
                    where = f"{path.relative_to(PACKAGE_DIR)}:{node.lineno}"
                    long.append(f"{where} {node.name}({', '.join(names)})")
    assert not long, "\n".join(long)
    assert len(paths) >= len(OWN_MODULES)


# -- specs refused in the setup cell (issue 21, item 4) --------------------------------------------------


@pytest.mark.parametrize(("config", "expected"), [
    ({"assistants": {"assistant_model": "::"}}, "parameter assistant_model='::': nothing before ':'"),
    ({"assistants": {"assistant_model": "nosuchbackend:model"}},
     "parameter assistant_model='nosuchbackend:model': unknown backend 'nosuchbackend'"),
    ({"models": {"user_model": "::"}}, "parameter user_model='::': nothing before ':'"),
    ({"models": {"judge_model": "nosuchbackend:model"}}, "parameter judge_model='nosuchbackend:model'"),
    ({"assistants": {"assistant_model": "offline::"}}, "':' is not a model name"),
    ({"assistants": {"assistant_model": "ref-imaginary"}}, "no reference assistant 'ref-imaginary'"),
    ({"assistant_timeout_s": 0}, "assistant_timeout_s=0"),
    ({"on_assistant_error": "ignore"}, "on_assistant_error='ignore'"),
])
def test_a_malformed_spec_stops_the_setup_cell_with_one_line(tmp_path, config, expected):
    with pytest.raises(SessionError) as caught:
        Session.open(SessionConfig(benchmark_dir=tmp_path / "bench", run_dir=tmp_path / "run", **config))
    shown = caught.value._render_traceback_()
    assert len(shown) == 1 and "\n" not in shown[0] and expected in shown[0], shown
    assert "backend" in shown[0] or "assistant" in shown[0]  # says what is accepted
    assert not (tmp_path / "run").exists()  # refused before anything was made


def test_well_formed_specs_become_role_objects_once(tmp_path):
    save_benchmark(tiny_benchmark(n_users=1, seed=3), tmp_path / "bench")
    models = {"user_model": "Claude 3 Sonnet", "judge_model": "offline:Claude 3.5 Sonnet"}
    config = SessionConfig(benchmark_dir=tmp_path / "bench", run_dir=tmp_path / "run", models=models,
                           assistants={"assistant_model": None,
                                       "compare_assistant": "python:support.assistants:Recorder"})
    with Session.open(config) as session:
        default, own = session.assistant("assistant_model"), session.assistant("compare_assistant")
        assert isinstance(default, Assistant) and session.assistant("assistant_model") is default
        assert (default.backend, default.model, default.made_offline) == (
            "offline", "ref-follows-setting", True)
        assert (own.backend, own.model_id, own.clients()) == ("python", "support.assistants:Recorder", [])
        user = session.role("user_model")
        assert user.client is session.role("judge_model").client  # one client per backend
        assert session.describe({"user agent": user, "assistant": own}).splitlines() == [
            "user agent: offline:claude-3-sonnet-20240229 (Claude 3 Sonnet)",
            "assistant: python:support.assistants:Recorder"]
        with pytest.raises(SessionError, match="no assistant 'assistant'"):
            session.assistant("assistant")


# -- faulty Python assistants (issue 21, item 8) ---------------------------------------------------------


def _run(tmp_path: Path, target: str, **options: object):
    bench = tiny_benchmark(n_users=1, seed=3)
    store = RunStore(tmp_path / "run")
    clients = Clients("offline", progress=False)
    try:
        assistant = resolve_assistant(f"python:support.assistants:{target}", clients,
                                      options=PythonOptions(**options))  # type: ignore[arg-type]
        report = run_simulation(bench, store, clients.client(clients.spec("Claude 3 Sonnet")),
                                SimulationConfig(assistant=assistant, task_types=["SD"], max_turns=2))
    finally:
        clients.close()
    return report, store.read(Dialogue)


@pytest.mark.parametrize(("target", "problem"), [
    ("Hangs", r"reply\(\) gave no answer within 0.5 s \(assistant_timeout_s\)"),
    ("HangsAsync", r"reply\(\) gave no answer within 0.5 s"),
    ("Raises", r"reply\(\) raised ValueError: the notes index is empty"),
    ("Empty", r"reply\(\) returned an empty reply"),
])
def test_a_faulty_assistant_stops_the_run_naming_itself_the_user_and_the_task(tmp_path, target, problem):
    started = time.perf_counter()
    with pytest.raises(AssistantError) as caught:
        _run(tmp_path, target, reply_timeout_s=0.5)
    assert time.perf_counter() - started < 15  # not the 30 s the assistant would hang
    shown = caught.value._render_traceback_()
    assert len(shown) == 1, shown
    where = r"\(user \d+, task SD-\S+, setting base\)"
    assert re.search(rf"python:support\.assistants:{target}: {problem}.* {where}\. ", shown[0]), shown[0]
    assert "on_assistant_error='record'" in shown[0]


@pytest.mark.parametrize("target", ["Hangs", "Raises", "Empty"])
def test_asked_to_go_on_a_faulty_assistant_leaves_error_records(tmp_path, target):
    report, dialogues = _run(tmp_path, target, reply_timeout_s=0.5, on_error="record")
    assert dialogues and report.errors == len(dialogues) == report.planned
    assert {d.status for d in dialogues} == {"error"}  # never a finished dialogue with an empty reply
    assert all(f"python:support.assistants:{target}: reply()" in d.error for d in dialogues)
    assert all(t.content.strip() for d in dialogues for t in d.turns)


@pytest.mark.parametrize(("given", "stored"), [
    ("openai@LOCAL_URL:smollm2", "smollm2"),
    ("anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"),
    ("ref-dialogue-only", "ref-dialogue-only"),
    ("Claude 3.5 Sonnet", "Claude 3.5 Sonnet"),
])
def test_an_assistant_spec_selects_the_records_stored_under_its_model_name(monkeypatch, given, stored):
    """A reproduction's 04 is given the specs 03 ran; it must select 03's records by the names they carry
    (before, `openai@VAR:model` was compared as it is, and that assistant's dialogues were never judged)."""
    from personalens_utils.assistants.resolve import stored_name

    monkeypatch.setenv("LOCAL_URL", "http://127.0.0.1:8077/v1")
    assert stored_name(given, "offline") == stored
