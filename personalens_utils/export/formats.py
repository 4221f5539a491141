"""Runs that travel: a run store exported as Inspect eval logs and as a Hugging Face dataset folder, and
such a folder imported back into a store (docs/export.md).

Inspect logs are for reading transcripts where researchers already read them (`inspect view`); the
dataset folder is the exchange format: every record's stored JSON line travels unchanged, so an imported
run is the same run, byte for byte, and the kit's analysis and judging work on it as on any store.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from personalens_utils.base import paths
from personalens_utils.base.safe_names import inside
from personalens_utils.data import Benchmark
from personalens_utils.export import untrusted
from personalens_utils.export.arguments import (
    ExportArgumentError,
    PathArg,
    StoreArg,
    as_benchmark,
    as_path,
    as_store,
)
from personalens_utils.export.untrusted import ExportError
from personalens_utils.generation.runner import MANIFEST as GENERATION_MANIFEST
from personalens_utils.prompt_sets import ScenarioContext, prompt_set
from personalens_utils.runstore.identity import stable_id
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation.settings import AssistantSetting

RUN_CARD = "run_card.json"
OFFICIAL_LICENSE = "cc-by-nc-4.0"
"""The official PersonaLens data's license; a run on it inherits it."""
_TABLES: tuple[type[Dialogue] | type[Judgment], ...] = (Dialogue, Judgment)
_EPOCH = "1970-01-01T00:00:00+00:00"

__all__ = ["OFFICIAL_LICENSE", "ExportError", "import_run", "to_hf_dataset", "to_inspect"]


def read_run_card(store: StoreArg) -> dict[str, Any] | None:
    """The store's run card as a plain dict, or None when the store has none."""
    path = as_store(store, "read_run_card(store)").root / RUN_CARD
    if not path.exists():
        return None
    try:
        card = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ExportError(f"{path}: the run card is not valid JSON ({exc})") from None
    if not isinstance(card, dict):
        raise ExportError(f"{path}: the run card is not a JSON object")
    return card


def _dialogues(store: RunStore) -> list[Dialogue]:
    dialogues = store.read(Dialogue)
    if not dialogues:
        raise ExportError(f"the run store {store.root} holds no dialogues; nothing to export")
    return dialogues


# -- Inspect ---------------------------------------------------------------------------------------------

def to_inspect(store: StoreArg, out_dir: PathArg, *, benchmark: Benchmark | None = None) -> list[Path]:
    """Write one Inspect eval log per (assistant, setting, judge), one sample per judged dialogue.

    With `benchmark`, a sample's input is the scenario's task as the user was given it and its first
    message the assistant's system context (rebuilt by the dialogue's prompt set); without it the input
    names the scenario. `store` is a RunStore or its folder. Returns the logs written, in a stable order.
    """
    store = as_store(store, "to_inspect(store)")
    out = as_path(out_dir, "to_inspect(out_dir)")
    benchmark = as_benchmark(benchmark, "to_inspect(benchmark)")
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.scorer import Score

    dialogues = {d.id: d for d in _dialogues(store)}
    card = read_run_card(store)
    groups: dict[tuple[str, str, str], dict[str, list[Judgment]]] = defaultdict(lambda: defaultdict(list))
    for judgment in store.read(Judgment):
        if (dialogue := dialogues.get(judgment.dialogue_id)) is None:
            continue
        key = (dialogue.assistant_model, dialogue.assistant_setting, judgment.judge_model)
        groups[key][dialogue.id].append(judgment)
    if not groups:
        raise ExportError(f"the run store {store.root} holds no judgments of its dialogues; judge them "
                          "(notebook 04) before exporting to Inspect")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for (assistant, setting, judge), judged in sorted(groups.items()):
        samples = []
        for dialogue_id in sorted(judged, key=lambda i: (dialogues[i].scenario_id, i)):
            dialogue = dialogues[dialogue_id]
            scores = {j.dimension: Score(value=j.score if j.score is not None else "missing",
                                         explanation=j.explanation,
                                         metadata={"judgment_id": j.id, "status": j.status,
                                                   "turn_scores": j.turn_scores})
                      for j in sorted(judged[dialogue_id], key=lambda j: j.dimension)}
            samples.append(EvalSample(
                id=dialogue.id, epoch=dialogue.variant.sample + 1,
                input=_input(dialogue, benchmark), target="",
                messages=_messages(dialogue, benchmark), scores=scores,
                metadata={"dialogue_id": dialogue.id, "scenario_id": dialogue.scenario_id,
                          "user_id": dialogue.user_id, "task_id": dialogue.task_id,
                          "task_type": dialogue.task_type, "user_model": dialogue.user_model,
                          "status": dialogue.status, "prompt_set": dialogue.variant.prompt_set,
                          "judgment_ids": [j.id for j in judged[dialogue_id]]},
            ))
        task = f"personalens_{setting}"
        eval_id = stable_id("inspect", assistant, setting, judge, *sorted(judged))
        spec = EvalSpec(
            eval_id=eval_id, run_id=stable_id("run", str(store.root.resolve())),
            created=(card or {}).get("created", _EPOCH), task=task, task_id=eval_id,
            dataset=EvalDataset(name="personalens", samples=len(samples),
                                sample_ids=[s.id for s in samples]),
            model=assistant, config=EvalConfig(),
            metadata={"assistant_setting": setting, "judge_model": judge, "run_card": card},
        )
        path = inside(out, f"{_slug(assistant)}_{_slug(setting)}_{_slug(judge)}", suffix=".eval")
        write_eval_log(EvalLog(eval=spec, status="success", samples=samples), str(path))
        written.append(path)
    return written


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in text)


def _context(dialogue: Dialogue, benchmark: Benchmark) -> ScenarioContext:
    try:
        scenario = benchmark.scenario(dialogue.scenario_id)
        return ScenarioContext.of(scenario, benchmark.user(scenario.user_id))
    except KeyError:
        raise ExportError(f"dialogue {dialogue.id} is about scenario {dialogue.scenario_id!r}, which the "
                          f"benchmark at {benchmark.root} does not hold; export it with the benchmark it "
                          "was simulated on") from None


def _input(dialogue: Dialogue, benchmark: Benchmark | None) -> str:
    if benchmark is None:
        return f"scenario {dialogue.scenario_id} (user {dialogue.user_id}, task {dialogue.task_id})"
    return _context(dialogue, benchmark).scenario.task_description


def _messages(dialogue: Dialogue, benchmark: Benchmark | None) -> list[Any]:
    """The dialogue as chat messages: the assistant's system context (with the benchmark), then the turns."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    messages: list[Any] = []
    if benchmark is not None:
        prompts = prompt_set(dialogue.variant.prompt_set)
        request = prompts.assistant_request(AssistantSetting.parse(dialogue.assistant_setting),
                                            _context(dialogue, benchmark), [], dialogue.assistant_model)
        messages.append(ChatMessageSystem(content=request.system))
    for turn in dialogue.turns:
        kind = ChatMessageUser if turn.role == "user" else ChatMessageAssistant
        messages.append(kind(content=turn.content))
    return messages


# -- Hugging Face datasets -------------------------------------------------------------------------------

def benchmark_license(benchmark_dir: PathArg) -> tuple[str | None, str]:
    """The license a run on this benchmark inherits and where it comes from; or None and why there is none.

    The official data's (`OFFICIAL_LICENSE`); else the first line of a `LICENSE` file in the folder or
    its parent; else, for a benchmark the kit generated offline from its own demographic tables, the
    kit's own license, since all of it comes from the kit. A benchmark generated by a model or from
    someone's demographics file states no license: that choice is its maker's, so it is not guessed.
    """
    folder = as_path(benchmark_dir, "benchmark_dir").expanduser().resolve()
    official = paths.find_official_data()
    if official is not None and official.resolve() in (folder, *folder.parents):
        return OFFICIAL_LICENSE, "the official PersonaLens data's license"
    for candidate in (folder / "LICENSE", folder.parent / "LICENSE"):
        if candidate.is_file() and (first := candidate.read_text(encoding="utf-8").strip().splitlines()):
            return first[0].strip(), f"the first line of the benchmark's {candidate.name} file"
    manifest = _generation_manifest(folder)
    if manifest is None:
        return None, (f"the benchmark at {folder} states none (no LICENSE file there or in its parent, and "
                      "it is neither the official data nor generated by the kit)")
    backend = manifest.get("backend")
    demographics = (manifest.get("config") or {}).get("demographics_file")
    if backend != "offline" or demographics:
        made = f"from the demographics file {demographics}" if demographics else f"by backend {backend!r}"
        return None, (f"the benchmark at {folder} was generated {made}, so its license is its maker's "
                      "choice, and no LICENSE file states it")
    return _kit_license(), ("the kit's own license: the kit generated the benchmark offline, from its own "
                            "rules and reference tables")


def _generation_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest notebook 01 writes into a benchmark it generated, or None for any other folder."""
    path = folder / GENERATION_MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ExportError(f"{path}: the generation manifest is not valid JSON ({exc})") from None
    return manifest if isinstance(manifest, dict) else None


def _kit_license() -> str:
    """The kit's license as the package declares it, in the lower case Hugging Face's cards use."""
    declared = metadata.metadata("personalens_utils")
    return str(declared.get("License-Expression") or declared.get("License")).lower()


def to_hf_dataset(store: StoreArg, out_dir: PathArg, *, license: str | None = None,
                  benchmark_dir: PathArg | None = None) -> Path:
    """Write the run as a Hugging Face dataset folder: Parquet files of dialogues, judgments and the run
    card, and a README dataset card whose YAML names the configs and the license.

    `store` is a RunStore or its folder. The license is `license`, else the run card's, else the
    benchmark's (`benchmark_license`), and the card says which; a run whose license is not known is
    refused, since a published dataset must carry one.
    """
    store = as_store(store, "to_hf_dataset(store)")
    out = as_path(out_dir, "to_hf_dataset(out_dir)")
    if license is not None and not isinstance(license, str):
        raise ExportArgumentError(f"to_hf_dataset(license=...) takes a license id such as "
                                  f"{OFFICIAL_LICENSE!r}, got {type(license).__name__} {license!r}")
    dialogues = _dialogues(store)
    card = read_run_card(store)
    chosen, origin = _license(store, card, license, benchmark_dir)
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    counts = {}
    for kind in _TABLES:
        rows = [_row(kind, line) for line in _lines(store, kind)]
        counts[kind.table] = len(rows)
        pd.DataFrame.from_records(rows, columns=_COLUMNS[kind.table]).to_parquet(
            data / f"{kind.table}.parquet", index=False)
    card_text = (store.root / RUN_CARD).read_text(encoding="utf-8") if card is not None else ""
    pd.DataFrame({"run_card": [card_text]}).to_parquet(data / "run_card.parquet", index=False)
    (out / "README.md").write_text(_dataset_card(chosen, origin, card, dialogues, counts), encoding="utf-8")
    return out


def _license(store: RunStore, card: dict[str, Any] | None, given: str | None,
             benchmark_dir: PathArg | None) -> tuple[str, str]:
    """The dataset's license and the card's sentence on where it comes from; refused when not known."""
    if given:
        return given, "as given by whoever exported the run (`license=`)"
    if stated := (card or {}).get("license"):
        return str(stated), f"as the run card ({RUN_CARD}) states it"
    if benchmark_dir is None:
        raise ExportError(f"the license of the run {store.root} is not known: pass license= (the official "
                          f"data's is {OFFICIAL_LICENSE!r}) or benchmark_dir= (the benchmark it was made on)")
    inherited, origin = benchmark_license(benchmark_dir)
    if inherited is None:
        raise ExportError(f"the license of the run {store.root} is not known: {origin}; pass license=, or "
                          "write the license as the first line of a LICENSE file in the benchmark folder")
    return inherited, f"inherited from the benchmark the run was made on ({origin})"


_COLUMNS = {
    Dialogue.table: ["id", "scenario_id", "user_id", "task_id", "assistant_model", "assistant_setting",
                  "user_model", "status", "n_turns", "record"],
    Judgment.table: ["id", "dialogue_id", "dimension", "judge_model", "status", "score", "record"],
}


def _lines(store: RunStore, kind: type[Dialogue] | type[Judgment]) -> list[bytes]:
    """Every stored line of a table, in file order, exactly as written (a torn last line is left out)."""
    path = store.path(kind)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    return [line for line in lines[:-1] if line.strip()]


def _row(kind: type[Dialogue] | type[Judgment], line: bytes) -> dict[str, Any]:
    rec = orjson.loads(line)
    row = {name: rec.get(name) for name in _COLUMNS[kind.table] if name not in ("record", "n_turns")}
    if kind is Dialogue:
        row["n_turns"] = len(rec.get("turns") or ())
    row["record"] = line.decode("utf-8")
    return row


def _dataset_card(license: str, origin: str, card: dict[str, Any] | None, dialogues: list[Dialogue],
                  counts: dict[str, int]) -> str:
    configs = "".join(f"- config_name: {name}\n  data_files: data/{name}.parquet\n"
                      for name in (*counts, "run_card"))
    assistants = sorted({d.assistant_model for d in dialogues})
    settings = sorted({d.assistant_setting for d in dialogues})
    summary = ("".join(f"- {key}: {orjson.dumps(card[key]).decode()}\n" for key in sorted(card)) if card
               else "- this run has no run card\n")
    offline = (" Some records come from the kit's offline backend: their numbers are offline, not a model's."
               if any(d.made_offline for d in dialogues) else "")
    return (
        f"---\nlicense: {license}\ntags:\n- personalens\n- personalization\n- llm-evaluation\n"
        f"configs:\n{configs}---\n\n"
        "# PersonaLens run\n\n"
        f"A run of the PersonaLens kit: {counts[Dialogue.table]} dialogues of assistants "
        f"{', '.join(assistants)} in settings {', '.join(settings)}, and {counts[Judgment.table]} "
        f"judgments.{offline}\n\n"
        "## How it was made\n\nUser-agent dialogues with each assistant (notebook 03), judged dimension by "
        "dimension (notebook 04). Each row's `record` column is the run store's JSON line, unchanged: "
        "`personalens_utils.export.formats.import_run` rebuilds the store from it exactly.\n\n"
        f"## License\n\n{license}, {origin}.\n\n"
        f"## Run card\n\n{summary}"
    )


def import_run(source: PathArg | Mapping[str, Any], run_dir: PathArg) -> RunStore:
    """Rebuild a kit store at `run_dir` from a dataset folder written by `to_hf_dataset` (or from a
    `datasets.DatasetDict` holding its `dialogues`, `judgments` and `run_card`). The store's lines are the
    exported ones, byte for byte.

    Someone else's run is untrusted: every record and the run card are checked (`untrusted`) before
    anything is written, and the store is written beside `run_dir` and moved in only when complete, so
    a refused import leaves nothing behind. A `run_dir` that already holds records is refused too.
    """
    target = RunStore(as_path(run_dir, "import_run(run_dir)"))
    held = [kind.table for kind in _TABLES if target.path(kind).exists()]
    if held or (target.root / RUN_CARD).exists():
        raise ExportError(f"cannot import into {target.root}: it already holds {held or [RUN_CARD]}; "
                          "give an empty run_dir")
    label, tables = _read_source(source)
    rows = {}
    for kind in _TABLES:
        place, values = tables.get(kind.table, ("", []))
        rows[kind.table] = untrusted.unique(untrusted.parse_rows(kind, values, place), label)
    dialogues, judgments = rows[Dialogue.table], rows[Judgment.table]
    untrusted.check_links(dialogues, judgments)
    card = _card_text(*tables.get("run_card", ("", [])))
    if card is not None:
        untrusted.check_card(card, tables["run_card"][0], dialogues, judgments)

    def write(folder: Path) -> list[str]:
        names = []
        for kind in _TABLES:
            if rows[kind.table]:
                path = folder / target.path(kind).name
                path.write_bytes("".join(f"{row.line}\n" for row in rows[kind.table]).encode("utf-8"))
                names.append(path.name)
        if card is not None:
            (folder / RUN_CARD).write_text(card, encoding="utf-8")
            names.append(RUN_CARD)
        return names

    untrusted.write_all_or_nothing(target.root, write)
    return RunStore(target.root)


_SOURCE_COLUMNS = {Dialogue.table: "record", Judgment.table: "record", "run_card": "run_card"}
"""The tables an import reads, each with the column holding its lines (the card's: its text)."""


def _read_source(source: PathArg | Mapping[str, Any]) -> tuple[str, dict[str, tuple[str, list[Any]]]]:
    """What names the source in messages, and for each table it holds, where it is and its column's
    values, from a dataset folder or a DatasetDict. Other tables or files are not read."""
    tables: dict[str, tuple[str, list[Any]]] = {}
    if isinstance(source, str | bytes | os.PathLike):
        folder = as_path(source, "import_run(source)")
        if not (folder / "data" / "dialogues.parquet").is_file():
            raise ExportError(f"{folder} is not a PersonaLens dataset folder (no data/dialogues.parquet)")
        label = str(folder)
        for name, column in _SOURCE_COLUMNS.items():
            path = folder / "data" / f"{name}.parquet"
            if path.is_file():
                tables[name] = (str(path), _parquet_column(path, column))
    elif isinstance(source, Mapping):
        label = "the DatasetDict"
        for name, column in _SOURCE_COLUMNS.items():
            if name in source:
                place = f"the DatasetDict's {name!r} table"
                columns = list(getattr(source[name], "column_names", None) or [])
                if column not in columns:
                    raise ExportError(f"{place} has no {column!r} column (it has {columns})")
                tables[name] = (place, list(source[name][column]))
    else:
        raise ExportArgumentError(f"import_run(source) takes a dataset folder (a str or os.PathLike) or a "
                                  f"datasets.DatasetDict, got {type(source).__name__}")
    if Dialogue.table not in tables:
        raise ExportError(f"{label} holds no {Dialogue.table!r} table; it is not a PersonaLens dataset")
    return label, tables


def _parquet_column(path: Path, column: str) -> list[Any]:
    """One column of a Parquet file, by name; a file that is not Parquet, or lacks it, is named."""
    try:
        with pq.ParquetFile(path) as parquet:
            names = parquet.schema_arrow.names
            if column not in names:
                raise ExportError(f"{path}: no {column!r} column (it has {names}); it was not written by "
                                  "to_hf_dataset")
            return parquet.read(columns=[column]).column(column).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ExportError(f"{path}: not a readable Parquet file ({problem})") from None


def _card_text(place: str, values: list[Any]) -> str | None:
    """The run card's text from its table (None when the run has none); more than one is refused."""
    cards = [value for value in values if value not in (None, "")]
    if len(cards) > 1:
        raise ExportError(f"{place}: holds {len(cards)} run cards; a run has one")
    if cards and not isinstance(cards[0], str):
        raise ExportError(f"{place}: the run card is not text but {type(cards[0]).__name__}")
    return cards[0] if cards else None
