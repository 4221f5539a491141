"""Helpers for tests that write run-store records by hand (records in the stored layout, raw lines) and
read what a run stored, line by line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from personalens_utils.llm.role import resolved_model
from personalens_utils.runstore.records import Dialogue, Record
from personalens_utils.runstore.store import RunStore

DIALOGUE_DEFAULTS: dict[str, Any] = {
    "scenario_id": "user1/SD-Alarm-task-1", "user_id": 1, "task_id": "SD-Alarm-task-1", "task_type": "SD",
    "domains": ["Alarm"], "user_model": "user-sim", "assistant_model": "assistant",
    "assistant_setting": "base", "prompt_version": "v1", "backend": "offline", "status": "terminated",
    "error": None, "turns": [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}],
    "n_turns": 1, "usage": {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
                             "cache_write_tokens": 0},
    "cost_usd": 0.0, "retries": 0,
}


def dialogue_json(record_id: str, **fields: Any) -> dict[str, Any]:
    """A dialogue in the stored layout with an id given by hand; other fields default to a short dialogue
    whose user agent and assistant ran on its `backend` (the run-identity fields follow it unless given)."""
    row = {"id": record_id, **DIALOGUE_DEFAULTS, **fields}
    backend = row["backend"]
    identity = {"user_backend": backend, "user_model_id": resolved_model(row["user_model"], backend),
                "assistant_backend": backend,
                "assistant_model_id": resolved_model(row["assistant_model"], backend)}
    return {**row, **{key: row.get(key, value) for key, value in identity.items()}}


def dialogue(record_id: str, status: str = "terminated", **fields: Any) -> Dialogue:
    return Dialogue.from_json(dialogue_json(record_id, status=status, **fields))


def put(store: RunStore, kind: type[Record], rows: Iterable[Mapping[str, Any]]) -> None:
    """Store records given in the stored JSON layout (as a test builds them) through the typed store."""
    store.extend([kind.from_json(row) for row in rows])


def write_lines(store: RunStore, kind: type[Record], rows: Iterable[Any]) -> None:
    """Append JSON lines as they are, bypassing every check: a store edited by hand or by other code."""
    store.path(kind).parent.mkdir(parents=True, exist_ok=True)
    with store.path(kind).open("ab") as fh:
        fh.write(b"".join(orjson.dumps(row) + b"\n" for row in rows))


def stored_lines(path: Path) -> list[dict]:
    """The complete lines of a store's JSONL file (a torn last line left out); none if it is absent."""
    if not path.exists():
        return []
    lines = path.read_bytes().splitlines(keepends=True)
    return [orjson.loads(line) for line in lines if line.endswith(b"\n")]


def dialogue_lines(store: RunStore) -> dict[str, bytes]:
    """Each stored dialogue's line, by id."""
    out = {}
    for line in store.path(Dialogue).read_bytes().splitlines():
        if line.strip():
            out[orjson.loads(line)["id"]] = line
    return out
