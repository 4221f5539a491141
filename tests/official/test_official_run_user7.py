"""The official scripts' own output for user 7, imported: the kit's tables under scoring="official"
print what the official `util/gather_evaluation.py` printed (`gather_evaluation.log`), number for number.

The log does not say which command printed which block, so the test first runs the official gather
script itself (unchanged, on the same files) in the order its own `gather_evaluation.sh` uses and
checks it prints the log exactly: that pins each block to its model folder, dimension and side.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from personalens_utils import analysis
from personalens_utils.export.official import EVALUATION_DIMENSIONS, import_official_run, parse_model_folder
from personalens_utils.llm import registry
from personalens_utils.measures import scores
from personalens_utils.runstore.store import RunStore

GATHER = [("personalization", ""), ("task_completion", ""), ("naturalness", "_user"),
          ("naturalness", "_asst"), ("coherence", "_user"), ("coherence", "_asst")]
"""One block per (dimension, side), in the order of the official gather_evaluation.sh."""
MD_FOLDER = "claude-3-sonnet-v1"
"""The only folder holding multi-domain dialogues; the log's `=== MD` section (checked below)."""
TC_JUDGE, JUDGE = "claude-3-sonnet-v1", "claude-3-5-sonnet-v2"
"""The judge folders gather_evaluation.py reads: task completion, and every other dimension."""


def sections(log: str) -> dict[str, str]:
    """`=== name` -> the text printed under it."""
    parts = re.split(r"^=== (.+)\n", log, flags=re.MULTILINE)
    return {name: text for name, text in zip(parts[1::2], parts[2::2], strict=True)}


def blocks(text: str) -> list[str]:
    """The output of one gather call each (every call starts with an empty line and 'Analyzed N files')."""
    return ["Analyzed" + b for b in text.split("\nAnalyzed")[1:]]


def gather(code: Path, folder: str, dimension: str, ext: str, md: bool) -> str:
    args = [sys.executable, "-m", "util.gather_evaluation", "-s", "7", "-e", "7", "-m", folder,
            "-d", dimension]
    args += ["-f", ext] if ext else []
    args += ["-md"] if md else []
    done = subprocess.run(args, cwd=code, capture_output=True, text=True, check=True, timeout=120)
    return done.stdout


@pytest.fixture(scope="module")
def run(official_run_user7: Path, official_code: Path, tmp_path_factory: pytest.TempPathFactory):
    code = tmp_path_factory.mktemp("code") / "official"
    shutil.copytree(official_code, code)
    (code / "output").symlink_to(official_run_user7 / "output")
    store = RunStore(tmp_path_factory.mktemp("store"))
    imported = import_official_run(official_run_user7, into=store, user_model="claude-3-sonnet-v1")
    log = (official_run_user7 / "gather_evaluation.log").read_text()
    return code, store, imported, sections(log)


def test_the_log_is_what_the_official_gather_script_prints(run):
    code, _, _, logged = run
    assert set(logged) == {"claude-3-sonnet-v1", "claude-3-sonnet-v1_d_p_s", "llama-3-1-8b-instruct-v1", "MD"}
    for name, text in logged.items():
        md = name == "MD"
        wanted = GATHER[:2] if md else GATHER
        printed = "".join(gather(code, MD_FOLDER if md else name, d, e, md) for d, e in wanted)
        assert printed.strip() == text.strip(), name


def kit_tables(store: RunStore, judge: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The long data of Tables 3 and 12 under scoring="official", every setting, judged by `judge`."""
    tidy = scores.load_scores(store, judge_model=judge, scoring="official")
    settings = sorted(tidy["assistant_setting"].unique())
    frames = [analysis.table3(tidy, setting=s).data.assign(assistant_setting=s) for s in settings]
    if judge == JUDGE:
        frames += [analysis.table12(tidy, setting=s, task_types=("SD", "MD")).data.assign(assistant_setting=s)
                   for s in settings]
    return tidy, pd.concat(frames)


def test_kit_tables_under_official_scoring_equal_every_number_of_the_log(run):
    _, store, imported, logged = run
    assert len(imported.dialogues) == 3 * 51 + 13 and len(imported.judgments) == 1162
    tidy_tc, long_tc = kit_tables(store, TC_JUDGE)
    tidy, long = kit_tables(store, JUDGE)
    compared = 0
    for name, text in logged.items():
        md = name == "MD"
        folder, task_type = (MD_FOLDER, "MD") if md else (name, "SD")
        short, setting = parse_model_folder(folder)
        model = registry.lookup(short).name
        for (family, ext), block in zip(GATHER[:2] if md else GATHER, blocks(text), strict=True):
            dimension = EVALUATION_DIMENSIONS[(family, ext)]
            frame, part = (long_tc, tidy_tc) if dimension == "task_completion" else (long, tidy)
            row = frame[(frame["assistant_model"] == model) & (frame["assistant_setting"] == setting.name)
                        & (frame["task_type"] == task_type) & (frame["dimension"] == dimension)]
            assert len(row) == 1, (name, dimension)
            row = row.iloc[0]
            files = int(re.search(r"Analyzed (\d+) files", block)[1])
            assert row["n"] + row["n_missing"] == files
            group = part[(part["assistant_model"] == model) & (part["assistant_setting"] == setting.name)
                         & (part["task_type"] == task_type) & (part["dimension"] == dimension)]
            if dimension == "task_completion":
                assert f"{row['mean']:.2f}%" == re.search(r"Average Task Completion Rate: (\S+)", block)[1]
                per_domain = re.findall(
                    r"\n(\S+) Statistics:\nCount (\d+)\nAverage Task Completion Rate: (\S+)", block)
                by_domain = scores.aggregate(scores.explode_domains(group), ["domain"], [dimension])
                kit = {(r.domain, str(r.n), f"{r.mean:.2f}%") for r in by_domain.itertuples()}
                if md:  # the official script takes the word after "MD-" ("task") as an MD file's domain
                    kit = {("task", str(row["n"]), f"{row['mean']:.2f}%")}
                assert set(per_domain) == kit
                compared += 1 + 2 * len(per_domain)
            else:
                assert f"{row['mean']:.2f}" == re.search(rf"Average {family} rating: (\S+)", block)[1]
                low, high = re.search(r"Range: (\d+) - (\d+)", block).groups()
                assert (int(group["score"].min()), int(group["score"].max())) == (int(low), int(high))
                compared += 3
            compared += 1
    assert compared == len(re.findall(r"\d+(?:\.\d+)?", "".join(logged.values())))
