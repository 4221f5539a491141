"""List parameters given on the papermill command line with `-p` (which sends text) reach notebook 03."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.data import save_benchmark
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "03_simulation.ipynb"


def _papermill(tmp_path: Path, *params: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "papermill", str(NOTEBOOK), str(tmp_path / "out.ipynb"), "-k", "python3",
            "--no-progress-bar", "-p", "benchmark_dir", str(tmp_path / "bench"), "-p", "run_dir",
            str(tmp_path / "run"), "-p", "output_dir", str(tmp_path / "out"), *params]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_comma_lists_from_p_work_and_a_list_literal_is_refused_with_a_pointer_to_y(tmp_path):
    save_benchmark(tiny_benchmark(n_users=3), tmp_path / "bench")
    done = _papermill(tmp_path, "-p", "users", "0,2", "-p", "task_types", "SD",
                      "-p", "settings", "base,base+I")
    assert done.returncode == 0, done.stderr[-3000:]
    records = RunStore(tmp_path / "run").read(Dialogue)
    assert {r.user_id for r in records} == {0, 2}
    assert {r.task_type for r in records} == {"SD"}
    assert {r.assistant_setting for r in records} == {"base", "base+I"}
    assert len(records) == 2 * 3 * 2  # two users x three SD tasks x two settings

    refused = _papermill(tmp_path, "-p", "users", "[0, 2]")
    assert refused.returncode != 0
    assert "SessionError" in refused.stderr and "-y 'users: [a, b]'" in refused.stderr
