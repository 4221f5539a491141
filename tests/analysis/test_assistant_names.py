"""A Python assistant in a file outside the checkout is named by its class in the captions and rows of
Tables 4, 12, 13 and Figures 4, 5 (issue 39 item 6: an evaluation's captions carried the file's
absolute path, which differs on every machine); the CSV sources keep the whole spec."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
from support.synthetic_store import JUDGE, build_store

from personalens_utils import analysis
from personalens_utils.analysis import dialogue_stats
from personalens_utils.measures import scores
from personalens_utils.outputs.tables import Source

FOLDER = "/home/someone/elsewhere"
STORED = f"{FOLDER}/mine.py:Mine"
"""How a Python assistant in a file is stored: the file's absolute path and the class."""


@pytest.fixture(scope="module")
def renamed(tmp_path_factory):
    store = build_store(tmp_path_factory.mktemp("run"), users=6)
    tidy = scores.load_scores(store, judge_model=JUDGE)
    tidy = tidy.assign(assistant_model=tidy["assistant_model"].astype(str).replace({"model-a": STORED}))
    dialogues = dialogue_stats.dialogues_frame(store)
    dialogues = dialogues.assign(
        assistant_model=dialogues["assistant_model"].astype(str).replace({"model-a": STORED}))
    return tidy, dialogues


def test_captions_and_rows_name_a_file_assistant_by_its_class(renamed):
    tidy, dialogues = renamed
    table4 = analysis.table4(tidy, assistant_model=STORED)
    table12 = analysis.table12(tidy)
    table13 = dialogue_stats.table13(dialogues, assistant_model=STORED, assistant_setting="base")
    figure4 = analysis.figure4(tidy, assistant_model=STORED)
    figure5 = analysis.figure5(scores.turn_frame(tidy), assistant_model=STORED, domains=["Movies"])
    captions = {"Table 4": table4.caption, "Table 12": table12.caption, "Table 13": table13.caption,
                "Figure 4": figure4.caption, "Figure 5": figure5.caption}
    assert [name for name, caption in captions.items() if FOLDER in caption] == []
    assert all("Mine" in captions[name] for name in ("Table 4", "Table 13", "Figure 4", "Figure 5"))
    rows = set(table12.frame["Assistant model"])
    assert "Mine" in rows and STORED not in rows


def test_a_source_names_a_file_assistant_by_its_file_name_and_class():
    """The figures' notes and the tables' sources list the model ids, where a file assistant's is its
    path (`/folder/mine.py:Mine`)."""
    source = Source.of("run store store/", 10, "judged dialogues", ["offline", "python"],
                       [STORED, "claude-3-5-sonnet-20241022", "Qwen/Qwen2.5-7B-Instruct"])
    assert source.describe() == ("Source: run store store/, 10 judged dialogues; models mine.py:Mine, "
                                 "Qwen/Qwen2.5-7B-Instruct, claude-3-5-sonnet-20241022; backend offline, "
                                 "python; run card store/run_card.json.")
