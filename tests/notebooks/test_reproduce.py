"""The reproduction driver: arguments, notebook execution through papermill, and INDEX.md."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from support.records import dialogue
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import reproduce
from personalens_utils.assistants.reference_assistants import FOCUS_ASSISTANT
from personalens_utils.base.paths import LatestRun
from personalens_utils.data import SAMPLES, save_benchmark
from personalens_utils.generation.runner import GenerationConfig, generate_benchmark
from personalens_utils.llm.client import Clients
from personalens_utils.outputs.plots import save_figure
from personalens_utils.outputs.tables import save_table
from personalens_utils.reproduce import (
    PAPER_ITEMS,
    PassResult,
    Settings,
    StepResult,
    cli,
    evaluate,
    index,
    notebooks,
    pipeline,
)
from personalens_utils.reproduce import settings as reproduce_settings
from personalens_utils.session.base import Session
from personalens_utils.session.parameters import SessionConfig
from personalens_utils.simulation import PAPER_SETTINGS


def test_defaults_are_offline_and_anthropic_switches_to_current_models():
    offline = reproduce.parse_args(["--run", "r"])
    assert (offline.backend, offline.run, offline.passes) == ("offline", "r", ("generated", "official"))
    assert offline.assistant_models == reproduce.OFFLINE_ASSISTANTS
    claude = reproduce.parse_args(["--backend", "anthropic", "--ablation-model", "Claude Opus 4.5"])
    assert claude.assistant_models == reproduce.ANTHROPIC_ASSISTANTS
    assert claude.ablation_model == "Claude Opus 4.5" and claude.user_model == "Claude Sonnet 4.5"
    custom = reproduce.parse_args(
        ["--assistant-models", "a, b", "--passes", "official", "--users", "sample_50"]
    )
    assert custom.assistant_models == ("a", "b") and custom.passes == ("official",)
    assert custom.focus == "a"  # the default focus is not among them: the first, which 04 judges
    assert offline.focus == FOCUS_ASSISTANT
    kept = reproduce.parse_args(["--assistant-models", f"x,{FOCUS_ASSISTANT}"])
    assert kept.focus == FOCUS_ASSISTANT
    assert custom.official_users == "sample_50"
    assert offline.scoring == "strict"
    assert reproduce.parse_args(["--scoring", "official"]).scoring == "official"
    assert reproduce.problems(reproduce.parse_args(["--passes", "everything"])) == [
        "--passes 'everything': unknown pass; use generated and/or official"]
    with pytest.raises(reproduce.OptionError, match="--scoring: invalid choice: 'lenient'"):
        reproduce.parse_args(["--scoring", "lenient"])


def test_a_paid_backend_runs_one_pass_by_default(monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "find_official_data", lambda: None)
    assert reproduce.parse_args(["--backend", "anthropic"]).passes == ("generated",)
    monkeypatch.setattr(cli, "find_official_data", lambda: tmp_path)
    assert reproduce.parse_args(["--backend", "anthropic"]).passes == ("official",)
    assert reproduce.parse_args(["--backend", "anthropic", "--passes", "generated"]).passes == ("generated",)
    assert reproduce.parse_args([]).passes == ("generated", "official")


def test_anthropic_without_a_key_stops_before_running(monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert reproduce.main(["--run", "nokey", "--backend", "anthropic"]) == 1
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err


def _notebook(path: Path, parameters: str, body: str) -> None:
    params = new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """Three tiny notebooks run through `run_notebook`: one writes a table, one fails, one is absent.
    The folder holds a table an earlier run left, which none of them wrote."""
    root = tmp_path_factory.mktemp("nb")
    books = root / "notebooks"
    books.mkdir()
    _notebook(
        books / "writer.ipynb",
        'label = "default"\noutput_dir = None',
        "import pandas as pd\nfrom personalens_utils.outputs.tables import save_table\n"
        'save_table(pd.DataFrame({"x": [1]}), output_dir, 3, "tiny", f"caption {label}")',
    )
    _notebook(books / "broken.ipynb", "output_dir = None", 'raise RuntimeError("the data is bad")')
    settings = Settings(run="t", notebooks_dir=books)
    save_table(pd.DataFrame({"x": [0]}), root / "out", 4, "earlier", "left by an earlier run")
    params = {"label": "passed", "output_dir": str(root / "out"), "undeclared": 1}
    return root, {
        "writer": reproduce.run_notebook(settings, "writer", root / "out", params),
        "broken": reproduce.run_notebook(settings, "broken", root / "out", params, "-x"),
        "absent": reproduce.run_notebook(settings, "absent", root / "out", params),
    }


def test_run_notebook_passes_declared_parameters_only(executed):
    root, steps = executed
    step = steps["writer"]
    assert step.ok and step.executed == root / "out" / "writer.ipynb" and step.executed.is_file()
    assert (root / "out" / "tables" / "table3_tiny.md").read_text().startswith("**Table 3.** caption passed")
    injected = nbformat.read(step.executed, 4).cells[1].source  # papermill's injected-parameters cell
    assert "passed" in injected and "undeclared" not in injected
    assert {p.name for p in step.written} == {f"table3_tiny.{ext}" for ext in ("csv", "md", "tex")}


def test_a_notebook_is_counted_and_its_parameters_go_to_the_log_not_the_terminal(tmp_path, capsys):
    books = tmp_path / "notebooks"
    books.mkdir()
    _notebook(books / "quiet.ipynb", 'label = "default"', "print(label)")
    step = reproduce.run_notebook(Settings(run="t", notebooks_dir=books), "quiet", tmp_path / "out",
                                  {"label": "a long value " * 40}, counter="[2/5] ")
    printed = capsys.readouterr().out
    assert step.ok and "[reproduce] [2/5] quiet done in " in printed
    assert "a long value" not in printed and max(map(len, printed.splitlines())) < 80
    assert (tmp_path / "out" / "parameters.log").read_text().startswith("quiet: label='a long value ")


def test_a_failing_notebook_and_a_missing_one_are_recorded_as_failed(executed):
    _, steps = executed
    broken = steps["broken"]
    assert not broken.ok and not broken.skipped and "the data is bad" in broken.message
    assert broken.notebook == "broken-x" and broken.executed.is_file()  # the executed copy shows the error
    assert broken.written == ()
    absent = steps["absent"]
    assert not absent.ok and not absent.skipped and "notebooks/absent.ipynb does not exist" in absent.message


def _pass(root: Path) -> PassResult:
    """A pass whose notebooks wrote tables and figures (02 some before it failed, 04 not run), in a
    folder that also holds a figure an earlier run left."""
    folder = root / "runs" / "r" / "official"
    stale = folder / "figures" / "figure3_demographics.png"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"old")
    tables = {3: "assistant_models", 5: "agreement", 12: "user_agent", 13: "dialogue_stats", 99: "extra"}
    analysis = [path for number, slug in tables.items() for path in save_table(
        pd.DataFrame({"a": [1.0]}), folder, number, slug, f"Caption of table {number} [offline]").values()]
    for number, slug in ((4, "domains"), (5, "turns")):
        fig, ax = plt.subplots()
        ax.plot([1, 2])
        analysis += save_figure(fig, folder, number, slug).values()
        plt.close(fig)
    ablation = save_table(pd.DataFrame({"a": [1.0]}), folder, 4, "ablation", "Caption of table 4 [offline]")
    partial = save_table(pd.DataFrame({"a": [1.0]}), folder, 6, "demographics_part1", "Caption of table 6")
    result = PassResult("official", "/data/official", "sample_30", "first 10 users of sample_30", folder)
    result.steps = [
        StepResult("03_simulation-a", folder / "03_simulation-a.ipynb", 3.0, True),
        StepResult("03_simulation-b", folder / "03_simulation-b.ipynb", 3.0, False, "SpecError: bad"),
        StepResult("04_judging", None, 0.0, False, "03_simulation-b failed", skipped=True),
        StepResult("02_validation", folder / "02_validation.ipynb", 5.0, False, "KeyError: 'Gender'",
                   written=tuple(partial.values())),
        StepResult("05_ablation", folder / "05_ablation.ipynb", 4.0, True, written=tuple(ablation.values())),
        StepResult("06_analysis", folder / "06_analysis.ipynb", 6.0, True, written=tuple(analysis)),
    ]
    return result


def test_index_lists_every_paper_item_with_its_file_or_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path / "runs")
    settings = Settings(run="r", argv=("--run", "r"))
    result = _pass(tmp_path)
    text = reproduce.write_index(settings, [result], 125.0).read_text()
    reproduced, missing = text.split("### Not reproduced")
    for name in ("Table 3", "Table 4", "Table 5", "Table 12", "Table 13", "Figure 4", "Figure 5"):
        assert f"**{name}**" in reproduced
    assert "**Table 6** (demographics, part 1): 02_validation failed: KeyError: 'Gender'" in missing
    assert "- `official/tables/table6_demographics_part1.md` (02_validation)" in \
        text.split("### Written by notebooks that failed (not published)")[1]
    assert "figure3_demographics" not in text  # an earlier run's file is not this run's output
    assert "`official/tables/table3_assistant_models.md`" in reproduced
    assert "`official/figures/figure5_turns.png`" in reproduced
    assert "caption: Caption of table 3 [offline]" in reproduced
    assert "made by `official/06_analysis.ipynb`; backend offline" in reproduced
    assert "assistants " + ", ".join(reproduce.OFFLINE_ASSISTANTS) in reproduced
    assert "**Figure 3** (demographic distribution): 02_validation failed: KeyError: 'Gender'" in missing
    assert "**Table 1** (tasks and dialogues per domain): 02_validation failed" in missing
    for item in PAPER_ITEMS:
        assert f"**{item.name}**" in text
    assert "`official/tables/table99_extra.md`" in text.split("### Other outputs")[1]
    assert "rule-based simulation, not a language model" in text
    assert "Total time: 2.1 min" in text and "--run r" in text
    assert "| 04_judging | - | 0 s | not run: 03_simulation-b failed |" in text
    assert "| 03_simulation-b | - | 3 s | FAILED: SpecError: bad |" in text
    assert "Run store: empty." in text
    assert "**Not published**: in pass `official`, 03_simulation-b, 02_validation failed" in text
    assert "Judge answers read under the `strict` scoring rule" in text


def test_index_names_the_successor_called_for_a_retired_paper_model(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path / "runs")
    settings = Settings(run="r", backend="anthropic", assistant_models=("Claude Haiku 4.5",))
    text = reproduce.write_index(settings, [_pass(tmp_path)], 60.0).read_text()
    assert "- user agent: anthropic:claude-sonnet-4-5-20250929 (Claude Sonnet 4.5) - Claude 3 Sonnet was " \
        "retired on the Anthropic API" in text
    assert "- assistant Claude Haiku 4.5: anthropic:claude-haiku-4-5-20251001 (Claude Haiku 4.5)\n" in text
    offline = reproduce.write_index(Settings(run="r"), [_pass(tmp_path)], 60.0).read_text()
    assert "Called (see Table 11" not in offline


def test_publish_copies_only_this_runs_files(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "project_root", lambda: tmp_path)
    result = _pass(tmp_path)
    copied = {p.name for p in reproduce.publish(result)}
    assert "table3_assistant_models.tex" in copied and "figure4_domains.pdf" in copied
    assert "figure3_demographics.png" not in copied  # an earlier run's
    assert "table6_demographics_part1.csv" not in copied  # written by a notebook that failed
    assert (tmp_path / "tables" / "table3_assistant_models.md").is_file()


def test_no_top_level_file_survives_a_publish_that_did_not_write_it(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "project_root", lambda: tmp_path)
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path / "runs")
    earlier = {tmp_path / "tables" / "table3_own_assistant.csv", tmp_path / "figures" / "figure4_domains.txt",
               tmp_path / "tables" / "old" / "table9.md"}
    for path in earlier:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("an earlier run's", encoding="utf-8")
    (tmp_path / "tables" / "README.md").write_text("what tables/ is", encoding="utf-8")
    result = _pass(tmp_path)
    published = reproduce.publish(result)
    on_top = {p for sub in ("tables", "figures") for p in (tmp_path / sub).rglob("*") if p.is_file()}
    assert on_top == {*published, tmp_path / "tables" / "README.md"}
    index = reproduce.write_index(Settings(run="r"), [result], 60.0, published).read_text()
    assert "## Published" in index and "- `tables/table3_assistant_models.csv`" in index
    assert "table3_own_assistant" not in index


def test_a_kernel_that_dies_at_start_is_started_again_once(tmp_path, monkeypatch):
    calls = []

    def flaky(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError(notebooks.KERNEL_START_FAILURE)

    monkeypatch.setattr(notebooks.papermill, "execute_notebook", flaky)
    notebooks.execute(tmp_path / "a.ipynb", tmp_path / "b.ipynb", {}, tmp_path, "a")
    assert len(calls) == 2

    def always(*args, **kwargs):
        calls.append(args)
        raise RuntimeError(notebooks.KERNEL_START_FAILURE)

    calls.clear()
    monkeypatch.setattr(notebooks.papermill, "execute_notebook", always)
    with pytest.raises(RuntimeError, match="kernel_info"):
        notebooks.execute(tmp_path / "a.ipynb", tmp_path / "b.ipynb", {}, tmp_path, "a")
    assert len(calls) == 2

    def broken(*args, **kwargs):
        calls.append(args)
        raise RuntimeError("the notebook's own error")

    calls.clear()
    monkeypatch.setattr(notebooks.papermill, "execute_notebook", broken)
    with pytest.raises(RuntimeError, match="own error"):
        notebooks.execute(tmp_path / "a.ipynb", tmp_path / "b.ipynb", {}, tmp_path, "a")
    assert len(calls) == 1


RETRIEVAL = "python:personalens_utils.assistants.retrieval:RetrievalAssistant?k=2&model=offline"


def test_per_role_specs_reach_the_notebooks_and_notebook_06_gets_the_stored_names(monkeypatch, tmp_path):
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path)
    settings = reproduce.parse_args([
        "--run", "specs", "--passes", "generated", "--user-model", "anthropic:claude-haiku-4-5",
        "--assistant-models", f"openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct,{RETRIEVAL}",
        "--judge-model", "anthropic:claude-sonnet-4-5", "--ablation-model", RETRIEVAL,
        "--compare-assistant", RETRIEVAL])
    calls: dict[str, dict] = {}

    def record(settings, name, out, params, label="", counter=""):
        calls[name + label] = params
        return StepResult(name + label, None, 0.0, True)

    monkeypatch.setattr(pipeline, "run_notebook", record)
    reproduce.run_pass(settings, "generated", None)
    sims = {k: v for k, v in calls.items() if k.startswith("03_simulation")}
    assert sorted(p["assistant_model"] for p in sims.values()) == sorted(
        ["openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct", RETRIEVAL])
    assert all(p["user_model"] == "anthropic:claude-haiku-4-5" for p in sims.values())
    assert calls["04_judging"]["judge_model"] == "anthropic:claude-sonnet-4-5"
    assert calls["05_ablation"]["assistant_model"] == RETRIEVAL
    assert calls["05_ablation"]["compare_assistant"] == RETRIEVAL
    analysis = calls["06_analysis"]  # it selects stored records by the names the specs gave them
    assert analysis["assistant_models"] == [
        "Qwen/Qwen2.5-7B-Instruct", RETRIEVAL.removeprefix("python:")]
    assert (analysis["user_model"], analysis["judge_model"]) == ("claude-haiku-4-5", "claude-sonnet-4-5")
    trust = calls["07_trust"]  # it calls the judges (specs) on the dialogues of the stored user agent
    assert (trust["user_model"], trust["judge_model"]) == ("claude-haiku-4-5", "anthropic:claude-sonnet-4-5")
    assert trust["assistant_models"] == analysis["assistant_models"]
    assert (trust["probe_users"], trust["probe_tasks"]) == (reproduce_settings.TRUST_PROBE_USERS,
                                                            reproduce_settings.TRUST_PROBE_TASKS)
    assert (trust["repeats"], trust["judge_samples"]) == (reproduce_settings.TRUST_REPEATS,
                                                          reproduce_settings.TRUST_JUDGE_SAMPLES)
    validity = calls["09_validity"]  # the reviewer a spec, the stored names, the task audit on 05's settings
    assert (validity["user_model"], validity["judge_model"]) == (trust["user_model"], trust["judge_model"])
    assert validity["reviewer_model"] == "Claude 3.7 Sonnet"
    assert validity["assistant_models"] == analysis["assistant_models"]
    ablation = RETRIEVAL.removeprefix("python:")  # the reference assistants did not run: 05's two settings
    assert (validity["blind_assistant"], validity["full_assistant"]) == (f"{ablation}:base",
                                                                         f"{ablation}:base+all")
    assert "10_robustness" not in calls  # its grid would call the real models: run it yourself
    lines = index._called_lines(settings)
    assert "- judge: anthropic:" in "\n".join(lines)
    assert "- reviewer: offline:claude-3-7-sonnet-20250219 (Claude 3.7 Sonnet)" in lines
    assert any("python:personalens_utils.assistants.retrieval:RetrievalAssistant" in line and
               "-> offline:ref-follows-setting" in line for line in lines)


def test_a_role_on_anthropic_without_a_key_stops_before_running(monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert reproduce.main(["--run", "nokey", "--judge-model", "anthropic:claude-sonnet-4-5"]) == 1
    assert "judge" in capsys.readouterr().err
    assert reproduce.main(["--run", "bad", "--assistant-models", "python:no_colon"]) == 1
    assert "python:package.module:Name" in capsys.readouterr().err



def test_a_rerun_of_notebook_04_judges_only_the_dialogues_notebook_03_made(tmp_path):
    """Issue 39 item 6: 05 runs after 04 and leaves its ablation dialogues (the ablation assistant in six
    settings) in the store, so on a rerun of a finished pass 04 judged them in all seven dimensions (about
    42,000 judgments more at the default sizes). 04 is given Table 3's assistants and the settings 03
    simulated, and keeps only their dialogues."""
    settings = Settings(run="r")
    bench = tmp_path / "bench"
    save_benchmark(tiny_benchmark(n_users=2), bench)
    plan = {step.name: step.params for step in pipeline.plan_pass(settings, tmp_path, bench, None, True)}
    judging = plan["04_judging"]
    assert all(params["settings"] == judging["settings"] for name, params in plan.items()
               if name.startswith("03_simulation"))
    config = SessionConfig(benchmark_dir=bench, default_run_store=False, output_dir=tmp_path / "o")
    with Session.open(config) as session:
        keep = session.in_scope(judging["assistant_models"], judging["settings"])
    made = [dialogue(f"a{k}", assistant_model=model) for k, model in enumerate(settings.assistant_models)]
    ablation = [dialogue(f"b{k}", assistant_model=settings.ablation_model, assistant_setting=name)
                for k, name in enumerate(PAPER_SETTINGS)]
    assert [keep(d) for d in made] == [True] * len(made)
    assert [keep(d) for d in ablation] == [False] * len(ablation)


SMALL = ("--passes", "generated", "--generated-users", "2", "--domains", "Events,Music,Travel",
         "--sd-tasks-per-domain", "1", "--md-tasks", "2")
"""The small generated benchmark docs/analysis.md recommends for a slow local model."""


def _plan(settings: Settings, folder: Path) -> dict[str, dict]:
    return {step.name: step.params for step in pipeline.plan_pass(settings, folder, folder / "b", None, True)}


def test_the_command_line_sizes_the_generated_benchmark_and_01_keeps_its_defaults_otherwise(tmp_path):
    small = reproduce.parse_args([*SMALL, "--task-types", "SD"])
    assert reproduce.problems(small) == []
    plan = _plan(small, tmp_path)
    generation = plan["01_generation"]
    assert [generation[k] for k in ("n_users", "domains", "sd_tasks_per_domain", "md_tasks")] == [
        2, ["Events", "Music", "Travel"], 1, 2]
    assert {str(p["task_types"]) for p in plan.values() if "task_types" in p} == {"['SD']"}
    default = _plan(reproduce.parse_args([]), tmp_path)  # what the default reproduction always passed
    assert not {"domains", "sd_tasks_per_domain", "md_tasks"} & set(default["01_generation"])
    assert {str(p.get("max_concurrency")) for k, p in default.items() if k != "08_persona_bench"} == {"16"}
    sd_only = ["--passes", "generated", "--domains", "Events,Music", "--task-types", "SD", "--md-tasks", "0"]
    assert reproduce.problems(reproduce.parse_args(sd_only)) == []


def test_an_offline_pass_ends_with_a_small_robustness_grid_on_its_own_records(tmp_path):
    """Issue 41 item 5: notebook 10 runs last, on the pass's store (03's and 04's records are reused), with
    the pass's roles under two styles on the SD tasks of its first users only."""
    generated = _plan(reproduce.parse_args(["--passes", "generated", "--generated-users", "4"]), tmp_path)
    grid = generated["10_robustness"]
    assert list(generated)[-1] == "10_robustness"
    assert grid["run_dir"] == generated["04_judging"]["run_dir"]
    assert (grid["users"], grid["task_types"]) == ([0, 1, 2, 3], ["SD"])
    assert grid["user_styles"] == list(reproduce_settings.ROBUSTNESS_STYLES) == ["cooperative", "reticent"]
    assert grid["assistant_models"] == generated["04_judging"]["assistant_models"]
    assert (grid["user_models"], grid["judge_models"]) == (["Claude 3 Sonnet"], ["Claude 3.5 Sonnet"])
    assert grid["repeats"] == reproduce_settings.ROBUSTNESS_REPEATS == 2  # so Table R5 has pass^2
    assert (grid["prompt_set"], grid["official_code"]) == ("kit", None)
    official_prompts = _plan(reproduce.parse_args(["--passes", "generated", "--prompt-set", "official",
                                                   "--official-code", str(tmp_path)]), tmp_path)
    grid, judging = official_prompts["10_robustness"], official_prompts["04_judging"]
    assert grid["prompt_set"] == judging["prompt_set"] == "official"
    assert grid["official_code"] == str(tmp_path)
    steps = pipeline.plan_pass(reproduce.parse_args([]), tmp_path, tmp_path / "b", "sample_50", False)
    official = next(step for step in steps if step.notebook == "10_robustness").params
    assert official["users"] == sorted(SAMPLES["sample_50"])[:reproduce_settings.ROBUSTNESS_USERS]


@pytest.mark.parametrize(("argv", "said"), [
    (["--domains", "Events,Musik,Travel"], "--domains 'Musik': unknown domain; use one of Alarm, Books, "),
    (["--domains", "Events,Music"], "--domains Events,Music: a multi-domain task spans at least 3 domains"),
    (["--md-tasks", "0"], "--md-tasks 0: give at least 1 (MD is among --task-types)"),
    (["--sd-tasks-per-domain", "-1", "--task-types", "MD"], "--sd-tasks-per-domain -1: give at least 0"),
    (["--task-types", "SD,XD"], "--task-types 'XD': unknown task type; use SD and/or MD"),
    (["--passes", "official", "--md-tasks", "2"],
     "--md-tasks: it sizes the generated benchmark, and --passes official makes none"),
])
def test_a_benchmark_size_that_cannot_work_is_one_line_before_anything_runs(argv, said):
    [line] = reproduce.problems(reproduce.parse_args(argv))
    assert line.startswith(said), line


def test_max_concurrency_takes_a_bound_per_backend_and_gives_the_rest_the_default(tmp_path, monkeypatch):
    assert reproduce.parse_args(["--max-concurrency", "4"]).max_concurrency == 4
    mapped = reproduce.parse_args([*SMALL, "--max-concurrency", "16,openai=1"]).max_concurrency
    assert mapped == {"offline": 16, "anthropic": 16, "openai": 1, "bedrock": 16}
    endpoint = reproduce.parse_args(["--max-concurrency", "openai@LOCAL_URL=1"]).max_concurrency
    assert endpoint == {"offline": 16, "anthropic": 16, "openai": 16, "bedrock": 16, "openai@LOCAL_URL": 1}
    settings = reproduce.parse_args([*SMALL, "--max-concurrency", "16,openai=1"])
    plan = _plan(settings, tmp_path)
    assert all(p["max_concurrency"] == mapped for name, p in plan.items() if name != "08_persona_bench")
    monkeypatch.setenv("LOCAL_URL", "http://127.0.0.1:9/v1")
    clients = Clients("offline", max_concurrency=mapped, progress=False)  # how notebooks 01-09 read it
    try:
        assert clients.client(clients.spec("Claude 3 Sonnet")).max_concurrency == 16
        assert clients.client(clients.spec("openai@LOCAL_URL:smollm2")).max_concurrency == 1
    finally:
        clients.close()
    for text, said in (("16,4", "give one N for every backend, not two"), ("vllm=2", "'vllm' is not a"),
                       ("anthropic@X=2", "'anthropic@X' is not a backend"), ("openai=1,openai=2", "twice"),
                       ("openai=x", "'openai=x' is not a whole number")):
        with pytest.raises(reproduce.OptionError, match=f"^argument --max-concurrency: .*{said}") as err:
            reproduce.parse_args(["--max-concurrency", text])
        assert "\n" not in str(err.value)
    assert reproduce.problems(reproduce.parse_args(["--max-concurrency", "8,openai=0"])) == [
        "--max-concurrency openai=0: give a number of at least 1"]


def test_evaluate_keeps_the_reproductions_bounds_per_backend(tmp_path):
    mapped = {"offline": 16, "anthropic": 16, "openai": 1, "bedrock": 16}
    folder = tmp_path / "generated"
    folder.mkdir()
    for name in evaluate.STAGES:  # executed copies as papermill leaves them: parameters in the metadata
        executed = new_notebook()
        executed.metadata["papermill"] = {"parameters": {"max_concurrency": mapped, "task_types": ["SD"]}}
        nbformat.write(executed, folder / f"{name}.ipynb")
    steps = evaluate.plan(LatestRun(folder, tmp_path / "b", ("a",)), tmp_path / "e", "offline:new")
    assert [params["max_concurrency"] for _, params in steps] == [mapped] * len(evaluate.STAGES)
    assert all(params["task_types"] == ["SD"] for _, params in steps)


def test_index_gives_the_size_of_the_benchmark_01_generated(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path / "runs")
    settings = reproduce.parse_args(["--run", "r", *SMALL, "--task-types", "SD,MD"])
    folder = settings.root / "generated"
    sizes = settings.generation_sizes()
    config = GenerationConfig(n_users=2, domains=tuple(sizes["domains"]), sd_tasks_per_domain=1, md_tasks=2)
    generate_benchmark(config, output_dir=folder / "b", run_dir=tmp_path / "generation")
    result = PassResult("generated", str(folder / "b"), "all generated", "first 20 users", folder,
                        [StepResult("01_generation", None, 1.0, True)])
    text = reproduce.write_index(settings, [result], 60.0).read_text()
    assert "- generated by 01: 2 users; domains Events, Music, Travel; SD tasks per domain 1; MD tasks 2; " \
        "10 scenarios (5.0 per user)" in text  # the size the docs recommend for a local model
    assert "- task types: SD, MD" in text
    result.steps = [StepResult("01_generation", None, 1.0, False, "ValueError: x")]  # an earlier benchmark's
    assert "generated by 01" not in reproduce.write_index(settings, [result], 60.0).read_text()


def test_index_of_an_offline_run_names_the_roles_a_real_model_plays(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path / "runs")
    served = "openai@LOCAL_URL:smollm2"
    mixed = Settings(run="r", assistant_models=(FOCUS_ASSISTANT, served))
    text = reproduce.write_index(mixed, [_pass(tmp_path)], 60.0).read_text()
    assert f"Some roles are played by a real model: `{served}`." in text
    offline = reproduce.write_index(Settings(run="r"), [_pass(tmp_path)], 60.0).read_text()
    assert "played by a real model" not in offline
