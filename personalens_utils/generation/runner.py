"""Generate a whole benchmark (paper §2.1-2.2) and write it in the official layout.

Three concurrent phases, each through the stage engine: (1) task definitions and interest masks
(multi-domain tasks chunk by chunk after it), (2) preferences of every kept domain, (3)
past-interaction summaries and one situation per user x eligible task. Every step result is
stored in a run store (see `steps`), so a rerun only does what is missing or failed. Users with
a failed profile step and scenarios with a failed situation are left out of the written benchmark
and listed in `GenerationResult.failures`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from personalens_utils.base import paths
from personalens_utils.base.stored import BackendName
from personalens_utils.data import (
    Benchmark,
    TaskDefinition,
    User,
    load_benchmark,
    md_task_id,
    save_benchmark,
    sd_task_id,
)
from personalens_utils.data.demographics import read_demographics, sample_demographics
from personalens_utils.generation import requests as calls
from personalens_utils.generation.parsing import MD_DOMAIN_RANGE
from personalens_utils.generation.steps import STAGE, StepRunner, StepSpec
from personalens_utils.llm import LLMClient
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.prompt_templates.generation import GENERATION_PROMPT_VERSION
from personalens_utils.reference.schema import Schema, load_schema
from personalens_utils.reference.situation import SITUATION_FIELDS
from personalens_utils.runstore.records import stable_id
from personalens_utils.runstore.store import RunStore

MANIFEST = "generation.json"
_USER_ID = re.compile(r"^user(0|[1-9][0-9]*)$")


@dataclass(frozen=True)
class GenerationConfig:
    """What to generate. `n_users=None` takes every row of `demographics_file`."""

    n_users: int | None = 20
    seed: int = 0
    demographics_file: str | None = None
    sd_tasks_per_domain: int = 4
    md_tasks: int = 25
    domains: tuple[str, ...] | None = None
    model: str = "claude-3-sonnet"
    temperature: float = 1.0
    max_attempts: int = 3

    def validate(self, schema: Schema) -> None:
        if self.n_users is not None and self.n_users < 1:
            raise ValueError(f"n_users must be at least 1, got {self.n_users}")
        if self.sd_tasks_per_domain < 0 or self.md_tasks < 0:
            raise ValueError("sd_tasks_per_domain and md_tasks must be 0 or more")
        for name in self.domains or ():
            schema.domain(name)
        if self.md_tasks and len(self.domains or schema.domain_names) < MD_DOMAIN_RANGE[0]:
            raise ValueError(f"multi-domain tasks need at least {MD_DOMAIN_RANGE[0]} domains; "
                             f"set md_tasks=0 or choose more domains")


@dataclass
class GenerationResult:
    benchmark: Benchmark
    output_dir: Path
    run_dir: Path
    backend: BackendName
    steps: pd.DataFrame
    """Per step: results reused from the run store, newly generated, and failed."""
    failures: pd.DataFrame
    """One row per failed step: step, user, domain or task, the reasons and the last raw answer."""
    usage: pd.DataFrame = field(repr=False)

    @property
    def label(self) -> str:
        """What the data is: offline-backend text is labelled as such wherever it is shown."""
        return OFFLINE_LABEL if self.backend == "offline" else f"generated with backend {self.backend!r}"


def load_users(config: GenerationConfig) -> list[dict[str, str]]:
    """Demographic records with a `user_id` ("user<N>"): sampled from Tables 6-7, or read from a file
    (kept ids when the file names every user as user<N> without repeats, else numbered in order)."""
    if config.demographics_file is None:
        if config.n_users is None:
            raise ValueError("n_users=None means 'every row of demographics_file', but no file was given")
        records = sample_demographics(config.n_users, seed=config.seed)
    else:
        records = read_demographics(config.demographics_file)
        if config.n_users is not None:
            if config.n_users > len(records):
                raise ValueError(f"{config.demographics_file}: asked for {config.n_users} users, "
                                 f"the file has {len(records)}")
            records = records[: config.n_users]
    ids = [r.get("user_id", "") for r in records]
    keep = all(_USER_ID.match(i) for i in ids) and len(set(ids)) == len(ids)
    return [{**r, "user_id": r["user_id"] if keep else f"user{i}"} for i, r in enumerate(records)]


def _user_key(demographics: Mapping[str, str]) -> str:
    return stable_id(orjson.dumps(dict(demographics), option=orjson.OPT_SORT_KEYS).decode())


def _task_key(task: Mapping[str, Any]) -> str:
    return stable_id(task["task_id"], task["task_description"], task["relevant_domains"])


class _Generation:
    """The state of one run: users, their results so far, and the task definitions."""

    def __init__(self, config: GenerationConfig, users: list[dict[str, str]], client: LLMClient,
                 store: RunStore, schema: Schema):
        self.config = config
        self.client = client
        self.schema = schema
        self.domains = [schema.domain(d) for d in (config.domains or schema.domain_names)]
        self.settings = calls.ModelSettings(model=config.model, temperature=config.temperature)
        self.runner = StepRunner(client, store, config.model, config.max_attempts)
        self.users = users
        self.masks: dict[str, dict[str, int]] = {}
        self.preferences: dict[str, dict[str, dict[str, Any]]] = {}
        self.interactions: dict[str, dict[str, str]] = {}
        self.situations: dict[tuple[str, str], dict[str, str]] = {}
        self.tasks: list[dict[str, Any]] = []
        self.failed_users: set[str] = set()

    def _spec(
        self, step: str, key: tuple[Any, ...], about: dict[str, Any],
        build: Callable[[], calls.StepCall], done: Callable[[Any], None],
    ) -> StepSpec:
        """One step; `build` makes the request only if the run store lacks the result."""
        return StepSpec(step, self.runner.record_id(step, *key), about, build, done)

    def phase_tasks_and_masks(self) -> None:
        specs = []
        sd: dict[str, list[dict[str, Any]] | None] = {}
        if self.config.sd_tasks_per_domain:
            for domain in self.domains:
                n = self.config.sd_tasks_per_domain
                specs.append(self._spec(calls.SD_TASKS, (domain.name, n), {"domain": domain.name},
                                        partial(calls.sd_tasks_call, domain, n, self.settings),
                                        partial(sd.__setitem__, domain.name)))
        for user in self.users:
            specs.append(self._spec(calls.MASK, (_user_key(user),), {"user_id": user["user_id"]},
                                    partial(calls.mask_call, user, self.schema, self.settings),
                                    partial(self._set_mask, user["user_id"])))
        self.runner.run(specs, "tasks and interest masks")
        md = self._md_tasks() if self.config.md_tasks else []
        for domain in self.domains:
            for number, task in enumerate(sd.get(domain.name) or [], 1):
                self.tasks.append({"task_id": sd_task_id(domain.name, number), **task})
        for number, task in enumerate(md, 1):
            self.tasks.append({"task_id": md_task_id(number), **task})

    def _md_tasks(self) -> list[dict[str, Any]]:
        """Multi-domain tasks chunk by chunk, each chunk shown the ones before it; all or none."""
        names = [d.name for d in self.domains]
        tasks: list[dict[str, Any]] = []
        while len(tasks) < self.config.md_tasks:
            size = min(calls.MD_TASKS_PER_CALL, self.config.md_tasks - len(tasks))
            key = (names, size, [t["task_description"] for t in tasks])
            build = partial(calls.md_tasks_call, self.domains, size, self.settings, earlier=list(tasks))
            chunk: list[list[dict[str, Any]] | None] = []
            self.runner.run([self._spec(calls.MD_TASKS, key, {"domains": names, "first_task": len(tasks) + 1},
                                        build, chunk.append)], "multi-domain tasks")
            if chunk[0] is None:
                return []
            tasks += chunk[0]
        return tasks

    def _set_mask(self, user_id: str, mask: dict[str, int] | None) -> None:
        if mask is None:
            self.failed_users.add(user_id)
        else:
            self.masks[user_id] = {d.name: mask[d.name] for d in self.domains}

    def _kept(self, user_id: str) -> list[str]:
        return [d for d, on in self.masks[user_id].items() if on]

    def phase_preferences(self) -> None:
        specs = []
        for user in self._live():
            uid = user["user_id"]
            self.preferences[uid] = {}
            for name in self._kept(uid):
                build = partial(calls.preferences_call, user, self.schema.domain(name), self.settings)
                specs.append(self._spec(calls.PREFERENCES, (_user_key(user), name),
                                        {"user_id": uid, "domain": name}, build,
                                        partial(self._set, self.preferences, uid, name)))
        self.runner.run(specs, "preferences")

    def _set(self, table: dict[str, dict[str, Any]], user_id: str, key: str, value: Any) -> None:
        if value is None:
            self.failed_users.add(user_id)
        else:
            table[user_id][key] = value

    def eligible(self, user_id: str) -> list[dict[str, Any]]:
        """The tasks whose every domain the user's mask keeps (paper §2.2)."""
        kept = set(self._kept(user_id))
        return [t for t in self.tasks if set(t["relevant_domains"]) <= kept]

    def phase_interactions_and_situations(self) -> None:
        specs = []
        for user in self._live():
            uid = user["user_id"]
            prefs = self.preferences[uid]
            self.interactions[uid] = {}
            for name in self._kept(uid):
                domain = self.schema.domain(name)
                build = partial(calls.interactions_call, user, domain, prefs[name], self.settings)
                specs.append(self._spec(calls.INTERACTIONS, (_user_key(user), name, prefs[name]),
                                        {"user_id": uid, "domain": name}, build,
                                        partial(self._set, self.interactions, uid, name)))
            for task in self.eligible(uid):
                task_prefs = {d: prefs[d] for d in task["relevant_domains"]}
                specs.append(self._spec(calls.SITUATION, (_user_key(user), _task_key(task), task_prefs),
                                        {"user_id": uid, "task_id": task["task_id"]},
                                        partial(calls.situation_call, user, task_prefs, task, self.settings),
                                        partial(self._set_situation, uid, task["task_id"])))
        self.runner.run(specs, "interactions and situations")

    def _set_situation(self, user_id: str, task_id: str, value: Sequence[Any] | None) -> None:
        """A situation result is (situation, justification); the store gives it back as a list."""
        if value is not None:
            self.situations[user_id, task_id] = value[0]

    def _live(self) -> list[dict[str, str]]:
        return [u for u in self.users if u["user_id"] not in self.failed_users and u["user_id"] in self.masks]

    def benchmark(self) -> Benchmark:
        definitions = [
            TaskDefinition(task_id=t["task_id"], domains=list(t["relevant_domains"]),
                           user_intent=t["user_intent"], task_description=t["task_description"],
                           task_goal=t["task_goal"],
                           relevant_preferences=list(t["relevant_preference_types"]))
            for t in self.tasks
        ]
        by_id = {d.task_id: d for d in definitions}
        users, scenarios = [], []
        for user in self._live():
            uid = user["user_id"]
            number = int(uid.removeprefix("user"))
            interests = {d: bool(self.masks[uid].get(d, 0)) for d in self.schema.domain_names}
            demographics = {k: v for k, v in user.items() if k != "user_id"}
            users.append(User(number, demographics, self.preferences[uid], interests, self.interactions[uid]))
            for task in self.eligible(uid):
                situation = self.situations.get((uid, task["task_id"]))
                if situation is not None:
                    fields = {name: situation[key] for name, key in SITUATION_FIELDS.items()}
                    scenarios.append(by_id[task["task_id"]].for_user(number, fields))
        return Benchmark.from_records(users, definitions, scenarios)


def _check_replaceable(output_dir: Path) -> None:
    """Only a folder this kit generated (it holds MANIFEST) is ever replaced, so official or
    hand-made data cannot be overwritten."""
    if output_dir.exists() and any(output_dir.iterdir()) and not (output_dir / MANIFEST).is_file():
        raise FileExistsError(f"{output_dir} holds data that generation did not write (no {MANIFEST}); "
                              "choose an empty or new output folder")


def _write(benchmark: Benchmark, output_dir: Path, manifest: dict[str, Any]) -> None:
    """Write into a fresh sibling folder (save_benchmark checks every record first), then swap it in."""
    _check_replaceable(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = output_dir.with_name(f".{output_dir.name}.writing-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    save_benchmark(benchmark, staging)
    (staging / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    retired = output_dir.with_name(f".{output_dir.name}.old-{os.getpid()}")
    if output_dir.exists():
        output_dir.rename(retired)
    staging.rename(output_dir)
    shutil.rmtree(retired, ignore_errors=True)


def generate_benchmark(
    config: GenerationConfig | None = None,
    *,
    client: LLMClient | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    run_dir: str | os.PathLike[str] | None = None,
) -> GenerationResult:
    """Generate (or finish generating) a benchmark and write it to `output_dir` in the official layout.

    Defaults: the offline backend, `paths.generated_benchmark_dir()` and a run store under
    runs/generation/<output folder name>. The written folder loads with `load_benchmark`.
    """
    config = config or GenerationConfig()
    schema = load_schema()
    config.validate(schema)
    users = load_users(config)
    output = Path(output_dir) if output_dir is not None else paths.generated_benchmark_dir()
    _check_replaceable(output)
    run_path = Path(run_dir) if run_dir is not None else paths.runs_dir() / "generation" / output.name
    if client is not None:
        return _generate(config, users, client, schema, output, run_path)
    with LLMClient("offline", stage=STAGE) as own:
        return _generate(config, users, own, schema, output, run_path)


def _generate(config: GenerationConfig, users: list[dict[str, str]], client: LLMClient, schema: Schema,
              output: Path, run_path: Path) -> GenerationResult:
    gen = _Generation(config, users, client, RunStore(run_path), schema)
    gen.phase_tasks_and_masks()
    gen.phase_preferences()
    gen.phase_interactions_and_situations()
    benchmark = gen.benchmark()
    counts = gen.runner.counts
    steps = pd.DataFrame(
        [{"step": s, **{k: counts[s, k] for k in ("reused", "generated", "failed")}} for s in calls.STEPS]
    )
    columns = ["step", "user_id", "domain", "task_id", "attempts", "error", "raw"]
    failures = pd.DataFrame([{c: r.to_json().get(c) for c in columns} for r in gen.runner.failures],
                            columns=columns)
    manifest = {
        "generated_by": "personalens_utils.generation",
        "label": OFFLINE_LABEL if client.backend_name == "offline" else None,
        "backend": client.backend_name,
        "prompt_version": GENERATION_PROMPT_VERSION,
        "config": asdict(config),
        "run_dir": str(run_path),
        "users": len(benchmark.users),
        "tasks": len(benchmark.tasks),
        "scenarios": len(benchmark.scenarios),
        "failed_steps": len(failures),
    }
    _write(benchmark, output, manifest)
    return GenerationResult(benchmark=load_benchmark(output), output_dir=output, run_dir=run_path,
                            backend=client.backend_name, steps=steps, failures=failures,
                            usage=client.usage_frame(stage=STAGE))
