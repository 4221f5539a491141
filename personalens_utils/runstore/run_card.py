"""The run card: one JSON file in a run store saying what was run (docs/run_card.md).

Records say what each dialogue and judgment is; the card says what the run as a whole was: the kit
and packages that ran it, each configuration of the simulation (prompt set, digests of its prompt
templates, turn cap, roles as asked and as resolved, their parameters, and each role's calls: tokens
and seconds in total and per call), each judge (with its calls), the scoring rules the run was read
under, the benchmark, counts of records by status, tokens and cost by stage, and whether it followed
the authors' protocol unchanged (`protocol`). Every stage that writes into a store updates it
(`update_card`): what is already there is kept and extended, never replaced, and the file is written
atomically (a temporary file renamed over it), so a killed run leaves the old card or the new one.
`merge_cards` joins the cards of shards and refuses cards that disagree on what defines the run,
naming the field.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import math
import os
import platform
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from itertools import accumulate
from pathlib import Path
from typing import Any, TypedDict

import msgspec
import orjson
import pandas as pd
from filelock import FileLock

import personalens_utils
from personalens_utils.base import paths
from personalens_utils.base.errors import KitError
from personalens_utils.base.files import atomic_write_bytes
from personalens_utils.base.stored import BackendName
from personalens_utils.llm.ledger import RoleCalls
from personalens_utils.llm.role import Identified, role_of
from personalens_utils.llm.types import CallKind
from personalens_utils.prompt_sets import PromptSet
from personalens_utils.prompt_sets.kit import (
    ASSISTANT_TEMPERATURE,
    JUDGE_TEMPERATURE,
    MAX_TOKENS,
    USER_TEMPERATURE,
)
from personalens_utils.prompt_sets.official.templates import OFFICIAL_PROMPTS
from personalens_utils.prompt_templates import dialogue as kit_dialogue
from personalens_utils.prompt_templates import judge as kit_judge
from personalens_utils.prompt_templates.user_styles import COOPERATIVE, USER_STYLES
from personalens_utils.runstore.records import Dialogue, Judgment, Record

RunStoreLike = Any
"""A `store.RunStore` (its `root` is the folder) or the folder itself (not imported: `store` calls this
module when it merges)."""
CARD_FILE = paths.CARD_FILE
SCHEMA = "personalens-run-card"
SCHEMA_VERSION = 1
OFFICIAL_SCORING = "official"
PACKAGES = ("pandas", "numpy", "orjson", "anthropic", "openai", "scipy", "statsmodels")
"""The packages whose versions a card notes (those that shape the numbers or the calls)."""

SIMULATION_KEY = ("prompt_set", "prompt_version", "max_turns", "user", "assistant")
"""What defines one simulation configuration; the other fields of an entry grow as a run is extended."""
JUDGE_KEY = ("model", "backend", "model_id", "prompt_set", "prompt_version")
"""What defines one judge."""
STAGE_KEY = ("stage", "role", "prompt_version")
"""What defines one run of another stage (review, probe, profile check, generation, PERSONA Bench)."""
SIMULATION_CALLS = {"user": CallKind.USER_TURN, "assistant": CallKind.ASSISTANT_TURN}
JUDGE_CALLS = {"judge": CallKind.JUDGE}
"""Each role of a simulation and of a judge as its entry's `calls` names it, and the kind of its calls."""
COUNTED = ("calls", "input_tokens", "output_tokens", "timed_calls", "seconds")
"""What a role's `calls` adds up over the runs of its entry (the rest is read from these)."""
BUCKETS_PER_DECADE = 20
"""`seconds_histogram` counts calls in buckets 10^(1/20) (12%) wide, each keyed by its upper bound: the
median and 90th percentile read from it are at most that much above the true ones."""


class RunCardError(KitError):
    """A card that cannot be read, or cards that cannot be merged; the message names the file and field."""


class _RoleShape(TypedDict, total=False):
    model: str
    backend: BackendName
    model_id: str
    endpoint: str
    parameters: dict[str, Any]


class _UserShape(_RoleShape, total=False):
    style: str
    """The user-agent style (`prompt_templates.user_styles`), only when not cooperative: a card of the
    paper's user agent reads as it always did."""


class _PerCallShape(TypedDict, total=False):
    input_tokens: float
    output_tokens: float
    seconds: float
    seconds_p50: float
    seconds_p90: float


class _CallsShape(TypedDict, total=False):
    calls: int
    input_tokens: int
    output_tokens: int
    timed_calls: int
    seconds: float
    seconds_histogram: dict[str, int]
    per_call: _PerCallShape


_RoleCalls = dict[str, _CallsShape]


class _SimulationShape(TypedDict, total=False):
    prompt_set: str
    prompt_version: str
    prompt_digests: dict[str, str]
    max_turns: int | None
    user: _UserShape
    assistant: _RoleShape
    settings: list[str]
    task_types: list[str]
    repeats: int
    calls: _RoleCalls
    calls_from: dict[str, _RoleCalls]


class _JudgeShape(_RoleShape, total=False):
    prompt_set: str
    prompt_version: str
    prompt_digests: dict[str, str]
    dimensions: list[str]
    judge_samples: int
    calls: _RoleCalls
    calls_from: dict[str, _RoleCalls]


class _StageShape(TypedDict, total=False):
    stage: str
    role: dict[str, Any]
    prompt_version: str | None


class _KitShape(TypedDict, total=False):
    version: str
    git_commit: str | None
    python_version: str
    packages: dict[str, str]


_Usage = dict[str, dict[str, int | float]]


class _CardShape(TypedDict, total=False):
    """The kinds of the fields a card holds, as the functions below write them (`check_card`); keys it
    does not name are left to their readers."""

    created: str
    updated: str
    license: str
    kit: list[_KitShape]
    benchmark: dict[str, Any] | None
    simulations: list[_SimulationShape]
    judges: list[_JudgeShape]
    stages: list[_StageShape]
    scoring: list[str]
    counts: dict[str, dict[str, int]]
    usage: _Usage
    own_usage: _Usage
    merged_from: dict[str, _Usage]
    protocol: dict[str, Any]


def card_path(store_dir: str | os.PathLike[str]) -> Path:
    return Path(store_dir) / CARD_FILE


def read_card(store_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The card of the store in `store_dir` ({} when it has none); a damaged card raises `RunCardError`."""
    path = card_path(store_dir)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise RunCardError(f"{path}: cannot read the run card ({exc.strerror})") from None
    try:
        card = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RunCardError(f"{path}: the run card is not valid JSON ({exc}); move it aside and run a stage "
                           "again to write a new one") from None
    return check_card(card, path)


def check_card(card: Any, where: str | os.PathLike[str]) -> dict[str, Any]:
    """`card` (parsed JSON) if it is a run card of the version this kit reads, every field of the kind
    the kit writes; else `RunCardError` naming `where` and the field. A store's own card and one that
    comes with an imported run (`export.untrusted`) pass the same checks."""
    if not isinstance(card, dict) or card.get("schema") != SCHEMA:
        raise RunCardError(f"{where}: not a run card (its 'schema' must be {SCHEMA!r})")
    if card.get("schema_version") != SCHEMA_VERSION:
        raise RunCardError(f"{where}: run card schema_version {card.get('schema_version')!r}; this kit reads "
                           f"version {SCHEMA_VERSION}")
    required = ("simulations", "judges", "scoring", "usage", "kit")
    for field, kind in (("simulations", list), ("judges", list), ("scoring", list), ("usage", dict),
                        ("kit", list), ("own_usage", dict), ("merged_from", dict), ("stages", list)):
        if not isinstance(card.get(field, None if field in required else kind()), kind):
            raise RunCardError(f"{where}: run card field {field!r} must be a {kind.__name__}, "
                               f"got {card.get(field)!r:.80}")
    try:
        msgspec.convert(card, _CardShape, strict=True)
    except msgspec.ValidationError as exc:
        problem, _, at = str(exc).partition(" - at `$")
        place = at.rstrip("`").lstrip(".") or "(top level)"
        raise RunCardError(f"{where}: run card field {place!r} is not what the kit writes "
                           f"({problem})") from None
    for k, entry in enumerate(card["simulations"]):
        style = entry.get("user", {}).get("style", COOPERATIVE)
        if style not in USER_STYLES:
            raise RunCardError(f"{where}: run card field 'simulations[{k}].user.style' is {style!r}, not a "
                               f"user-agent style this kit knows ({', '.join(USER_STYLES)})")
    return card


def write_card(store_dir: str | os.PathLike[str], card: Mapping[str, Any]) -> Path:
    """Write `card` into `store_dir` atomically: a temporary file beside it, then renamed over it."""
    path = card_path(store_dir)
    atomic_write_bytes(path, orjson.dumps(card, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    return path


def prompt_digests(prompts: PromptSet, *, judge: bool) -> dict[str, str]:
    """Name -> SHA-256 (first 16 hex digits) of every template of the set's dialogue or judge prompts."""
    templates = getattr(prompts, "templates", None)
    if templates is not None and prompts.name == OFFICIAL_PROMPTS:
        named = (templates.judge.items() if judge else
                 [*(("assistant." + k, v) for k, v in templates.assistant.items()),
                  *((f"user.{kind}.{k}", v) for kind, group in templates.user.items()
                    for k, v in group.items())])
    else:
        module = kit_judge if judge else kit_dialogue
        named = [(k, v) for k, v in vars(module).items() if k.isupper() and isinstance(v, str) and "\n" in v]
    return {name: hashlib.sha256(text.encode()).hexdigest()[:16] for name, text in sorted(named)}


def benchmark_entry(root: str | os.PathLike[str] | None, user_ids: Iterable[int]) -> dict[str, Any]:
    """The benchmark a run read: its folder, whether it is the official data, a digest of its files and
    of the users sampled."""
    users = sorted(user_ids)
    entry: dict[str, Any] = {"users": len(users),
                             "users_digest": hashlib.sha256(orjson.dumps(users)).hexdigest()[:16]}
    if root is None:
        return {**entry, "kind": "in memory", "path": None, "files_digest": None}
    folder = Path(root)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    stamp = tuple((f.as_posix(), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    official = paths.find_official_data()
    kind = "official" if official is not None and official.resolve() == folder.resolve() else "generated"
    return {**entry, "kind": kind, "path": str(folder), "files_digest": _files_digest(str(folder), stamp)}


@functools.lru_cache(maxsize=8)
def _files_digest(folder: str, stamp: tuple[tuple[str, int, int], ...]) -> str:
    """SHA-256 of the files' relative paths and contents, read again only when `stamp` (their sizes and
    times) changes: a run reads the same benchmark many times."""
    digest = hashlib.sha256()
    for name, _, _ in stamp:
        file = Path(name)
        digest.update(file.relative_to(folder).as_posix().encode() + b"\x00" + file.read_bytes() + b"\x00")
    return digest.hexdigest()[:16]


def _kit() -> dict[str, Any]:
    """The kit, Python and key packages running now (the git commit when in a checkout)."""
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"version": personalens_utils.__version__, "git_commit": _commit(),
            "python_version": platform.python_version(), "packages": packages}


def _commit() -> str | None:
    root = Path(personalens_utils.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def role_entry(role: Identified, *, temperature: float | None = None,
               max_tokens: int | None = None) -> dict[str, Any]:
    """One role: the model as asked and as resolved (its endpoint when not the default), its parameters,
    and a user agent's style when not cooperative (so its entry is another simulation's)."""
    given = role_of(role)
    entry: dict[str, Any] = {"model": given.model, "backend": given.backend, "model_id": given.model_id,
                             "parameters": {"temperature": temperature, "max_tokens": max_tokens}}
    if given.endpoint:
        entry["endpoint"] = given.endpoint
    if given.style != COOPERATIVE:
        entry["style"] = given.style
    return entry


def simulation_entry(prompts: PromptSet, *, user: Mapping[str, Any], assistant: Mapping[str, Any],
                     max_turns: int | None, settings: Sequence[str], task_types: Sequence[str],
                     repeats: int, calls: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One simulation configuration as a card holds it, with its roles' `calls` in the run that wrote
    it (`role_calls`) when given."""
    return {**({"calls": dict(calls)} if calls is not None else {}),
            "prompt_set": prompts.name, "prompt_version": prompts.version,
            "prompt_digests": prompt_digests(prompts, judge=False), "max_turns": max_turns,
            "user": {**user, "parameters": {"temperature": USER_TEMPERATURE, "max_tokens": MAX_TOKENS}},
            "assistant": {**assistant, "parameters": {"temperature": ASSISTANT_TEMPERATURE,
                                                      "max_tokens": MAX_TOKENS}},
            "settings": sorted(set(settings)), "task_types": sorted(set(task_types)), "repeats": repeats}


def judge_entry(prompts: PromptSet, prompt_version: str, *, judge: Mapping[str, Any],
                dimensions: Sequence[str], judge_samples: int,
                calls: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One judge as a card holds it (`prompt_version`: the version its judgments carry), with its
    `calls` in the run that wrote it (`role_calls`) when given."""
    return {**judge, **({"calls": dict(calls)} if calls is not None else {}),
            "parameters": {"temperature": JUDGE_TEMPERATURE}, "prompt_set": prompts.name,
            "prompt_version": prompt_version, "prompt_digests": prompt_digests(prompts, judge=True),
            "dimensions": sorted(set(dimensions)), "judge_samples": judge_samples}


def stage_entry(stage: str, role: Mapping[str, Any], *, prompt_version: str | None = None,
                **about: Any) -> dict[str, Any]:
    """One run of a stage that is neither simulation nor judging: its name, the model that answered
    (`role_entry`), the prompt version its records carry, and lists of what it covered (`about`)."""
    return {"stage": stage, "role": dict(role), "prompt_version": prompt_version,
            **{name: sorted(set(values)) for name, values in about.items()}}


def note_stage(store: RunStoreLike, report: Any, role: Mapping[str, Any], *,
               prompt_version: str | None = None, **about: Any) -> dict[str, Any] | None:
    """Note one run of such a stage (an `engine.StageReport`) on the store's card: its entry and what it
    spent; a store the run never wrote into stays without one (None)."""
    root = Path(store) if isinstance(store, str | os.PathLike) else Path(store.root)
    if not root.is_dir():
        return None
    entry = stage_entry(report.stage, role, prompt_version=prompt_version, **about)
    return update_card(store, step=entry, spent=stage_spent(report), stage=report.stage)


def note_records(store: RunStoreLike, stage: str, role: Mapping[str, Any], **about: Any) -> dict[str, Any]:
    """Note records that came without a stage report (a person's dialogue, an import of the official
    scripts' outputs) on the store's card: an entry of their own, so the card names every writer."""
    return update_card(store, step=stage_entry(stage, role, **about))


def _key(entry: Mapping[str, Any], fields: Sequence[str]) -> bytes:
    return orjson.dumps([_defining(entry.get(f)) for f in fields], option=orjson.OPT_SORT_KEYS)


def _defining(value: Any) -> Any:
    """A role's identity without its parameters (they follow the prompt set)."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "parameters"}
    return value


def _grow(entries: list[dict[str, Any]], new: Mapping[str, Any], fields: Sequence[str],
          source: str | None = None) -> None:
    """Add `new` to `entries`, or extend the entry with the same defining fields (lists joined, counts
    of repetitions the larger, calls added: `_count_calls`; `source`: the folder of a merged card)."""
    for entry in entries:
        if _key(entry, fields) == _key(new, fields):
            for name, value in new.items():
                if isinstance(value, list):
                    entry[name] = sorted(set(entry.get(name, [])) | set(value))
                elif name in ("repeats", "judge_samples"):
                    entry[name] = max(entry.get(name, 1), value)
            _count_calls(entry, new, source)
            return
    entries.append({name: value for name, value in new.items() if name not in ("calls", "calls_from")})
    _count_calls(entries[-1], new, source)


def _count_calls(entry: dict[str, Any], new: Mapping[str, Any], source: str | None) -> None:
    """Add the calls of `new` to `entry`'s. A merged source's calls replace what it brought last time
    (kept in `calls_from`), so merging a shard again after more progress counts it once."""
    if "calls" not in new:
        return
    total = entry.setdefault("calls", {})
    if source is not None:
        earlier = entry.setdefault("calls_from", {})
        _add_calls(total, earlier.get(source, {}), -1)
        earlier[source] = copy.deepcopy(new["calls"])
    _add_calls(total, new["calls"])


def role_calls(report: Any, roles: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Each role's calls in one stage run (an `engine.StageReport`'s `calls_by_kind`) as a card holds
    them: counts, tokens and the seconds of the timed calls in total, how those seconds spread
    (`seconds_histogram`), and per call (`_per_call`). Offline calls are never timed, so an offline
    run's entry is the same from run to run."""
    calls: dict[str, dict[str, Any]] = {}
    made = {role: report.calls_by_kind.get(kind, RoleCalls()) for role, kind in roles.items()}
    _add_calls(calls, {role: {"calls": m.calls, "input_tokens": m.input_tokens,
                              "output_tokens": m.output_tokens, "timed_calls": len(m.seconds),
                              "seconds": sum(m.seconds),
                              "seconds_histogram": Counter(map(_bucket, m.seconds))}
                       for role, m in made.items()})
    return calls


def _add_calls(into: dict[str, Any], calls: Mapping[str, Mapping[str, Any]], sign: int = 1) -> None:
    """Add each role's calls to `into`'s (`sign=-1`: take them away); its figures per call read again."""
    for role, block in calls.items():
        held = into.setdefault(role, {})
        for name in COUNTED:
            total = held.get(name, 0) + sign * block.get(name, 0)
            held[name] = round(float(total), 3) if name == "seconds" else total
        histogram = Counter(held.get("seconds_histogram", {}))
        histogram.update({bound: sign * n for bound, n in block.get("seconds_histogram", {}).items()})
        ordered = sorted(histogram.items(), key=lambda bucket: float(bucket[0]))
        held["seconds_histogram"] = {bound: n for bound, n in ordered if n}
        held["per_call"] = _per_call(held)


def _bucket(seconds: float) -> str:
    """The upper bound of the `seconds_histogram` bucket a call that took `seconds` falls in."""
    step = math.ceil(BUCKETS_PER_DECADE * math.log10(max(seconds, 0.001)))
    return f"{10 ** (step / BUCKETS_PER_DECADE):.3g}"


def _per_call(block: Mapping[str, Any]) -> dict[str, float]:
    """Tokens per call, and the mean, median and 90th percentile seconds per timed call (the two last
    from the histogram: the upper bound of their bucket); {} before any call."""
    calls, timed = block["calls"], block["timed_calls"]
    if not calls:
        return {}
    per = {"input_tokens": round(block["input_tokens"] / calls, 1),
           "output_tokens": round(block["output_tokens"] / calls, 1)}
    if timed:
        per["seconds"] = round(block["seconds"] / timed, 3)
        per["seconds_p50"] = _quantile(block["seconds_histogram"], 0.5 * timed)
        per["seconds_p90"] = _quantile(block["seconds_histogram"], 0.9 * timed)
    return per


def _quantile(histogram: Mapping[str, int], rank: float) -> float:
    """The upper bound of the bucket that holds the call of this rank (calls counted from the fastest)."""
    return float(next(bound for bound, seen in zip(histogram, accumulate(histogram.values()), strict=True)
                      if seen >= rank))


def _counts(folder: Path, kinds: Sequence[type[Record]],
            store: RunStoreLike = None) -> dict[str, dict[str, int]]:
    """Records by status in the tables of `kinds` and every other table the store holds, the current
    record of each id (a torn last line is not counted). `store`, when it is the folder's own, counts
    from the indexes it keeps; otherwise each table is read here rather than through a store, since the
    store calls this module when it merges."""
    counts = {}
    tables = {kind.table for kind in kinds} | {p.stem for p in folder.glob("*.jsonl")}
    own = store is not None and not isinstance(store, str | os.PathLike) and Path(store.root) == folder
    for name in sorted(tables):
        indexed = store.status_counts(name) if own else None
        counts[name] = indexed if indexed is not None else _read_counts(folder / f"{name}.jsonl")
    return counts


def _read_counts(table: Path) -> dict[str, int]:
    status: dict[str, str] = {}
    if table.exists():
        with table.open("rb") as fh:
            for line in fh:
                if line.endswith(b"\n") and line.strip():
                    rec = orjson.loads(line)
                    status[rec["id"]] = str(rec.get("status"))
    return dict(sorted(Counter(status.values()).items()))


def protocol(card: Mapping[str, Any]) -> dict[str, Any]:
    """`official` when every simulation and judge used the official prompt set with the official turn caps
    and the answers were read under the official scoring rule; else `custom`, with what differs."""
    differs = []
    for entry in card.get("simulations", []):
        if entry["prompt_set"] != OFFICIAL_PROMPTS:
            differs.append(f"simulation prompt_set {entry['prompt_set']!r}")
        if entry.get("max_turns") is not None:
            differs.append(f"turn cap max_turns={entry['max_turns']} (official: 20 SD, 30 MD)")
        if "style" in entry["user"]:
            differs.append(f"user-agent style {entry['user']['style']!r} (official: {COOPERATIVE})")
    for entry in card.get("judges", []):
        if entry["prompt_set"] != OFFICIAL_PROMPTS:
            differs.append(f"judge {entry['model']} prompt_set {entry['prompt_set']!r}")
    differs += [f"scoring rule {rule!r}" for rule in card.get("scoring", []) if rule != OFFICIAL_SCORING]
    if not card.get("simulations") and not card.get("judges"):
        differs.append("nothing simulated or judged yet")
    return {"kind": "custom" if differs else "official", "differs": sorted(set(differs))}


def update_card(store: RunStoreLike, *, simulation: Mapping[str, Any] | None = None,
                judge: Mapping[str, Any] | None = None, scoring: str | None = None,
                benchmark: Mapping[str, Any] | None = None, spent: Mapping[str, Any] | None = None,
                stage: str | None = None, step: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Extend the store's card with what a stage just did and write it back; returns the card.

    `simulation`, `judge`: an entry (`simulation_entry`, `judge_entry`), added or joined with the same
    one already there; `step`: a `stage_entry` (another stage's run), joined the same way into
    `stages`; `scoring`: a scoring rule the run was read under; `benchmark`: `benchmark_entry`
    (a different benchmark than the card's is refused); `spent`: calls, tokens and cost of this stage
    run, added to `usage[stage]`. Counts of dialogues and judgments are read from the store.
    """
    if isinstance(store, str | os.PathLike):
        root = Path(store)
    elif store.card_folder is None:  # a view that wrote nothing: the run it reads keeps its card
        return read_card(store.root) or _empty()
    else:
        root = Path(store.card_folder)
    path = card_path(root)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root):
        card = read_card(root) or _empty()
        if simulation is not None:
            _grow(card["simulations"], simulation, SIMULATION_KEY)
        if judge is not None:
            _grow(card["judges"], judge, JUDGE_KEY)
        if step is not None:
            _grow(card.setdefault("stages", []), step, STAGE_KEY)
        if scoring is not None and scoring not in card["scoring"]:
            card["scoring"] = sorted([*card["scoring"], scoring])
        if benchmark is not None:
            held = card.get("benchmark")
            if held and held.get("files_digest") != benchmark.get("files_digest"):
                raise RunCardError(f"{path}: this store's run read the benchmark {held.get('path')} (files "
                                   f"digest {held.get('files_digest')}), not {benchmark.get('path')} "
                                   f"({benchmark.get('files_digest')}): field 'benchmark.files_digest'; give "
                                   "this run its own run_dir")
            card["benchmark"] = dict(benchmark)
        if spent is not None and stage is not None:
            _add_usage(card.setdefault("own_usage", {}), {stage: spent})
        _total_usage(card)
        kit = _kit()
        if kit not in card["kit"]:
            card["kit"].append(kit)
        card["counts"] = _counts(root, (Dialogue, Judgment), store)
        card["updated"] = _now()
        card["protocol"] = protocol(card)
        write_card(root, card)
    return card


def _empty() -> dict[str, Any]:
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "created": _now(), "updated": _now(),
            "kit": [], "benchmark": None, "simulations": [], "judges": [], "stages": [], "scoring": [],
            "counts": {}, "usage": {}, "protocol": {}}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _total_usage(card: dict[str, Any]) -> None:
    """`usage`: the card's own stage runs (`own_usage`) plus the latest usage of every source merged in
    (`merged_from`), so merging a shard again after more progress replaces its share, never adds it twice."""
    total: dict[str, Any] = {}
    _add_usage(total, card.get("own_usage", {}))
    for usage in card.get("merged_from", {}).values():
        _add_usage(total, usage)
    card["usage"] = total


def _add_usage(into: dict[str, Any], usage: Mapping[str, Mapping[str, Any]]) -> None:
    for stage, spent in usage.items():
        held = into.setdefault(stage, {})
        for name, value in spent.items():
            total = held.get(name, 0) + value
            held[name] = round(total, 6) if isinstance(total, float) else total


def stage_spent(report: Any) -> dict[str, Any]:
    """The calls, tokens and cost of one stage run (an `engine.StageReport`), as a card adds them up."""
    return {"calls": report.calls, "input_tokens": report.input_tokens, "output_tokens": report.output_tokens,
            "cost_usd": float(report.cost_usd)}


def check_cards(sources: Sequence[str | os.PathLike[str]], target: str | os.PathLike[str], *,
                extending: bool = False) -> None:
    """Refuse, before a merge writes anything, cards of `sources` and `target` that disagree on what
    defines the run (the benchmark's files, the simulation configurations, the judges), naming the
    field and both folders; a damaged card is refused by name too. `extending`: the target is a run
    that extends each source's (more assistants or judges beside theirs, e.g. `make evaluate`'s), so a
    source's configurations need only be among the target's."""
    if extending:
        held = read_card(target)
        for folder in map(Path, sources):
            card = read_card(folder)
            if held and card:
                _within(folder, card, Path(target), held)
        return
    cards = [(folder, card) for folder in [*map(Path, sources), Path(target)] if (card := read_card(folder))]
    for folder, card in cards[1:]:
        _agree(cards[0][0], cards[0][1], folder, card)


def _within(source_dir: Path, source: Mapping[str, Any], target_dir: Path, target: Mapping[str, Any]) -> None:
    """Refuse a source card that defines something the target's does not hold: another benchmark, or a
    simulation configuration or judge the target's card lacks."""
    bench_s, bench_t = source.get("benchmark") or {}, target.get("benchmark") or {}
    if bench_s and bench_t and bench_s.get("files_digest") != bench_t.get("files_digest"):
        _refuse("benchmark.files_digest", bench_s.get("files_digest"), bench_t.get("files_digest"),
                source_dir, target_dir)
    for section, fields in (("simulations", SIMULATION_KEY), ("judges", JUDGE_KEY)):
        held = {_key(e, fields) for e in target[section]}
        extra = next((e for e in source[section] if _key(e, fields) not in held), None)
        if extra is not None:
            _refuse(f"{section} (one the target lacks)", {f: _defining(extra.get(f)) for f in fields}, None,
                    source_dir, target_dir)


def merge_cards(sources: Sequence[str | os.PathLike[str]],
                target: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Join the cards of `sources` (shards) into the target's card; None when none has one.

    Entries join as in `update_card`; counts are read again from the merged store; the usage of a
    source is its latest card's (`merged_from`: folder -> usage), so merging again after more progress
    counts each shard once. Call `check_cards` first.
    """
    target_dir = Path(target)
    with _locked(target_dir):
        return _merge_into(target_dir, [Path(s) for s in sources])


def _locked(folder: Path) -> FileLock:
    """The lock every writer of the folder's card holds while it reads, extends and writes it."""
    return FileLock(str(folder / f".{CARD_FILE}.lock"))


def _merge_into(target_dir: Path, sources: list[Path]) -> dict[str, Any] | None:
    held = read_card(target_dir)
    cards = [(s, card) for s in sources if (card := read_card(s))]
    if not cards and not held:
        return None
    merged = held or _empty()
    merged.setdefault("merged_from", {})
    for folder, card in cards:
        for entry in card["simulations"]:
            _grow(merged["simulations"], entry, SIMULATION_KEY, str(folder.resolve()))
        for entry in card["judges"]:
            _grow(merged["judges"], entry, JUDGE_KEY, str(folder.resolve()))
        for entry in card.get("stages", []):
            _grow(merged.setdefault("stages", []), entry, STAGE_KEY)
        merged["scoring"] = sorted(set(merged["scoring"]) | set(card["scoring"]))
        merged["benchmark"] = merged["benchmark"] or card.get("benchmark")
        merged["kit"] += [kit for kit in card["kit"] if kit not in merged["kit"]]
        merged["created"] = min(merged["created"], card["created"])
        merged["merged_from"][str(folder.resolve())] = card["usage"]
    _total_usage(merged)
    merged["counts"] = _counts(target_dir, (Dialogue, Judgment))
    merged["updated"] = _now()
    merged["protocol"] = protocol(merged)
    write_card(target_dir, merged)
    return merged


def _agree(a_dir: Path, a: Mapping[str, Any], b_dir: Path, b: Mapping[str, Any]) -> None:
    """Refuse two cards that disagree on what defines the run, naming the first field that differs."""
    bench_a, bench_b = a.get("benchmark") or {}, b.get("benchmark") or {}
    if bench_a and bench_b and bench_a.get("files_digest") != bench_b.get("files_digest"):
        _refuse("benchmark.files_digest", bench_a.get("files_digest"), bench_b.get("files_digest"),
                a_dir, b_dir)
    for section, fields in (("simulations", SIMULATION_KEY), ("judges", JUDGE_KEY)):
        ours, theirs = a[section], b[section]
        if not ours or not theirs:
            continue
        keys_a = {_key(e, fields): e for e in ours}
        keys_b = {_key(e, fields): e for e in theirs}
        if keys_a.keys() == keys_b.keys():
            continue
        only_a = next((e for k, e in keys_a.items() if k not in keys_b), None)
        only_b = next((e for k, e in keys_b.items() if k not in keys_a), None)
        if only_a is None or only_b is None:
            _refuse(section, len(ours), len(theirs), a_dir, b_dir)
        field = next(f for f in fields if _defining(only_a.get(f)) != _defining(only_b.get(f)))
        ours_value, theirs_value = _defining(only_a.get(field)), _defining(only_b.get(field))
        _refuse(f"{section}.{field}", ours_value, theirs_value, a_dir, b_dir)


def _refuse(field: str, ours: Any, theirs: Any, a_dir: Path, b_dir: Path) -> None:
    raise RunCardError(f"cannot merge the run cards of {a_dir} and {b_dir}: they disagree on {field} "
                       f"({ours!r} vs {theirs!r}), so they are not shards of one run; nothing was written")


def entry_calls(entry: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The calls of a simulation's or a judge's entry, each role named as a reader would ("assistant
    smollm2", "user agent (with smollm2)", "judge Claude 3.5 Sonnet"); none on a card written before."""
    calls = entry.get("calls", {})
    if "assistant" not in entry:
        return [(f"judge {entry['model']}", block) for block in calls.values()]
    named = {"assistant": f"assistant {entry['assistant']['model']}",
             "user": f"user agent (with {entry['assistant']['model']})"}
    return [(named[role], block) for role, block in calls.items()]


def calls_text(role: str, block: Mapping[str, Any]) -> str:
    """One role's calls in words: how many, tokens in + out per call, and seconds per timed call."""
    per = block.get("per_call", {})
    text = f"{role}: {block['calls']} calls"
    if per:
        text += f", {per['input_tokens']:g} + {per['output_tokens']:g} tokens per call"
    if "seconds" in per:
        text += (f", {per['seconds']:.2f} s per call over {block['timed_calls']} timed (median ≤ "
                 f"{per['seconds_p50']:g} s, p90 ≤ {per['seconds_p90']:g} s)")
    return text


def summary(card: Mapping[str, Any]) -> pd.DataFrame:
    """The card in a few rows a notebook shows (field, value): the protocol and what differs, each
    simulation and judge with its roles' calls, the scoring rules, the counts, the cost by stage, the kit."""
    if not card:
        return pd.DataFrame({"field": ["run card"], "value": ["none: no stage wrote into this store yet"]})
    protocol = card.get("protocol", {})
    rows = [("protocol", protocol.get("kind", "")), *(("differs", d) for d in protocol.get("differs", []))]
    for entry in card["simulations"]:
        style = f", style {entry['user']['style']}" if "style" in entry["user"] else ""
        rows.append(("simulation", f"{entry['prompt_set']} {entry['prompt_version']}; user "
                     f"{entry['user']['model']} ({entry['user']['model_id']}, {entry['user']['backend']}"
                     f"{style}); "
                     "assistant "
                     f"{entry['assistant']['model']} ({entry['assistant']['model_id']}, "
                     f"{entry['assistant']['backend']}); max_turns {entry['max_turns']}; repeats "
                     f"{entry['repeats']}"))
        if "calls" in entry:
            rows.append(("calls", "; ".join(calls_text(role, block) for role, block in entry_calls(entry))))
    for entry in card["judges"]:
        rows.append(("judge", f"{entry['model']} ({entry['model_id']}, {entry['backend']}); "
                     f"{entry['prompt_set']} {entry['prompt_version']}; "
                     f"judge_samples {entry['judge_samples']}"))
        if "calls" in entry:
            rows.append(("calls", "; ".join(calls_text(role, block) for role, block in entry_calls(entry))))
    for entry in card.get("stages", []):
        role = entry["role"]
        version = f"; prompt version {entry['prompt_version']}" if entry.get("prompt_version") else ""
        rows.append(("stage", f"{entry['stage']}: {role['model']} ({role['model_id']}, "
                              f"{role['backend']}){version}"))
    rows += [("scoring", ", ".join(card["scoring"]) or "not recorded")]
    rows += [(f"{table}", ", ".join(f"{status} {n}" for status, n in counts.items()))
             for table, counts in card.get("counts", {}).items()]
    rows += [(f"usage {stage}", f"{spent.get('calls', 0)} calls, {spent.get('input_tokens', 0)} + "
              f"{spent.get('output_tokens', 0)} tokens, ${spent.get('cost_usd', 0):.4f}")
             for stage, spent in card["usage"].items()]
    rows += [("kit", f"{kit['version']} ({kit.get('git_commit') or 'no git checkout'}), "
                     f"Python {kit['python_version']}") for kit in card["kit"]]
    rows += [("created / updated", f"{card.get('created')} / {card.get('updated')}")]
    return pd.DataFrame(rows, columns=["field", "value"])
