"""No file is written outside its folder whatever a record holds (issue 40, item 3).

Records here carry task ids and model names as a hostile run could: absolute paths, `..`, a NUL, a
name longer than any file system allows, names Windows reserves. Every writer that names a file
after data gets them: the official layout, Inspect logs, the Hugging Face folder, annotation sheets
and table or figure files named after a setting.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from support.records import put
from support.synthetic_store import build_benchmark, build_store, dialogue_record, judgment_record

from personalens_utils.base.safe_names import MAX_NAME, UnsafePath, inside, safe_name
from personalens_utils.export.formats import to_hf_dataset, to_inspect
from personalens_utils.export.official import export_official, plan_export
from personalens_utils.labels import AnnotationError
from personalens_utils.labels.sheets import export_sheet, read_table
from personalens_utils.outputs.plots import save_figure
from personalens_utils.outputs.tables import save_table
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore


def hostile(outside: Path) -> list[str]:
    """Names that, used as they are, would leave their folder or could not be a file at all."""
    return [str(outside / "evil"), "../../../../../evil", "..", ".", "a\x00b", "x" * 5000, "CON", "nul.txt",
            "..\\..\\evil", " lead", "trail. "]


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def store_of(root: Path, names: list[str], *, field: str) -> RunStore:
    """A store whose dialogues carry each hostile name in `field`, each with one judgment."""
    store = RunStore(root)
    rows = []
    for n, name in enumerate(names):
        row = dialogue_record(1, f"SD-Alarm-task-{n + 1}", ["Alarm"], "model-x", "base", 2)
        row[field] = name
        row["id"] = f"d{n}"
        rows.append(row)
    put(store, Dialogue, rows)
    put(store, Judgment, [{**judgment_record(row["id"], "personalization", 4.0), "id": f"j{n}"}
                          for n, row in enumerate(rows)])
    return store


@pytest.mark.parametrize("name", ["SD-Rental Cars-task-3", "MD-task-12", "claude-3-sonnet-v1_d_p",
                                  "table13_dialogue_stats_base_D", "base+all"])
def test_a_name_the_kit_makes_itself_is_kept_as_it_is(name):
    assert safe_name(name) == name
    assert safe_name(name, suffix="_dialogue.json") == f"{name}_dialogue.json"


def test_every_hostile_name_maps_to_one_distinct_plain_file_name(tmp_path):
    names = [*hostile(tmp_path), "\udcff"]  # a lone surrogate cannot be stored, but can be named
    mapped = [safe_name(name, suffix=".json") for name in names]
    assert len(set(mapped)) == len(mapped)
    for name in mapped:
        assert len(name) <= MAX_NAME and "/" not in name and "\\" not in name and "\x00" not in name
        assert not name.startswith((".", " ")) and name.isascii()
        assert name.split(".")[0].upper() not in {"CON", "NUL"}
        assert inside(tmp_path, name).parent == tmp_path


def test_a_link_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path)
    with pytest.raises(UnsafePath, match="outside"):
        inside(tmp_path / "root", "link", "file")


@pytest.mark.parametrize("field", ["task_id", "assistant_model"])
def test_the_official_export_writes_nothing_outside_its_root(tmp_path, field):
    outside = tmp_path / "outside"
    root = tmp_path / "a" / "b" / "c" / "d" / "e" / "export"
    store = store_of(tmp_path / "store", hostile(outside), field=field)
    before = files_under(tmp_path)
    try:
        written = export_official(store, root, allow_unofficial=True)
    except ValueError as exc:  # a model name the layout cannot hold is refused before any write
        assert field == "assistant_model" and "cannot be a folder name" in str(exc)
        written = []
    assert all(root in path.parents for path in written)
    assert all(p == root or root in p.parents or p in root.parents for p in files_under(tmp_path) - before)
    assert not outside.exists() and not (tmp_path / "evil").exists()


def test_the_official_export_says_which_files_the_official_scripts_will_not_find(tmp_path):
    store = store_of(tmp_path / "store", ["../../../evil", "SD-Alarm-task-1"], field="task_id")
    plan = plan_export(store, tmp_path / "export")
    assert [p for p in plan.problems if "'../../../evil' is written as" in p and "will not find it" in p]
    written = export_official(store, tmp_path / "export", allow_unofficial=True)
    assert {p.name for p in written} == {"SD-Alarm-task-1_dialogue.json", safe_name("../../../evil",
                                                                                  suffix="_dialogue.json")}
    assert all(tmp_path / "export" in p.parents for p in written)


def test_inspect_and_dataset_exports_write_only_inside_their_folders(tmp_path):
    for field in ("assistant_model", "assistant_setting"):
        names = hostile(tmp_path / "outside") if field == "assistant_model" else ["base"]
        store = store_of(tmp_path / f"store-{field}", names, field=field)
        before = files_under(tmp_path)
        logs = to_inspect(store, tmp_path / f"inspect-{field}")
        dataset = to_hf_dataset(store, tmp_path / f"hf-{field}", license="cc-by-4.0")
        new = files_under(tmp_path) - before
        assert logs and all(p.parent == tmp_path / f"inspect-{field}" for p in logs)
        assert all(tmp_path / f"inspect-{field}" in p.parents or dataset in p.parents or p in (
            dataset, tmp_path / f"inspect-{field}") for p in new)
        assert len(logs) == len(set(names))


def test_tables_and_figures_named_after_data_stay_in_their_folders(tmp_path):
    out = tmp_path / "out"
    for slug in hostile(tmp_path / "outside"):
        table = save_table(pd.DataFrame({"a": [1]}), out, 13, slug, "caption")
        fig = plt.figure()
        figure = save_figure(fig, out, 4, slug)
        plt.close(fig)
        assert all(p.parent == out / "tables" for p in table.values())
        assert all(p.parent == out / "figures" for p in figure.values())
    assert {p.name for p in tmp_path.iterdir()} == {"out"}
    assert {p.name for p in out.iterdir()} == {"tables", "figures"}


def test_an_annotation_sheet_of_hostile_ids_writes_only_its_own_files(tmp_path):
    store = build_store(tmp_path / "run", users=2, second_judge=False)
    model = next(d for d in store.records(Dialogue) if d["status"] == "terminated")
    names = [name for name in hostile(tmp_path / "outside") if "\x00" not in name]
    put(store, Dialogue, [{**model, "assistant_model": "model-h", "id": name} for name in names])
    put(store, Dialogue, [{**model, "assistant_model": "model-nul", "id": "a\x00b"}])
    before = files_under(tmp_path)
    with pytest.raises(AnnotationError, match=r"row 2, column dialogue_id: a NUL character"):
        export_sheet(store, build_benchmark(2), tmp_path / "nul",
                                where={"assistant_model": "model-nul"})
    assert not [p for p in files_under(tmp_path) - before if store.root not in p.parents and p.is_file()]
    paths = export_sheet(store, build_benchmark(2), tmp_path / "sheet", n=100,
                                    where={"assistant_model": "model-h"})
    new = {p for p in files_under(tmp_path) - before if store.root not in p.parents and p.is_file()}
    assert new == set(paths.values()) and all(p.parent == tmp_path / "sheet" for p in new)
    assert sorted(r["dialogue_id"] for r in read_table(paths["sheet"])[1]) == sorted(names)
