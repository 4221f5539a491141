"""Dialogues in the official PersonaLens output layout, both ways.

The official code writes one JSON file per dialogue:

    output/dialogue/user<N>/<model><_d><_p><_s>/<task_id>_dialogue.json
    {"user_id": N, "task_id": ..., "task_description": <the user intent>, "user_model": ...,
     "assistant_model": ..., "dialogue": [{"role": "user" | "assistant", "content": ...}, ...]}

where `_d`, `_p`, `_s` mark an assistant that saw demographics, past interactions (our "I") and the
situation. The kit's vanilla setting, which that layout has no tag for, is written `<model>_vanilla`.
Export adds one extra key, `personalens_kit`, holding the record fields the layout has no place
for (status, usage, ...), so kit dialogues re-import identical; the official evaluator ignores it.
Files without that key (made by the official code or another tool) import with what can be
inferred: a dialogue ending on the assistant ended by TERMINATE, one ending on the user hit the cap.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from personalens_utils.data import Benchmark
from personalens_utils.data.types import parse_task_id, scenario_id
from personalens_utils.llm import Message
from personalens_utils.records import Dialogue, RecordError
from personalens_utils.simulation.loop import TERMINATED, TURN_CAP
from personalens_utils.simulation.settings import AssistantSetting
from personalens_utils.store import RunStore

KIT_KEY = "personalens_kit"
OFFICIAL_KEYS = ("user_id", "task_id", "task_description", "user_model", "assistant_model", "dialogue")
IMPORTED_BACKEND = "imported"
OFFICIAL_PROMPT_VERSION = "official"
"""Prompt version given to dialogues imported without a kit block (made by other code, other prompts)."""

_TAGS = (("D", "_d"), ("I", "_p"), ("S", "_s"))
_FOLDER = re.compile(r"^(?P<model>.+?)(?P<vanilla>_vanilla)?(?P<D>_d)?(?P<I>_p)?(?P<S>_s)?$")
_USER_DIR = re.compile(r"^user(0|[1-9][0-9]*)$")
_FILE_SUFFIX = "_dialogue.json"
_OFFICIAL_FIELDS = ("user_id", "task_id", "user_model", "assistant_model", "turns")
"""Record fields the official file holds itself; the kit block carries the others."""


class OfficialLayoutError(ValueError):
    """A file or folder of the official layout that cannot be read; names the path and the problem."""

    def __init__(self, path: str | Path, problem: str):
        self.path = Path(path)
        super().__init__(f"{self.path}: {problem}")


def model_folder(model: str, setting: str | AssistantSetting) -> str:
    """The `<model><_d><_p><_s>` folder name of a model and assistant setting."""
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


def dialogue_root(root: str | os.PathLike[str]) -> Path:
    """The `output/dialogue` folder under `root`, or `root` itself if it already is one."""
    base = Path(root).expanduser()
    nested = base / "output" / "dialogue"
    return nested if nested.is_dir() else base


def dialogue_path(root: str | os.PathLike[str], record: Dialogue) -> Path:
    """Where a dialogue record goes under `<root>/output/dialogue/`."""
    folder = model_folder(record.assistant_model, record.assistant_setting)
    return (Path(root) / "output" / "dialogue" / f"user{record.user_id}" / folder
            / f"{record.task_id}{_FILE_SUFFIX}")


DialogueSource = RunStore | Iterable[Dialogue | Mapping[str, Any]] | str | os.PathLike[str]


def _records(source: DialogueSource) -> list[Dialogue]:
    """Dialogue records from a run store or its folder, or records (typed, or rows in the stored layout)."""
    if isinstance(source, str | os.PathLike):
        source = RunStore(source)
    if isinstance(source, RunStore):
        return source.read(Dialogue)
    return [r if isinstance(r, Dialogue) else Dialogue.from_json(r, "a dialogue row to export")
            for r in source]


def export_official(
    source: DialogueSource,
    root: str | os.PathLike[str],
    *,
    benchmark: Benchmark | None = None,
    include_errors: bool = False,
) -> list[Path]:
    """Write dialogue records (a run store, its folder, records or rows) under `<root>/output/dialogue/`.

    The official files carry the user intent as `task_description`; the kit's records do not, so it
    is taken from `benchmark` when given and left empty otherwise. Dialogues that ended
    in an error are left out unless `include_errors`. Two records that would land in the same file
    (same user, task, model and setting, different user model or prompt version) raise, before
    anything is written.
    """
    chosen = [r for r in _records(source) if include_errors or not r.is_error]
    intents = {} if benchmark is None else dict(
        zip(benchmark.scenarios["scenario_id"], benchmark.scenarios["user_intent"], strict=True))
    targets: dict[Path, Dialogue] = {}
    for record in chosen:
        path = dialogue_path(root, record)
        if path in targets:
            raise ValueError(
                f"dialogues {targets[path].id} and {record.id} would both be written to {path}; "
                "export them to different roots (e.g. one per user model or prompt version)"
            )
        targets[path] = record
    written = []
    for path, record in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        stored = record.to_json()
        payload = {
            "user_id": record.user_id,
            "task_id": record.task_id,
            "task_description": intents.get(record.scenario_id, ""),
            "user_model": record.user_model,
            "assistant_model": record.assistant_model,
            "dialogue": stored["turns"],
            KIT_KEY: {k: v for k, v in stored.items() if k not in _OFFICIAL_FIELDS},
        }
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(payload, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
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


def read_dialogue_file(path: str | os.PathLike[str], *, benchmark: Benchmark | None = None,
                       prompt_version: str = OFFICIAL_PROMPT_VERSION) -> Dialogue:
    """One official-layout file as a run-store dialogue record.

    For files without a kit block, the domains of a multi-domain task come from `benchmark` (empty
    without it); single-domain task ids carry their domain.
    """
    path = Path(path)
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
        record = {**kit, "user_id": user_id, "task_id": task_id, "user_model": data.get("user_model"),
                  "assistant_model": data.get("assistant_model"), "turns": [t.as_dict() for t in turns]}
        try:
            return Dialogue.from_json(record, str(path))
        except RecordError as exc:
            problem = f"the '{KIT_KEY}' block does not make a dialogue record: {exc}"
            raise OfficialLayoutError(path, problem) from exc
    assistant_model = data.get("assistant_model") or folder_model
    user_model = data.get("user_model") or ""
    sid = scenario_id(user_id, task_id)
    known = benchmark.tasks.get(task_id) if benchmark is not None else None
    task_domains = [sd_domain] if sd_domain else list(known.domains if known else [])
    return Dialogue(
        scenario_id=sid,
        user_id=user_id,
        task_id=task_id,
        task_type=task_type,
        domains=tuple(task_domains),
        user_model=user_model,
        assistant_model=assistant_model,
        assistant_setting=setting.name,
        prompt_version=prompt_version,
        backend=IMPORTED_BACKEND,
        status=TERMINATED if turns[-1].role == "assistant" else TURN_CAP,
        turns=turns,
    )


def iter_dialogue_files(root: str | os.PathLike[str]) -> Iterator[Path]:
    """Every `<task_id>_dialogue.json` under the layout, in a stable order."""
    base = dialogue_root(root)
    if not base.is_dir():
        raise OfficialLayoutError(base, "no such folder")
    for user_dir in sorted(p for p in base.iterdir() if p.is_dir() and _USER_DIR.match(p.name)):
        for model_dir in sorted(p for p in user_dir.iterdir() if p.is_dir()):
            yield from sorted(model_dir.glob(f"*{_FILE_SUFFIX}"))


def import_official(
    root: str | os.PathLike[str],
    *,
    into: RunStore | str | os.PathLike[str] | None = None,
    benchmark: Benchmark | None = None,
    prompt_version: str = OFFICIAL_PROMPT_VERSION,
) -> list[Dialogue]:
    """Read every dialogue under `root` (a folder holding output/dialogue/, or that folder itself).

    With `into`, the records are also added to that run store; ones it already holds unchanged are
    skipped, and a different record under an existing id raises before anything is written.
    """
    records = [read_dialogue_file(p, benchmark=benchmark, prompt_version=prompt_version)
               for p in iter_dialogue_files(root)]
    if into is not None:
        store = into if isinstance(into, RunStore) else RunStore(into)
        stored = {r.id: r for r in store.read(Dialogue)}
        fresh = []
        for record in records:
            old = stored.get(record.id)
            if old is None or old.is_error:
                fresh.append(record)
            elif old != record:
                raise ValueError(f"run store {store.root} already holds a different dialogue {record.id} "
                                 f"({record.scenario_id}); import into another run folder")
        store.extend(fresh)
    return records
