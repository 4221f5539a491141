"""The kit holds none of the official prompt text, and says what to do when the user's copy is missing.

The official templates (CC-BY-NC-4.0) are read from the user's copy at run time only. The scan looks
for any 60-character run of them (whitespace runs folded, so a re-wrapped copy is found too) in
every file git tracks in the checkout, and finds one planted in a file.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils import judging, prompt_sets, reproduce
from personalens_utils.base.paths import CODE_ENV, project_root
from personalens_utils.judging import JudgingConfig
from personalens_utils.llm import LLMClient
from personalens_utils.prompt_sets.official.templates import OfficialCodeError, load_official_prompts
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation import SimulationConfig, run_simulation

WINDOW = 60
MIN_LETTERS = 40
"""A window counts only with this many letters: shared runs of spaces or punctuation are not text."""


def _folded(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def official_windows(texts: Iterable[str]) -> set[str]:
    windows = set()
    for text in map(_folded, texts):
        for start in range(len(text) - WINDOW + 1):
            window = text[start : start + WINDOW]
            if sum(ch.isalpha() for ch in window) >= MIN_LETTERS:
                windows.add(window)
    return windows


def copied_runs(files: Iterable[Path], windows: set[str]) -> dict[str, str]:
    """File -> the first official run found in it."""
    found = {}
    for path in files:
        try:
            text = _folded(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for start in range(len(text) - WINDOW + 1):
            if text[start : start + WINDOW] in windows:
                found[str(path)] = text[start : start + WINDOW]
                break
    return found


def kit_files() -> list[Path]:
    """Every file git knows in the checkout (tracked or not ignored); without git, the kit's folders."""
    root = project_root()
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        folders = ("personalens_utils", "notebooks", "docs", "tests", "benchmarks")
        return [*(p for f in folders for p in (root / f).rglob("*") if p.is_file()), root / "README.md"]
    return [root / name for name in listed if name]


@pytest.fixture(scope="module")
def windows(official_code: Path) -> set[str]:
    return official_windows(load_official_prompts(official_code).texts())


def test_no_file_of_the_kit_holds_official_prompt_text(windows):
    files = kit_files()
    assert any(f.parts[-2:] == ("official", "templates.py") for f in files)
    assert len(files) > 100 and len(windows) > 10_000
    assert copied_runs(files, windows) == {}


def test_the_scan_finds_a_run_planted_in_a_kit_file(windows, official_code, tmp_path):
    source = load_official_prompts(official_code).judge["EVAL_DIALOGUE_PERSONALIZATION"]
    planted = tmp_path / "notes.md"
    planted.write_text("Our own words, then a borrowed line:\n" + source[400:470].replace(" ", "\n   ", 3))
    clean = tmp_path / "clean.md"
    clean.write_text("Personalization Score: 3\nVERDICT: True\n" * 20)
    found = copied_runs([*kit_files()[:20], planted, clean], windows)
    assert list(found) == [str(planted)]


def test_a_missing_copy_of_the_official_code_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv(CODE_ENV, raising=False)
    with pytest.raises(
        OfficialCodeError,
        match=rf"{tmp_path} does not hold the official PersonaLens code.*"
        rf"github.com/amazon-science/PersonaLens.*{CODE_ENV}=.*official_code=",
    ):
        load_official_prompts(tmp_path)
    monkeypatch.setenv(CODE_ENV, str(tmp_path / "nowhere"))
    monkeypatch.setenv("PERSONALENS_DATA", str(tmp_path / "no-data"))
    with pytest.raises(
        OfficialCodeError, match=rf"found no copy of the official PersonaLens code.*{CODE_ENV}"
    ):
        load_official_prompts()


def test_a_copy_without_a_template_is_refused_naming_it(official_code, tmp_path):
    copy = Path(shutil.copytree(official_code, tmp_path / "code"))
    module = copy / "util" / "evaluation_prompts.py"
    module.write_text(module.read_text().replace("EVAL_DIALOGUE_PERSONALIZATION =", "RENAMED ="))
    with pytest.raises(
        OfficialCodeError,
        match=r"lacks util/evaluation_prompts.py: EVAL_DIALOGUE_PERSONALIZATION; "
        r"prompt_set='official' reads",
    ):
        load_official_prompts(copy)
    (copy / "src" / "generate_dialogue.py").write_text("def broken(:\n")
    with pytest.raises(OfficialCodeError, match=r"cannot read .*generate_dialogue.py as Python source"):
        load_official_prompts(copy)


def test_an_official_run_without_the_code_fails_before_any_call(tmp_path, monkeypatch):
    monkeypatch.delenv(CODE_ENV, raising=False)
    bench = tiny_benchmark(n_users=1, seed=1)
    store = RunStore(tmp_path / "run")
    with LLMClient("offline", progress=False) as client:
        for run in (
            lambda: run_simulation(bench, store, client,
                                   SimulationConfig(prompts=prompt_sets.prompt_set("official", tmp_path))),
            lambda: judging.run_judging(store, client, judging.benchmark_contexts(bench),
                                        JudgingConfig(prompts=prompt_sets.prompt_set("official", tmp_path))),
        ):
            with pytest.raises(OfficialCodeError, match=CODE_ENV):
                run()
        assert client.totals()["calls"] == 0
    assert not any(store.root.glob("*.jsonl"))
    with pytest.raises(ValueError, match=r"unknown prompt_set 'paper'; choose one of \['kit', 'official'\]"):
        run_simulation(bench, store, LLMClient("offline", progress=False),
                       SimulationConfig(prompts=prompt_sets.prompt_set("paper")))


def test_make_reproduce_with_the_official_prompts_stops_at_once_without_the_code(tmp_path, capsys):
    settings = reproduce.parse_args(["--prompt-set", "official", "--official-code", str(tmp_path)])
    assert settings.prompt_set == "official" and settings.official_code == tmp_path
    assert (
        reproduce.main(["--run", "never", "--prompt-set", "official", "--official-code", str(tmp_path)]) == 1
    )
    assert f"{tmp_path} does not hold the official PersonaLens code" in capsys.readouterr().err
    assert not reproduce.Settings(run="never").root.exists()
