"""A reproduction that cannot be trusted stops and says so (issue 21 items 4 and 5, issue 20's kernel
warnings): bad options are named one line each before any notebook starts; a notebook that fails
stops the notebooks that read what it makes, INDEX.md marks it, nothing stale is listed or published
and runs/LATEST stays; kernels start without ipykernel's plain-TCP warning."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

import duckdb
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from support.notebook_output import TCP_WARNING

from personalens_utils.base import errors
from personalens_utils.reproduce import Settings, StepResult, cli, notebooks, pipeline
from personalens_utils.reproduce import index as reproduce_index
from personalens_utils.reproduce import settings as reproduce_settings

WRITER = ("import pandas as pd\nfrom personalens_utils.outputs.tables import save_table\n"
          'save_table(pd.DataFrame({"x": [1]}), output_dir, 3, "assistant_models", "fresh")')


def _notebook(path: Path, body: str) -> None:
    params = new_code_cell("output_dir = None\nbenchmark_dir = None")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A checkout whose runs/, tables/ and notebooks/ are in tmp_path: notebooks 02-06 would each write
    Table 3; 01 fails as it does with --generated-users 0."""
    for module in (reproduce_settings, pipeline):
        monkeypatch.setattr(module, "project_root", lambda: tmp_path)
        monkeypatch.setattr(module, "runs_dir", lambda: tmp_path / "runs")
    books = tmp_path / "notebooks"
    books.mkdir()
    _notebook(books / "01_generation.ipynb", 'raise ValueError("n_users must be at least 1, got 0")')
    for name in ("02_validation", "03_simulation", "04_judging", "05_ablation", "06_analysis", "07_trust"):
        _notebook(books / f"{name}.ipynb", WRITER)
    _notebook(books / "08_persona_bench.ipynb", "pass")  # needs nothing of 01; writes no table here
    return tmp_path


def test_a_failed_notebook_01_stops_the_pass_and_nothing_stale_is_published(project, capsys):
    old = project / "runs" / "r" / "generated"  # an earlier reproduction in the same run folder
    (old / "benchmark" / "profile").mkdir(parents=True)
    (old / "benchmark" / "task").mkdir()
    (old / "tables").mkdir()
    (old / "tables" / "table3_assistant_models.md").write_text("an earlier run's table\n")
    latest = project / "runs" / "LATEST"
    latest.write_text("folder: r/generated\nbenchmark: r/generated/benchmark\n")
    code = cli.main(["--run", "r", "--passes", "generated", "--generated-users", "2",
                     "--assistant-models", "ref-follows-setting", "--ablation-model", "ref-follows-setting"])
    out = capsys.readouterr().out
    assert code == 1
    assert "[reproduce] [2/10] 03_simulation-ref_follows_setting: not run, 01_generation failed" in out
    assert "[reproduce] [1/10] 01_generation FAILED after" in out
    assert "nothing copied to tables/ and figures/, runs/LATEST unchanged" in out
    assert "ran 2 notebook(s): 1 ok, 1 failed, 8 not run" in out  # 08 (PERSONA Bench) needs nothing of 01
    assert not (project / "tables").exists()
    assert latest.read_text() == "folder: r/generated\nbenchmark: r/generated/benchmark\n"
    assert not (old / "06_analysis.ipynb").exists()  # no notebook ran on the old benchmark
    index = (project / "runs" / "r" / "INDEX.md").read_text()
    assert "| 01_generation | `generated/01_generation.ipynb` | " in index
    assert "FAILED: ValueError: n_users must be at least 1, got 0 |" in index
    assert "**Not published**: in pass `generated`, 01_generation failed" in index
    assert "| 06_analysis | - | 0 s | not run: 01_generation failed |" in index
    assert "| 07_trust | - | 0 s | not run: 01_generation failed |" in index
    reproduced, missing = index.split("### Not reproduced")
    assert "table3_assistant_models" not in index
    assert "**Table 3** (assistant models: TCR, P, Nat., Coh. (SD, MD)): 06_analysis did not run: " \
        "01_generation failed" in missing
    assert "**Table" not in reproduced and "**Figure" not in reproduced


def test_a_failure_stops_only_the_notebooks_that_need_its_output(monkeypatch, tmp_path):
    """05 fails: 02, 04 and 07 still run, 06 and 09 (which read 05's judgments) do not; the official pass,
    which needs nothing of the generated one, runs, finishes and is published."""
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(pipeline, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(pipeline, "publish", lambda result: [])
    ran: list[str] = []

    def run(settings, name, out, params, label="", counter=""):
        ran.append(f"{out.name}/{name}{label}")
        ok = not (out.name == "generated" and name == "05_ablation")
        return StepResult(name + label, None, 1.0, ok, "" if ok else "ScoresError: no judgments")

    monkeypatch.setattr(pipeline, "run_notebook", run)
    settings = Settings(run="r", assistant_models=("a", "b"), ablation_model="a", focus_model=None,
                        benchmark_dir=tmp_path)
    results, _ = pipeline.reproduce(settings)
    generated, official = results
    assert [s.outcome for s in generated.steps] == [
        "ok", "ok", "ok", "ok", "ok", "FAILED: ScoresError: no judgments", "not run: 05_ablation failed",
        "ok", "not run: 05_ablation failed", "ok", "ok"]  # 07, 08, 10 need nothing of 05; 09 audits 05's
    assert [s.notebook for s in generated.steps][-5:] == ["06_analysis", "07_trust", "09_validity",
                                                          "08_persona_bench", "10_robustness"]
    assert "generated/06_analysis" not in ran and "official/06_analysis" in ran
    assert official.finished and not generated.finished
    assert "folder: r/official" in (tmp_path / "runs" / "LATEST").read_text()


def test_every_bad_option_is_one_line_before_any_notebook_starts(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path / "runs")

    def never(*args, **kwargs):
        raise AssertionError("a notebook started")

    monkeypatch.setattr(pipeline, "run_notebook", never)
    assert cli.main(["--run", "bad", "--max-concurrency", "-1", "--generated-users", "0", "--users", "some",
                     "--assistant-models", "::", "--judge-model", "openai@http://host:m", "--seed", "-1",
                     "--annotations", str(tmp_path / "none*.csv")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" ")[1].split("=")[0] for line in lines] == [
        "--max-concurrency", "--generated-users", "--seed", "--users", "--annotations", "--assistant-models",
        "--judge-model"]
    assert all(line.startswith("[reproduce] ") for line in lines)
    assert "--assistant-models='::': nothing before ':'" in lines[5]
    for argv, said in (
            (["--max-concurrency", "x"], "argument --max-concurrency: 'x' is not a whole number"),
            (["--backend", "nosuch"], "argument --backend: invalid choice: 'nosuch'"),
            (["--focus-model", "elsewhere"], "--focus-model 'elsewhere': use one of the assistants")):
        assert cli.main(["--run", "bad", *argv]) == 1
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and said in err, err
    assert not (tmp_path / "runs" / "bad").exists()


def test_a_kernel_starts_without_the_plain_tcp_warning(tmp_path, capfd):
    books = tmp_path / "notebooks"
    books.mkdir()
    _notebook(books / "writer.ipynb", WRITER)
    step = notebooks.run_notebook(Settings(run="t", notebooks_dir=books), "writer", tmp_path / "out",
                                  {"output_dir": str(tmp_path / "out")})
    assert step.ok, step.message
    captured = capfd.readouterr()
    assert TCP_WARNING not in captured.err + captured.out


WITNESS = """import signal, sys, time
from pathlib import Path
log = Path(sys.argv[1])
signal.signal(signal.SIGINT, lambda *_: log.write_text(log.read_text() + "SIGINT\\n"))
log.write_text("ready\\n")
deadline = time.monotonic() + 60
while time.monotonic() < deadline and "SIGINT" not in log.read_text():
    time.sleep(0.05)
"""
"""A process the notebook starts in its kernel's process group: it notes every SIGINT that reaches it."""


def test_a_finished_notebooks_kernel_is_shut_down_without_an_interrupt(tmp_path, capfd):
    """The SIGINT jupyter_client sends a kernel's process group before its shutdown request is what made
    ipykernel log "KeyboardInterrupt caught in kernel" when it landed inside a message handler (a race,
    so rare); a process the kernel started sees that SIGINT every time, so it stands witness here."""
    books, log = tmp_path / "notebooks", tmp_path / "witness.log"
    books.mkdir()
    _notebook(books / "witness.ipynb", (
        f"import pathlib, subprocess, sys, time\nlog = pathlib.Path({str(log)!r})\n"
        f"witness = subprocess.Popen([sys.executable, '-c', {WITNESS!r}, str(log)])\n"
        "while not (log.exists() and 'ready' in log.read_text()):\n    time.sleep(0.05)\n"
        "print(witness.pid)"))
    step = notebooks.run_notebook(Settings(run="t", notebooks_dir=books), "witness", tmp_path / "out",
                                  {"output_dir": str(tmp_path / "out")})
    assert step.ok, step.message
    pid = int(nbformat.read(step.executed, as_version=4).cells[-1].outputs[0]["text"])
    try:
        time.sleep(1)  # a signal sent at the shutdown has reached the witness by now
        assert log.read_text() == "ready\n"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    captured = capfd.readouterr()
    assert "KeyboardInterrupt" not in captured.err + captured.out


KIT_ERROR = "from personalens_utils.llm.specs import ModelSpec\nModelSpec.parse('openai@1x:m', 'offline')"
"""A cell that fails with one of the kit's own errors (shown in the notebook with the traceback hint)."""
OTHER_ERROR = ("class BinderException(Exception):\n    pass\n\n"
               "raise BinderException('Binder Error: Column \"x\" referenced\\nbefore it is defined')")
"""A cell that fails with an error of a library, its message on two lines."""


@pytest.mark.slow
def test_each_failure_line_says_the_error_and_its_message_not_the_traceback_hint(project, capsys):
    """Issue 39 item 3: the step's line, the summary and INDEX.md name the error and its message; on the
    old code they showed the last line of papermill's traceback, the kit's hint on how to see it."""
    _notebook(project / "notebooks" / "01_generation.ipynb", KIT_ERROR)
    _notebook(project / "notebooks" / "08_persona_bench.ipynb", OTHER_ERROR)
    code = cli.main(["--run", "r", "--passes", "generated", "--generated-users", "2",
                     "--assistant-models", "ref-follows-setting", "--ablation-model", "ref-follows-setting"])
    out = capsys.readouterr().out
    assert code == 1
    assert errors.HOW_TO_SEE_THE_TRACEBACK not in out
    kit = "SpecError: model='openai@1x:m': after '@' name the environment variable"
    other = "BinderException: Binder Error: Column \"x\" referenced before it is defined"
    assert f"[reproduce]   01_generation: FAILED: {kit}" in out  # the summary
    assert f"[reproduce]   08_persona_bench: FAILED: {other}\n" in out
    assert re.search(rf"\[1/10\] 01_generation FAILED after \d+s: {re.escape(kit)}", out)  # the step's line
    index = (project / "runs" / "r" / "INDEX.md").read_text()
    assert f"| FAILED: {kit}" in index and f"| FAILED: {other} |" in index
    assert errors.HOW_TO_SEE_THE_TRACEBACK not in index


def test_an_error_of_the_runner_itself_is_one_named_line_and_the_old_index_does_not_survive(
        monkeypatch, tmp_path, capsys):
    """Issue 39 item 3 and item 6: an error raised by the runner (here the index's store summary, as
    `load_judgments` raised it) is one line naming the step, the error's type and message, exit code 1;
    the index of an earlier run is replaced by one saying the run is under way before any notebook
    starts, and by one saying where it stopped. On the old code the error escaped as a traceback and
    the earlier index stayed, still reporting success."""
    monkeypatch.setattr(reproduce_settings, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(pipeline, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(pipeline, "publish", lambda result: [])
    monkeypatch.delenv(errors.FULL_TRACEBACK_VARIABLE, raising=False)
    index = tmp_path / "runs" / "r" / "INDEX.md"
    index.parent.mkdir(parents=True)
    index.write_text("Published: pass `generated`, an earlier run\n")
    seen: list[str] = []

    def run(settings, name, out, params, label="", counter=""):
        seen.append(index.read_text())
        return StepResult(name + label, None, 1.0, True)

    def unreadable(folder):
        raise duckdb.BinderException('Binder Error: Column "official_score" referenced before it is defined')

    monkeypatch.setattr(pipeline, "run_notebook", run)
    monkeypatch.setattr(reproduce_index, "store_summary", unreadable)
    code = cli.main(["--run", "r", "--passes", "generated", "--assistant-models", "ref-follows-setting",
                     "--ablation-model", "ref-follows-setting"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err == (f"[reproduce] writing {index} failed: BinderException: Binder Error: Column "
                            '"official_score" referenced before it is defined\n')
    assert seen and all("**Under way** since" in text and "earlier run" not in text for text in seen)
    written = index.read_text()
    assert "**Stopped**: writing" in written and "BinderException" in written and "earlier run" not in written
    monkeypatch.setenv(errors.FULL_TRACEBACK_VARIABLE, "1")
    with pytest.raises(errors.KitError) as caught:
        cli.main(["--run", "r", "--passes", "generated", "--assistant-models", "ref-follows-setting",
                  "--ablation-model", "ref-follows-setting"])
    assert isinstance(caught.value.__cause__, duckdb.BinderException)  # the traceback is one flag away
