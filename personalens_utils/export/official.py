"""Dialogues and judge answers in the official PersonaLens output layout, both ways.

The official code writes one JSON file per dialogue and one text file per judge answer:

    output/dialogue/user<N>/<model><_d><_p><_s>/<task_id>_dialogue.json
    {"user_id": N, "task_id": ..., "task_description": <the user intent>, "user_model": ...,
     "assistant_model": ..., "dialogue": [{"role": "user" | "assistant", "content": ...}, ...]}
    output/evaluation/user<N>/<model folder>/<dimension>/<judge>/<task_id><ext>.txt

where `<model>` is the official short name of the assistant (`claude-3-sonnet-v1`; the registry knows
them), `_d`, `_p`, `_s` mark an assistant that saw demographics, past interactions (our "I") and the
situation, `<dimension>` is task_completion, personalization, naturalness or coherence, and `<ext>` is
`_user` or `_asst` for the last two (whose side was rated), empty otherwise.

Export (`plan_export`, `export_official`) writes the layout so the official `src/evaluate_dialogue.py`
and `util/gather_evaluation.py` run on it unchanged. What they cannot read is found before anything
is written: a setting the official generator has no flags for (vanilla, two of D/I/S), an assistant
without an official short name, a user whose tasks of one type are not all there (the official
evaluator opens every task of each user it is given, and stops at the first missing file). Export
refuses those, or, with `allow_unofficial=True`, writes them under the kit's names and reports them.
Export adds one extra key, `personalens_kit`, holding the record fields the layout has no place for
(status, usage, the kit's model names, ...), so kit dialogues re-import identical; the official
evaluator ignores it.

Import (`import_official` for dialogues, `import_official_run` for dialogues and the judge's answers)
reads files without that key (made by the official code or another tool) with what can be inferred: a
dialogue ending on the assistant ended by TERMINATE, one ending on the user hit the cap; the models
under their registry names, the official short names kept as the model ids; an answer's strict
reading stored as its score, the official reading derived from the stored text (`judging.scoring`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

from personalens_utils.base.errors import KitError
from personalens_utils.base.files import atomic_write_text
from personalens_utils.base.safe_names import inside
from personalens_utils.data import Benchmark
from personalens_utils.data.types import parse_task_id, scenario_id
from personalens_utils.export import untrusted
from personalens_utils.export.arguments import (
    ExportArgumentError,
    PathArg,
    StoreArg,
    as_benchmark,
    as_path,
    as_store,
)
from personalens_utils.judging import DIMENSIONS, judge_model_key
from personalens_utils.judging.answers import Answer, score_fields
from personalens_utils.llm import Message, registry
from personalens_utils.llm.role import Role
from personalens_utils.runstore import run_card
from personalens_utils.runstore.identity import Variant
from personalens_utils.runstore.migration import SCHEMA_FILE
from personalens_utils.runstore.records import OFFICIAL_PROMPTS, Dialogue, Judgment, Record, RecordError
from personalens_utils.runstore.store import RunStore
from personalens_utils.simulation.loop import TERMINATED, TURN_CAP
from personalens_utils.simulation.settings import AssistantSetting

KIT_KEY = "personalens_kit"
OFFICIAL_KEYS = ("user_id", "task_id", "task_description", "user_model", "assistant_model", "dialogue")
IMPORTED_BACKEND = "imported"
OFFICIAL_PROMPT_VERSION = "official"
"""Prompt version given to records imported without a kit block (made by other code, other prompts)."""

Read = TypeVar("Read", Dialogue, Judgment)
"""A record an import reads: a dialogue or a judge's answer."""

_TAGS = (("D", "_d"), ("I", "_p"), ("S", "_s"))
OFFICIAL_SETTINGS = ("base", "base+D", "base+I", "base+S", "base+all")
"""The settings the official generator has flags for (none, -d, -p, -si, or all three)."""
_FOLDER = re.compile(r"^(?P<model>.+?)(?P<vanilla>_vanilla)?(?P<D>_d)?(?P<I>_p)?(?P<S>_s)?$")
_USER_DIR = re.compile(r"^user(0|[1-9][0-9]*)$")
_FILE_SUFFIX = "_dialogue.json"
_OFFICIAL_FIELDS = ("user_id", "task_id", "turns")
"""Record fields the official file holds itself; the kit block carries the others."""
_EVALUATION_FILE = re.compile(r"^(?P<task>.+?)(?P<ext>_user|_asst)?\.txt$")
EVALUATION_DIMENSIONS = {
    ("task_completion", ""): "task_completion",
    ("personalization", ""): "personalization",
    ("naturalness", "_user"): "naturalness_user",
    ("naturalness", "_asst"): "naturalness_assistant",
    ("coherence", "_user"): "coherence_user",
    ("coherence", "_asst"): "coherence_assistant",
}
"""(official dimension folder, file ending) -> the kit's judge dimension."""


class OfficialLayoutError(KitError, ValueError):
    """A file or folder of the official layout that cannot be read; names the path and the problem."""

    def __init__(self, path: str | Path, problem: str):
        self.path = Path(path)
        super().__init__(f"{self.path}: {problem}")


class OfficialExportError(KitError, ValueError):
    """Dialogues the official scripts could not read as asked; nothing was written."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        listed = "\n".join(f"- {p}" for p in self.problems)
        super().__init__(
            f"{len(self.problems)} problem(s) would stop the official scripts; nothing was written:\n"
            f"{listed}\n"
            "Export only what the official code can express, or pass allow_unofficial=True to write it "
            "anyway under the kit's names (the official evaluator will not run on those folders)."
        )


def model_folder(model: str, setting: str | AssistantSetting) -> str:
    """The `<model><_d><_p><_s>` folder name of a model and assistant setting (vanilla: `_vanilla`,
    which the official code never writes)."""
    parsed = AssistantSetting.parse(setting)
    if not model or "/" in model or os.sep in model:
        raise ValueError(f"model name {model!r} cannot be a folder name in the official layout")
    vanilla = "_vanilla" if parsed.instructions == "vanilla" else ""
    return model + vanilla + "".join(tag for part, tag in _TAGS if parsed.sees(part))


def parse_model_folder(name: str) -> tuple[str, AssistantSetting]:
    """Inverse of `model_folder`."""
    match = _FOLDER.match(name)
    if not match:
        raise ValueError(f"{name!r} is not a <model><_d><_p><_s> folder name")
    parts = tuple(part for part, _ in _TAGS if match[part])
    return match["model"], AssistantSetting("vanilla" if match["vanilla"] else "base", parts)


def _short_name(role: Role) -> str | None:
    """A record's role's official short name (`claude-3-sonnet-v1`): the registry's, or, for an imported
    record, the one it was read with; None when the official code has none."""
    imported = registry.official_name(role.model_id) if role.backend == IMPORTED_BACKEND else None
    return registry.official_name(role.model) or imported


def dialogue_root(root: PathArg) -> Path:
    """The `output/dialogue` folder under `root`, or `root` itself if it already is one."""
    base = as_path(root, "root").expanduser()
    nested = base / "output" / "dialogue"
    return nested if nested.is_dir() else base


def evaluation_root(root: PathArg) -> Path:
    """The `output/evaluation` folder beside the dialogues of `root`."""
    return dialogue_root(root).parent / "evaluation"


def _official_folder(record: Dialogue) -> tuple[str, list[str]]:
    """The folder a record goes to, and why the official scripts could not use it (empty: they can)."""
    problems = []
    setting = AssistantSetting.parse(record.assistant_setting)
    if setting.name not in OFFICIAL_SETTINGS:
        problems.append(f"setting {setting.name!r}: the official generator has flags only for "
                        f"{', '.join(OFFICIAL_SETTINGS)} (none, -d, -p, -si, or all three)")
    short = _short_name(record.assistant_role)
    if short is None:
        problems.append(f"assistant {record.assistant_model!r} has no official short name "
                        "(llm/registry.py lists the models the official code names)")
    return model_folder(short or record.assistant_model, setting), problems


def dialogue_path(root: PathArg, record: Dialogue) -> Path:
    """Where a dialogue record goes under `<root>/output/dialogue/`."""
    return _dialogue_file(as_path(root, "dialogue_path(root)"), record, _official_folder(record)[0])


def _dialogue_file(base: Path, record: Dialogue, folder: str) -> Path:
    """`<base>/output/dialogue/user<N>/<folder>/<task_id>_dialogue.json`, each name made from the record
    through `safe_names.inside`: an imported record's task id or model cannot name a path outside."""
    return inside(base / "output" / "dialogue", f"user{record.user_id}", folder, record.task_id,
                  suffix=_FILE_SUFFIX)


DialogueSource = StoreArg | Iterable[Dialogue | Mapping[str, Any]]


def _records(source: DialogueSource) -> list[Dialogue]:
    """Dialogue records from a run store or its folder, or records (typed, or rows in the stored layout)."""
    if isinstance(source, RunStore | str | os.PathLike):
        return as_store(source, "source").read(Dialogue)
    if not isinstance(source, Iterable) or isinstance(source, bytes | Mapping):
        raise ExportArgumentError(f"source takes a RunStore, its folder (a str or os.PathLike) or dialogue "
                                  f"records, got {type(source).__name__}")
    records = []
    for n, row in enumerate(source, 1):
        if not isinstance(row, Dialogue | Mapping):
            raise ExportArgumentError(f"source item {n} is a {type(row).__name__}, not a Dialogue record or "
                                      "a row in the stored layout")
        records.append(row if isinstance(row, Dialogue) else Dialogue.from_json(row, f"dialogue row {n}"))
    return records


@dataclass
class ExportPlan:
    """What an export would write, what the official scripts could not read, and how to run them."""

    root: Path
    files: dict[Path, Dialogue]
    problems: list[str]
    runs: list[tuple[str, str, int, int]] = field(default_factory=list)
    """(model folder, task type, first user, last user): the official evaluator's `-m`, `-md`, `-s`, `-e`."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def commands(self, dimension: str = "personalization") -> list[str]:
        """The official evaluator's command lines for one dimension, run from the official code folder
        with the benchmark linked as `data/` (add `-a` to naturalness and coherence for the assistant)."""
        return [f"python -m src.evaluate_dialogue -s {first} -e {last} -m {folder} -d {dimension}"
                + (" -md" if task_type == "MD" else "")
                for folder, task_type, first, last in self.runs]

    def describe(self) -> str:
        """A few lines for a notebook: what is written, and every problem."""
        head = f"{len(self.files)} dialogues to {self.root / 'output' / 'dialogue'}"
        if self.ok:
            return head + "; the official evaluator can run on every folder:\n" + "\n".join(self.commands())
        return head + "; the official scripts cannot read them as they are:\n" + "\n".join(
            f"- {p}" for p in self.problems)


def _expected_tasks(benchmark: Benchmark) -> dict[tuple[int, str], set[str]]:
    """(user, task type) -> the task ids the official evaluator will open for that user."""
    tasks: dict[tuple[int, str], set[str]] = {}
    for sid in benchmark.scenarios["scenario_id"]:
        user, task = sid.split("/", 1)
        tasks.setdefault((int(user.removeprefix("user")), parse_task_id(task)[0]), set()).add(task)
    return tasks


def _runs(users: Iterable[int]) -> list[tuple[int, int]]:
    """Consecutive users as (first, last): the official scripts take a range and open every user in it."""
    out: list[tuple[int, int]] = []
    for user in sorted(set(users)):
        if out and user == out[-1][1] + 1:
            out[-1] = (out[-1][0], user)
        else:
            out.append((user, user))
    return out


def _sample(names: Iterable[str], n: int = 3) -> str:
    names = sorted(names)
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def plan_export(
    source: DialogueSource,
    root: PathArg,
    *,
    benchmark: Benchmark | None = None,
    include_errors: bool = False,
) -> ExportPlan:
    """Where each dialogue would be written, and everything the official scripts could not read.

    Two records that would land in the same file (same user, task, model and setting, different user
    model, prompts or backend) raise at once: no option writes both.
    """
    base = as_path(root, "plan_export(root)")
    benchmark = as_benchmark(benchmark)
    chosen = [r for r in _records(source) if include_errors or not r.is_error]
    files: dict[Path, Dialogue] = {}
    problems: dict[str, None] = {}
    groups: dict[tuple[str, str], dict[int, set[str]]] = {}
    for record in chosen:
        folder, found = _official_folder(record)
        problems.update(dict.fromkeys(f"{folder}: {p}" for p in found))
        path = _dialogue_file(base, record, folder)
        if path.parent.name != folder or path.name != f"{record.task_id}{_FILE_SUFFIX}":
            problems[f"{folder}: dialogue {record.id} of task {record.task_id!r} is written as "
                     f"{path.relative_to(base)}, since its model or task id cannot be a file name as it "
                     "is; the official scripts will not find it"] = None
        if path in files:
            raise ValueError(
                f"dialogues {files[path].id} and {record.id} would both be written to {path}; "
                "export them to different roots (e.g. one per user model or prompt version)"
            )
        files[path] = record
        users = groups.setdefault((folder, record.task_type), {})
        users.setdefault(record.user_id, set()).add(record.task_id)
    if benchmark is None and chosen:
        problems["no benchmark given: cannot check that each user's tasks are all there"] = None
    expected = _expected_tasks(benchmark) if benchmark is not None else {}
    runs = []
    for (folder, task_type), users in sorted(groups.items()):
        for user, tasks in sorted(users.items()):
            if benchmark is None:
                continue
            wanted = expected.get((user, task_type), set())
            if tasks - wanted:
                problems[f"{folder}: user {user} has {task_type} dialogues for tasks the benchmark does not "
                         f"give that user ({_sample(tasks - wanted)})"] = None
            if wanted - tasks:
                problems[f"{folder}: user {user} lacks {len(wanted - tasks)} of its {len(wanted)} "
                         f"{task_type} tasks ({_sample(wanted - tasks)}); the official evaluator opens every "
                         "task of the user and stops at the first missing file"] = None
        runs.extend((folder, task_type, first, last) for first, last in _runs(users))
    return ExportPlan(base, files, list(problems), runs)


def _payload(record: Dialogue, intent: str) -> dict[str, Any]:
    stored = record.to_json()
    user = _short_name(record.user_role) or record.user_model
    assistant = _short_name(record.assistant_role)
    return {
        "user_id": record.user_id,
        "task_id": record.task_id,
        "task_description": intent,
        "user_model": user,
        "assistant_model": assistant or record.assistant_model,
        "dialogue": stored["turns"],
        KIT_KEY: {k: v for k, v in stored.items() if k not in _OFFICIAL_FIELDS},
    }


def export_official(
    source: DialogueSource,
    root: PathArg,
    *,
    benchmark: Benchmark | None = None,
    include_errors: bool = False,
    allow_unofficial: bool = False,
) -> list[Path]:
    """Write dialogue records (a run store, its folder, records or rows) under `<root>/output/dialogue/`.

    Everything the official scripts could not read (`plan_export`) raises `OfficialExportError`,
    listing each problem, before anything is written; `allow_unofficial=True` writes it anyway under
    the kit's names (see `plan_export(...).problems` for what it reported). The official files carry
    the user intent as `task_description`, taken from `benchmark`. Dialogues that ended in an error
    are left out unless `include_errors`.
    """
    plan = plan_export(source, root, benchmark=benchmark, include_errors=include_errors)
    if plan.problems and not allow_unofficial:
        raise OfficialExportError(plan.problems)
    intents = {} if benchmark is None else dict(
        zip(benchmark.scenarios["scenario_id"], benchmark.scenarios["user_intent"], strict=True))
    written = []
    for path, record in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = _payload(record, intents.get(record.scenario_id, ""))
        atomic_write_text(path, json.dumps(payload, indent=4, ensure_ascii=False) + "\n")
        written.append(path)
    return written


def _check_turns(path: Path, turns: Any) -> tuple[Message, ...]:
    if not isinstance(turns, list) or not turns:
        raise OfficialLayoutError(path, "'dialogue' must be a non-empty list of messages")
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict) or set(turn) != {"role", "content"}:
            raise OfficialLayoutError(path, f"dialogue[{index}] must be an object with 'role' and 'content'")
        expected = "user" if index % 2 == 0 else "assistant"
        if turn["role"] != expected:
            raise OfficialLayoutError(path, f"dialogue[{index}] has role {turn['role']!r}, expected "
                                            f"{expected!r} (messages alternate, the user first)")
        if not isinstance(turn["content"], str):
            raise OfficialLayoutError(path, f"dialogue[{index}].content must be a string")
    return tuple(Message(t["role"], t["content"]) for t in turns)


def _kit_name(name: str) -> str:
    """A model named in an official file under the registry's name (the short name if unknown)."""
    info = registry.lookup(name) if name else None
    return info.name if info is not None else name


def read_dialogue_file(
    path: PathArg,
    *,
    benchmark: Benchmark | None = None,
    prompt_version: str = OFFICIAL_PROMPT_VERSION,
    user_model: str | None = None,
) -> Dialogue:
    """One official-layout file as a run-store dialogue record.

    For files without a kit block, the domains of a multi-domain task come from `benchmark` (empty
    without it); single-domain task ids carry their domain. The official generator writes the
    assistant's name as `user_model`; `user_model` names the model that really played the user (its
    default there is claude-3-sonnet-v1), else the file's value is kept.
    """
    path = as_path(path, "read_dialogue_file(path)")
    benchmark = as_benchmark(benchmark)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OfficialLayoutError(path, f"not a readable JSON file ({exc})") from exc
    if not isinstance(data, dict):
        raise OfficialLayoutError(path, "expected a JSON object")
    missing = [k for k in ("task_id", "dialogue") if k not in data]
    if missing:
        raise OfficialLayoutError(path, f"missing key(s) {missing}")
    folder_user = _USER_DIR.match(path.parent.parent.name)
    if not folder_user:
        raise OfficialLayoutError(path, "expected to sit in output/dialogue/user<N>/<model folder>/")
    user_id = int(folder_user[1])
    if data.get("user_id", user_id) != user_id:
        raise OfficialLayoutError(path, f"user_id {data['user_id']!r} does not match folder user{user_id}")
    task_id = data["task_id"]
    if path.name != f"{task_id}{_FILE_SUFFIX}":
        raise OfficialLayoutError(path, f"task_id {task_id!r} does not match the file name")
    try:
        task_type, sd_domain, _ = parse_task_id(task_id)
        folder_model, setting = parse_model_folder(path.parent.name)
    except ValueError as exc:
        raise OfficialLayoutError(path, str(exc)) from exc
    turns = _check_turns(path, data["dialogue"])
    kit = data.get(KIT_KEY)
    if kit is not None:
        if not isinstance(kit, dict):
            raise OfficialLayoutError(path, f"'{KIT_KEY}' must be an object")
        record = {"user_model": data.get("user_model"), "assistant_model": data.get("assistant_model"), **kit,
                  "user_id": user_id, "task_id": task_id, "turns": [t.as_dict() for t in turns]}
        try:
            return Dialogue.from_json(record, str(path))
        except RecordError as exc:
            problem = f"the '{KIT_KEY}' block does not make a dialogue record: {exc}"
            raise OfficialLayoutError(path, problem) from exc
    assistant = data.get("assistant_model") or folder_model
    user = user_model or data.get("user_model") or ""
    known = benchmark.tasks.get(task_id) if benchmark is not None else None
    task_domains = [sd_domain] if sd_domain else list(known.domains if known else [])
    return Dialogue(
        scenario_id=scenario_id(user_id, task_id),
        user_id=user_id,
        task_id=task_id,
        task_type=task_type,
        domains=tuple(task_domains),
        user_model=_kit_name(user),
        assistant_model=_kit_name(assistant),
        assistant_setting=setting.name,
        variant=Variant(prompt_version, OFFICIAL_PROMPTS),
        backend=IMPORTED_BACKEND,
        user_model_id=user,
        assistant_model_id=assistant,
        status=TERMINATED if turns[-1].role == "assistant" else TURN_CAP,
        turns=turns,
    )


def iter_dialogue_files(root: PathArg) -> Iterator[Path]:
    """Every `<task_id>_dialogue.json` under the layout, in a stable order."""
    base = dialogue_root(root)
    if not base.is_dir():
        raise OfficialLayoutError(base, "no such folder")
    for user_dir in sorted(p for p in base.iterdir() if p.is_dir() and _USER_DIR.match(p.name)):
        for model_dir in sorted(p for p in user_dir.iterdir() if p.is_dir()):
            yield from sorted(model_dir.glob(f"*{_FILE_SUFFIX}"))


def _checked(read: Iterable[tuple[Path, Read]], root: PathArg) -> list[Read]:
    """Records read from the layout, each with its file, checked as any imported run is (`untrusted`):
    names printable and short, one record per id (exact copies kept once)."""
    rows = untrusted.record_rows((str(path), record) for path, record in read)
    return [row.record for row in untrusted.unique(rows, str(root))]


def _add(store: RunStore, records: Sequence[Record],
         note: Callable[[RunStore], object] | None = None) -> None:
    """Add records to a store: ones it holds unchanged are skipped; a different record under a stored
    id raises before anything is written. `note` notes them on the run card.

    All or nothing: the store's tables and card are copied beside it, the records (and the note) written
    there, and the files changed moved in only when all are written (`untrusted.write_all_or_nothing`),
    holding the tables' locks meanwhile so no other writer's lines are lost.
    """
    fresh: list[Record] = []
    for kind in dict.fromkeys(type(r) for r in records):
        stored = {r.id: r for r in store.read(kind)}
        for record in (r for r in records if type(r) is kind):
            old = stored.get(record.id)
            if old is None or old.is_error:
                fresh.append(record)
            elif old != record:
                raise ValueError(f"run store {store.root} already holds a different {kind.__name__.lower()} "
                                 f"{record.id}; import into another run folder")
    if not fresh and note is None:
        return
    if type(store) is not RunStore:
        raise ExportArgumentError(f"an import is written into a run folder or a plain RunStore, not a "
                                  f"{type(store).__name__} (its writes go elsewhere); give the folder")
    changed = [*(store.path(kind).name for kind in dict.fromkeys(type(r) for r in fresh)), SCHEMA_FILE,
               *([run_card.CARD_FILE] if note is not None else [])]

    def write(folder: Path) -> list[str]:
        held = [*store.root.glob("*.jsonl"), store.root / run_card.CARD_FILE, store.root / SCHEMA_FILE]
        for path in (p for p in held if p.is_file()):
            shutil.copyfile(path, folder / path.name)  # every table: the card counts them all
        staged = RunStore(folder)
        staged.extend(fresh)
        if note is not None:
            note(staged)
        return [name for name in changed if (folder / name).is_file()]

    with contextlib.ExitStack() as locks:
        for kind in dict.fromkeys(type(r) for r in fresh):
            if store.path(kind).exists():
                locks.enter_context(FileLock(f"{store.path(kind)}.lock"))
        untrusted.write_all_or_nothing(store.root, write)


def import_official(
    root: PathArg,
    *,
    into: StoreArg | None = None,
    benchmark: Benchmark | None = None,
    prompt_version: str = OFFICIAL_PROMPT_VERSION,
    user_model: str | None = None,
) -> list[Dialogue]:
    """Read every dialogue under `root` (a folder holding output/dialogue/, or that folder itself).

    The files are someone else's: their records are checked as any imported run's (`untrusted`). With
    `into`, the records are also added to that run store, all or nothing; ones it already holds
    unchanged are skipped, and a different record under an existing id raises before anything is written.
    """
    store = None if into is None else as_store(into, "import_official(into)")
    options = {"benchmark": benchmark, "prompt_version": prompt_version, "user_model": user_model}
    records = _checked(((p, read_dialogue_file(p, **options)) for p in iter_dialogue_files(root)), root)
    if store is not None:
        _add(store, records)
    return records


def evaluation_of(path: PathArg) -> tuple[str, str]:
    """(task id, kit dimension) of an official judge answer file, from its name and folders."""
    path = as_path(path, "evaluation_of(path)")
    match = _EVALUATION_FILE.match(path.name)
    dimension = EVALUATION_DIMENSIONS.get((path.parent.parent.name, (match["ext"] or "") if match else ""))
    if match is None or dimension is None:
        known = ", ".join(f"{f}/<judge>/<task_id>{e}.txt" for f, e in EVALUATION_DIMENSIONS)
        raise OfficialLayoutError(path, f"not an official evaluation file (expected one of {known})")
    return match["task"], dimension


def read_evaluation_file(path: PathArg, dialogue: Dialogue, *,
                         prompt_version: str = OFFICIAL_PROMPT_VERSION) -> Judgment:
    """One official judge answer (`.../<dimension>/<judge>/<task_id><ext>.txt`) as a judgment record of
    `dialogue`: the judge's folder name kept as its model id, the answer verbatim as `raw`, the strict
    reading as its score (the official reading is derived from `raw`: `judging.scoring`)."""
    path = as_path(path, "read_evaluation_file(path)")
    if not isinstance(dialogue, Dialogue):
        raise ExportArgumentError(f"read_evaluation_file(dialogue) takes the Dialogue record the answer is "
                                  f"about, got {type(dialogue).__name__}")
    task_id, dimension = evaluation_of(path)
    judge = path.parent.name
    if task_id != dialogue.task_id:
        raise OfficialLayoutError(path, f"is not an answer about {dialogue.task_id}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OfficialLayoutError(path, f"not a readable text file ({exc})") from exc
    dim = DIMENSIONS[dimension]
    fields = score_fields(dim, [Answer(dim.parse(text), text, 1)])
    return Judgment(
        dialogue_id=dialogue.id, dimension=dimension, judge_model=judge_model_key(judge),
        variant=Variant(prompt_version, OFFICIAL_PROMPTS), backend=IMPORTED_BACKEND,
        judge_model_id=judge, status=fields["status"], score=fields["score"],
        explanation=fields["explanation"], raw=fields["raw"], attempts=fields["attempts"],
    )


@dataclass
class OfficialRun:
    """An official output folder read as records: its dialogues and its judge answers."""

    dialogues: list[Dialogue]
    judgments: list[Judgment]


def iter_evaluation_files(root: PathArg) -> Iterator[tuple[Path, int, str]]:
    """(file, user, model folder) for every judge answer under `output/evaluation`, in a stable order."""
    base = evaluation_root(root)
    if not base.is_dir():
        return
    for user_dir in sorted(p for p in base.iterdir() if p.is_dir() and _USER_DIR.match(p.name)):
        for model_dir in sorted(p for p in user_dir.iterdir() if p.is_dir()):
            for path in sorted(model_dir.glob("*/*/*.txt")):
                yield path, int(user_dir.name.removeprefix("user")), model_dir.name


def import_official_run(
    root: PathArg,
    *,
    into: StoreArg | None = None,
    benchmark: Benchmark | None = None,
    prompt_version: str = OFFICIAL_PROMPT_VERSION,
    user_model: str | None = None,
) -> OfficialRun:
    """Read the dialogues under `root/output/dialogue` and the judge answers under `root/output/evaluation`.

    Every answer must sit beside its dialogue (same user, model folder and task), else the error names
    the file. With `into`, both are added to that run store as `import_official` adds dialogues.
    """
    store = None if into is None else as_store(into, "import_official_run(into)")
    options = {"benchmark": benchmark, "prompt_version": prompt_version, "user_model": user_model}
    read = [(path, read_dialogue_file(path, **options)) for path in iter_dialogue_files(root)]
    dialogues = _checked(read, root)
    by_place = {(d.user_id, path.parent.name, d.task_id): d for path, d in read}
    answers = []
    for path, user, folder in iter_evaluation_files(root):
        dialogue = by_place.get((user, folder, evaluation_of(path)[0]))
        if dialogue is None:
            raise OfficialLayoutError(path, f"no dialogue file for this answer under "
                                            f"{dialogue_root(root) / f'user{user}' / folder}")
        answers.append((path, read_evaluation_file(path, dialogue, prompt_version=prompt_version)))
    judgments = _checked(answers, root)
    if store is not None:
        _add(store, [*dialogues, *judgments],
             lambda staged: run_card.note_records(
                 staged, "official_import", {"source": str(Path(root).resolve())},
                 prompt_version=prompt_version, assistants=[d.assistant_model for d in dialogues],
                 judges=[j.judge_model for j in judgments]))
    return OfficialRun(dialogues, judgments)
