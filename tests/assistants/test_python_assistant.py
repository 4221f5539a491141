"""Your own assistant in Python: loading `python:` specs, the view it gets, its identity and spending."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import papermill
import pytest
from support import assistants
from support.fake_server import FakeLLMServer
from support.scripted_models import scripted_reply
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.analysis.tables import long_words
from personalens_utils.assistants import AssistantError, AssistantSpec, resolve_assistant
from personalens_utils.assistants.python import PYTHON, VIEW_KEYS, AssistantLoadError, AssistantView, load
from personalens_utils.assistants.reference_assistants import SETTING_ASSISTANT
from personalens_utils.assistants.retrieval import RETRIEVED_HEADING, RetrievalAssistant, passages
from personalens_utils.data import save_benchmark
from personalens_utils.llm import Message, registry
from personalens_utils.llm.client import Clients
from personalens_utils.llm.specs import ModelSpec, SpecError
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.tables import Source, TableResult, read_table
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import (
    PAPER_SETTINGS,
    AssistantSetting,
    ScenarioContext,
    SimulationConfig,
    assistant_request,
    assistant_system,
    run_simulation,
)

RETRIEVAL = "personalens_utils.assistants.retrieval:RetrievalAssistant"


def _load(text: str):
    load.cache_clear()
    return load(text)


@pytest.mark.parametrize(("spec", "message"), [
    ("python:", "write python:package.module:Name"),
    ("python:support.assistants", "write python:package.module:Name"),
    ("python@X:support.assistants:Recorder", "write python:package.module:Name"),
    ("python:support.assistants:Recorder?k", "option 'k' is not key=value"),
    ("python:support.assistants:Recorder?k=1&k=2", "an option is given twice"),
])
def test_a_spec_that_cannot_be_read_names_itself(spec, message):
    with pytest.raises(SpecError, match=message) as err:
        AssistantSpec.parse(spec, "offline", what="assistant_model")
    assert "assistant_model=" in str(err.value)


@pytest.mark.parametrize(("target", "message"), [
    ("no_such_package.mod:Name", r"cannot import module 'no_such_package.mod' \(ModuleNotFoundError"),
    ("support.assistants:Missing", "module 'support.assistants' has no attribute 'Missing'"),
    ("support.assistants:NoReply", "does not follow the assistant protocol: it needs a method reply"),
    ("support.assistants:Recorder?k=3", r"Recorder\(k='3'\) failed: TypeError"),
    ("support.assistants:INSTANCE?k=3", "options are given but INSTANCE is an object"),
    ("support.assistants:BadModel", "its model 'Claude 3 Sonnet' must name a backend"),
    (f"{RETRIEVAL}?k=0", "k must be at least 1"),
    (f"{RETRIEVAL}?model=anthropic", "names no model"),
])
def test_an_assistant_that_cannot_be_loaded_fails_with_the_spec_named(target, message):
    with pytest.raises(AssistantLoadError, match=message) as err:
        _load(target)
    assert f"python:{target.split('?')[0]}" in str(err.value)


def test_options_are_written_canonically_and_become_the_identity():
    qwen = "openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct"
    spec = AssistantSpec.parse(f"python:{RETRIEVAL}?model={qwen}&k=2", "offline")
    assert spec.backend == "python" and spec.model == f"{RETRIEVAL}?k=2&model={qwen}"
    loaded = _load(spec.model)
    assert loaded.inner == ModelSpec("openai", "Qwen/Qwen2.5-7B-Instruct", "VLLM_URL")
    assert loaded.model_id == f"{spec.model} version 1 -> openai:Qwen/Qwen2.5-7B-Instruct"
    haiku = _load(f"{RETRIEVAL}?model=anthropic:Claude Haiku 4.5").model_id
    assert haiku.endswith(f"-> anthropic:{registry.resolve('Claude Haiku 4.5', 'anthropic')}")
    assert _load(RETRIEVAL).model_id.endswith(f"-> offline:{SETTING_ASSISTANT}")
    assert _load("support.assistants:Recorder").model_id == "support.assistants:Recorder"  # calls no model


def _contexts():
    bench = tiny_benchmark(n_users=1, seed=3)
    return bench, [ScenarioContext.of(s, bench.user(s.user_id)) for s in bench.iter_scenarios(["SD", "MD"])]


@pytest.mark.parametrize("name", [*PAPER_SETTINGS, "vanilla+I", "base+D+S"])
def test_the_python_assistant_sees_exactly_what_the_prompt_based_one_is_given(name, tmp_path):
    """Run through the loop: the view of every turn equals the prompt-based request of that turn,
    minus only what the offline reference assistants read (`oracle`) and a caching hint."""
    bench, _ = _contexts()
    setting = AssistantSetting.parse(name)
    clients = Clients("offline", progress=False)
    assistants.SEEN.clear()
    try:
        assistant = resolve_assistant("python:support.assistants:INSTANCE", clients)
        run_simulation(bench, RunStore(tmp_path), clients.client(clients.spec("Claude 3 Sonnet")),
                       SimulationConfig(assistant=assistant, settings=[name], task_types=["SD", "MD"],
                                        max_turns=2))
    finally:
        clients.close()
    dialogues = {d.scenario_id: d for d in RunStore(tmp_path).read(Dialogue)}
    contexts = {c.scenario.scenario_id: c for c in _contexts()[1]}
    assert len(assistants.SEEN) == sum(d.n_turns for d in dialogues.values()) > 0
    for view in assistants.SEEN:
        ctx = next(c for c in contexts.values() if c.scenario.domains == list(view.domains)
                   and c.scenario.task_type == view.task_type)
        turns = [{"role": m.role, "content": m.content} for m in view.dialogue]
        prompt_based = assistant_request(setting, ctx, turns, "any model")
        shown = {k: v for k, v in prompt_based.context.items() if k not in ("oracle", "cache_prefix_chars")}
        assert set(shown) <= set(VIEW_KEYS)
        assert view.context() == shown
        assert view.instructions == prompt_based.system == assistant_system(setting, ctx)
        assert view.dialogue == prompt_based.messages
        assert (view.interactions is not None, view.demographics is not None, view.situation is not None) == (
            setting.sees("I"), setting.sees("D"), setting.sees("S"))


def test_dialogues_of_a_python_assistant_carry_its_identity_and_the_model_it_calls(tmp_path):
    bench = tiny_benchmark(n_users=1, seed=3)
    store = RunStore(tmp_path)
    clients = Clients("offline", progress=False)
    try:
        user = clients.client(clients.spec("Claude 3 Sonnet"))
        for k in ("1", "4"):
            assistant = resolve_assistant(f"python:{RETRIEVAL}?k={k}", clients)
            run_simulation(bench, store, user,
                           SimulationConfig(assistant=assistant, settings=["base+I"], task_types=["SD"]))
        usage = clients.usage_frame("simulation")
    finally:
        clients.close()
    dialogues = store.read(Dialogue)
    assert len(dialogues) == 6 and {d.assistant_backend for d in dialogues} == {"python"}
    assert {d.assistant_model_id for d in dialogues} == {
        f"{RETRIEVAL}?k={k} version 1 -> offline:{SETTING_ASSISTANT}" for k in "14"}
    assert all(d.made_offline and d.usage.input_tokens > 0 for d in dialogues)
    # the model it calls is booked as the assistant's, on that model's backend
    assistant = usage[usage["role"] == "assistant"]
    assert set(assistant["model"]) == {SETTING_ASSISTANT}
    assert int(assistant["calls"].sum()) == sum(d.n_turns for d in dialogues)


def _view(interactions: dict[str, str], said: str) -> AssistantView:
    return AssistantView(setting="base+I", task_type="SD", domains=tuple(interactions), instructions="",
                         dialogue=(Message("user", said),), interactions=interactions)


def test_retrieval_ranks_the_sentences_about_the_request_first():
    notes = {"Restaurants": "The user often asks for help with restaurants. For the cuisine preference, "
                            "they have repeatedly chosen Moroccan. For the ambiance preference, they have "
                            "repeatedly chosen quiet and outdoor seating."}
    assert len(passages(notes)) == 3
    got = RetrievalAssistant(k=1).retrieve(_view(notes, "Which ambiance would suit me tonight?"))
    assert got == {"Restaurants": "For the ambiance preference, they have repeatedly chosen quiet and "
                                  "outdoor seating."}
    assert RetrievalAssistant(k=1).retrieve(_view(notes, "Hello!")) == {}  # nothing shares a word


def test_the_offline_model_answers_from_what_retrieval_put_in_front_of_it():
    notes = {"Alarm": "For the alarm time preference, they have repeatedly chosen 7:30 AM. "
                      "For the alarm sound preference, they have repeatedly chosen loud beeping."}
    clients = Clients("offline", progress=False)
    try:
        def reply(k: int, said: str) -> str:
            request = assistant_request(AssistantSetting.parse("base+I"), _ctx_with(notes), [
                {"role": "user", "content": said}], f"{RETRIEVAL}?k={k}")
            assistant = resolve_assistant(f"python:{RETRIEVAL}?k={k}", clients)
            return asyncio.run(assistant.respond(request)).text

        about_time = reply(1, "Please set an alarm at my usual alarm time.")
        assert "7:30 AM" in about_time and "loud beeping" not in about_time
        both = reply(2, "Please set an alarm at my usual alarm time.")
        assert "7:30 AM" in both and "loud beeping" in both
    finally:
        clients.close()


def _ctx_with(notes: dict[str, str]) -> ScenarioContext:
    _, contexts = _contexts()
    ctx = next(c for c in contexts if c.scenario.domains == ["Alarm"])
    return ScenarioContext(ctx.scenario, ctx.demographics, ctx.preferences, notes)


def test_a_reply_that_breaks_the_protocol_is_a_bug_naming_the_assistant(tmp_path):
    bench = tiny_benchmark(n_users=1, seed=3)
    for target, error, message in [
        ("support.assistants:NotText", TypeError, "returned int, not the reply text"),
        ("support.assistants:Undeclared", AssistantError, "support.assistants:Undeclared: .*declares none"),
    ]:
        clients = Clients("offline", progress=False)
        try:
            with pytest.raises(error, match=message):
                run_simulation(bench, RunStore(tmp_path), clients.client(clients.spec("x")),
                               SimulationConfig(assistant=resolve_assistant(f"python:{target}", clients),
                                                task_types=["SD"]))
        finally:
            clients.close()
    assert not RunStore(tmp_path).read(Dialogue)  # nothing stored for the items a bug broke


NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
QWEN = "openai@PL_ASSISTANT_URL:Qwen/Qwen2.5-7B-Instruct"
NOTES_REPLY = "From your notes:"


def notes_reply(api: str, body: dict[str, Any]) -> str:
    """`scripted_reply`, except that an assistant whose prompt holds retrieved notes quotes the first one."""
    system = body.get("system") if api == "anthropic" else next(
        (m["content"] for m in body.get("messages", []) if m.get("role") == "system"), "")
    if isinstance(system, str) and RETRIEVED_HEADING in system:
        first = system.split(RETRIEVED_HEADING, 1)[1].strip().splitlines()[0]
        return f"{NOTES_REPLY} {first}"
    return scripted_reply(api, body)


def _shown(path: Path, marker: str) -> str:
    cell = next(c for c in json.loads(path.read_text())["cells"] if marker in "".join(c["source"]))
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/markdown", ""))
                   + "".join(o.get("data", {}).get("text/plain", "")) for o in cell["outputs"])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
def test_notebooks_evaluate_the_retrieval_assistant_against_the_prompt_based_one(tmp_path, monkeypatch):
    """User agent and judge on an Anthropic-format server, the prompt-based assistant and the retrieval
    assistant's model on an OpenAI-format one (separate processes, 10% injected 429/529/500):
    03 twice, 04, then 05's comparison section writes Table 3 with both assistants."""
    save_benchmark(tiny_benchmark(n_users=1, seed=3), tmp_path / "bench")
    monkeypatch.setenv("PERSONALENS_CACHE", str(tmp_path / "cache"))
    retrieval = f"python:{RETRIEVAL}?k=2&model={QWEN}"
    common = {"benchmark_dir": str(tmp_path / "bench"), "run_dir": str(tmp_path / "run"),
              "backend": "anthropic", "user_model": "claude-3-5-haiku", "settings": ["base+I"]}
    judge = {"judge_model": "Claude 3.5 Sonnet"}
    faults = dict(fault_rate=0.1, fault_statuses=(429, 529, 500), seed=5, process=True)

    def run(notebook: str, out: str, **parameters: Any) -> Path:
        executed = tmp_path / f"{out}.ipynb"
        papermill.execute_notebook(str(NOTEBOOKS / f"{notebook}.ipynb"), str(executed), kernel_name="python3",
                                   progress_bar=False,
                                   parameters={**common, "output_dir": str(tmp_path / out), **parameters})
        return executed

    with FakeLLMServer(reply=notes_reply, **faults) as claude, \
            FakeLLMServer(reply=notes_reply, **faults) as vllm:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        monkeypatch.setenv("PL_ASSISTANT_URL", vllm.url + "/v1")
        served = f"openai:Qwen/Qwen2.5-7B-Instruct at {vllm.url}/v1"  # a server of its own: identity
        run("03_simulation", "sim-prompt", assistant_model=QWEN)
        sim = run("03_simulation", "sim-python", assistant_model=retrieval)
        run("04_judging", "judging", **judge,
            dimensions=["task_completion", "personalization", "naturalness_assistant", "coherence_assistant"])
        ablation = run("05_ablation", "ablation", **judge, assistant_model=QWEN, compare_assistant=retrieval,
                       settings=["base", "base+I"], ablation_users=None)
        claude_paths = claude.stats()
    store = RunStore(tmp_path / "run")
    dialogues = [d for d in store.read(Dialogue) if d.assistant_setting == "base+I"]
    mine = [d for d in dialogues if d.assistant_backend == "python"]
    theirs = [d for d in dialogues if d.assistant_backend == "openai"]
    assert len(mine) == len(theirs) == 4 and {d.status for d in dialogues} == {"terminated"}
    assert {d.scenario_id for d in mine} == {d.scenario_id for d in theirs}  # the same scenarios
    assert {d.assistant_model_id for d in mine} == {
        f"{retrieval.removeprefix('python:')} version 1 -> {served}"}
    assert {d.user_backend for d in dialogues} == {"anthropic"}
    # every reply of the retrieval assistant came from the OpenAI-format server, with its notes in the prompt
    replies = [t.content for d in mine for t in d.turns if t.role == "assistant"]
    assert replies and all(r.startswith(NOTES_REPLY) for r in replies)
    assert not any(t.content.startswith(NOTES_REPLY) for d in theirs for t in d.turns)
    assert set(claude_paths) == {"/v1/messages"}
    usage = _shown(sim, "run_simulation(")
    assert "user agent" in usage and "openai@PL_ASSISTANT_URL" in usage and "anthropic" in usage
    table = read_table(tmp_path / "ablation" / "tables" / "table3_own_assistant.csv")
    # no module path in a row, and a model option by its model
    assert list(table["Assistant model"]) == ["Qwen/Qwen2.5-7B-Instruct",
                                              "RetrievalAssistant (k=2, model=Qwen2.5-7B-Instruct)"]
    assert table.notna().all().all()
    shown = _shown(ablation, "compare_assistants(")
    assert "Table 3." in shown and "backend anthropic, openai, python" in shown
    assert f"{RETRIEVAL}?k=2" in shown  # the row is short; the table's source names the whole spec
    assert "OFFLINE" not in shown.upper().replace("OFFLINE_", "")


MINE = '''
class Mine:
    """An assistant kept in a file outside any package."""

    def reply(self, view, llm):
        return "From a file."
'''


def test_a_python_assistant_named_by_its_file_loads_and_is_stored_by_its_path(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text(MINE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    spec = AssistantSpec.parse("python:mine.py:Mine", "offline")
    assert spec.backend == "python" and spec.model == f"{(tmp_path / 'mine.py').resolve()}:Mine"
    assert load(spec.model).obj.reply(None, None) == "From a file."
    with pytest.raises(SpecError, match=r"no file gone\.py"):
        AssistantSpec.parse("python:gone.py:Mine", "offline")


def test_a_module_in_the_project_root_loads_without_pythonpath(tmp_path, monkeypatch):
    (tmp_path / "rooted_assistant.py").write_text(MINE, encoding="utf-8")
    monkeypatch.setattr("personalens_utils.assistants.python.project_root", lambda: tmp_path)
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", ".")])
    assert AssistantSpec.parse("python:rooted_assistant:Mine", "offline").model == "rooted_assistant:Mine"


def test_notebook_06_and_07_take_the_spec_notebook_03_took(tmp_path):
    from personalens_utils.session.base import Session
    from personalens_utils.session.parameters import SessionConfig

    bench = tmp_path / "bench"
    save_benchmark(tiny_benchmark(), bench)
    session = Session.open(SessionConfig(benchmark_dir=bench, run_dir=tmp_path / "run",
                                         output_dir=tmp_path / "out"))
    given = [f"python:{RETRIEVAL}", "ref-dialogue-only"]
    assert session.assistant_names(given) == [RETRIEVAL, "ref-dialogue-only"]
    assert session.places.focus(f"python:{RETRIEVAL}") == RETRIEVAL


def test_a_setting_that_hides_part_of_the_user_is_said_for_a_python_assistant_only():
    from personalens_utils.simulation import hidden_note

    lines = hidden_note(AssistantSpec(PYTHON, RETRIEVAL), ["base", "base+all", "base+I"])
    assert len(lines) == 2
    assert lines[0].startswith("setting base: RetrievalAssistant sees no demographics, past")
    assert "situation" in lines[1] and "past interactions" not in lines[1]
    assert hidden_note(AssistantSpec("offline", "ref-dialogue-only"), ["base"]) == []


def test_a_long_score_table_prints_a_file_assistant_by_its_class_and_its_csv_keeps_the_spec(tmp_path):
    """Table 3's long form of `make evaluate` named the assistant by its file's whole path, too wide for
    the page; the printed table shows the class, the CSV the stored name."""
    stored = f"{tmp_path}/a/folder/deep/enough/to/overflow/a/column/counted.py:Counted"
    frame = pd.DataFrame({"assistant_model": [stored, "ref-dialogue-only"], "mean": [1.0, 2.0]})
    assert list(long_words(frame)["Assistant model"]) == ["Counted", "ref-dialogue-only"]
    paths = TableResult(frame, "Means.", Source.of("a test", 2, "dialogues", ["offline"], []),
                        words=long_words).save_data(tmp_path, OutputId("table", "X", "means"))
    assert list(pd.read_csv(paths["csv"])["assistant_model"]) == [stored, "ref-dialogue-only"]
    assert stored not in paths["tex"].read_text(encoding="utf-8")
