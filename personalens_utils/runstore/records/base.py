"""What every run-store record shares: the base type, its one JSON mechanism, and the line reader.

A record is a frozen dataclass whose fields are its schema. `Record.to_json` writes the fields in the
order of the stored line (`layout`), and `Record.from_json` reads them back, typed by the same fields:
the plain fields in one `msgspec.convert` call. msgspec is the loader because it converts JSON builtins
into dataclasses (and tuples, unions, literals, `Annotated` constraints) strictly and fast, in C, without
a second model of each record: no `bool` for an `int`, no `"7"` for an int, a list for a tuple; each
error carries the path of what failed, which `_Reader` words as the run store always did (file, line,
field). pydantic would need strict mode, which refuses a JSON list for a tuple field; cattrs coerces
(`int("7")`) rather than checks. A field whose stored form differs from its value (the variant spread
over its keys, a key stored under another name) declares a `Form` in its metadata; a property written
on the line for readers of the raw JSON is named in `derived` and checked on reading. The columnar copy
takes its column types from `stored_hints`, so a new field is stored, read back and copied without
another schema.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, NoReturn, Self, TypedDict

import msgspec
import orjson

from personalens_utils.base.errors import KitError
from personalens_utils.llm.types import Usage
from personalens_utils.prompt_sets import PROMPT_SETS
from personalens_utils.runstore.identity import Variant

OFFLINE = "offline"

ERROR = "error"
"""The status of a record whose work failed in the llm layer; a rerun may replace it."""

LAYOUT_HINT = (
    "the run store layout is described in docs/architecture.md ('Run store records'); fix or delete "
    "that line (a deleted record is simply redone by the next run), or move the folder aside and "
    "run the stage again"
)

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
"""A string field that may not be empty on a stored line."""


FORM = "personalens_form"
"""The field metadata key of a field's `Form`."""
RUN_IDENTITY = "personalens_run_identity"
"""The field metadata key of a run-identity field: a line without it was written before run identity."""


class RecordError(KitError, ValueError):
    """A stored line that does not fit its record type; the message names where and what."""


class _Reader:
    """Typed access to one stored JSON object; every failure names the place and the field."""

    def __init__(self, data: Any, kind: type[Record], where: str):
        self.kind, self.where = kind, where or f"a {kind.table} record"
        if not isinstance(data, Mapping):
            self.fail("", f"must be a JSON object, got {type(data).__name__}")
        self.data: Mapping[str, Any] = data

    def fail(self, key: str, problem: str) -> NoReturn:
        what = f"field {key!r} " if key else ""
        raise RecordError(f"{self.where}: {self.kind.__name__} record {what}{problem}; {LAYOUT_HINT}")

    def get(self, key: str) -> Any:
        """A key's value as stored, of any type; a missing key fails."""
        if key not in self.data:
            self.fail(key, "is missing")
        return self.data[key]

    def identity(self, keys: tuple[str, ...]) -> None:
        """Refuse a line without the run-identity fields: it was written before run identity."""
        missing = [key for key in keys if key not in self.data]
        if missing:
            raise RecordError(f"{self.where}: {self.kind.__name__} record lacks {missing}: it was written "
                              "before run identity; opening its store with RunStore migrates it (or run "
                              "`python -m personalens_utils.runstore.migration RUN_DIR`)")

    def usage(self, key: str) -> Usage:
        value = self.get(key)
        if isinstance(value, dict):
            with contextlib.suppress(TypeError, ValueError):
                return Usage.from_dict(value)
        self.fail(key, f"must hold the four token counts of docs/architecture.md, got {value!r:.120}")

    def converted(self, hints: type, keys: tuple[str, ...]) -> dict[str, Any]:
        """The values of `keys`, each of the type `hints` gives it (a TypedDict), checked by msgspec."""
        for key in keys:
            if key not in self.data:
                self.fail(key, "is missing")
        try:
            return msgspec.convert({key: self.data[key] for key in keys}, hints, strict=True)
        except msgspec.ValidationError as exc:
            self.fail(*_explain(str(exc), self.data))


_PROBLEM = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_EXPECTED = re.compile(r"^Expected `(?P<kinds>[^`]*)`(?P<more>.*?), got `[^`]*`$")
_STEP = re.compile(r"\.(\w+)|\[(\d+)\]")
_KINDS = {"str": "a string", "int": "an integer", "float": "a number", "array": "a list",
          "object": "an object", "bool": "true or false", "null": "null"}


def _explain(message: str, data: Mapping[str, Any]) -> tuple[str, str]:
    """msgspec's error in the run store's words: (the field, what is wrong with it, with the value)."""
    match = _PROBLEM.match(message)
    problem, path = (match["problem"], match["path"] or "") if match else (message, "")
    steps = [(name, int(index) if index else None) for name, index in _STEP.findall(path)]
    if not steps:  # a missing field is named in the problem, not the path
        missing = re.search(r"missing required field `(\w+)`", problem)
        return (missing[1] if missing else ""), "is missing"
    key, value, inside = steps[0][0], data.get(steps[0][0]), []
    for name, index in steps[1:]:
        inside.append(f"key {name!r}" if name else f"item {index}")
        value = value.get(name) if name and isinstance(value, Mapping) else (
            value[int(index)] if index is not None and isinstance(value, list) else None)
    expected = _EXPECTED.match(problem)
    if expected:
        kinds = " or ".join(_KINDS.get(kind, kind) for kind in expected["kinds"].split(" | "))
        if expected["more"].strip() == "of length >= 1":
            kinds = "a non-empty string"
        problem = f"must be {kinds}"
    elif problem.startswith("Invalid enum value"):
        problem = "is not one of the values its type allows"
    where = f"{' '.join(inside)} " if inside else ""
    return key, f"{where}{problem[0].lower()}{problem[1:]}, got {value!r:.80}"


@dataclass(frozen=True)
class Form:
    """How a field whose stored form is not its plain value goes onto a line and comes back: `dump` gives
    the keys it writes at the field's place, `load` reads the value from the line, and `columns` are the
    types of the keys it writes (for the columnar copy)."""

    dump: Callable[[Any, Any], Mapping[str, Any]]
    """(record, value) -> the keys and values written."""
    load: Callable[[_Reader], Any]
    columns: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def meta(self) -> dict[str, Form]:
        return {FORM: self}


VARIANT = Form(lambda _, variant: variant.stored(), lambda r: Variant.read(r.data, r.fail, PROMPT_SETS),
               typing.get_type_hints(Variant))
"""A dialogue's, judgment's or review's variant: its version, the set unless the kit's, the sample unless 0
(so lines written before prompt sets and samples are the lines written now)."""
VARIANT_IN_FULL = Form(lambda _, variant: variant.stored_in_full(),
                       lambda r: Variant.read(r.data, r.fail, PROMPT_SETS), typing.get_type_hints(Variant))
"""A variant stored with its set and version always."""
USAGE = Form(lambda _, usage: {"usage": usage.to_dict()}, lambda r: r.usage("usage"))
"""Token usage: the four counts, and nothing else (`Usage.to_dict`)."""


def renamed(key: str, kind: Any) -> Form:
    """A field stored under another key."""
    return Form(lambda _, value: {key: builtin(value)}, _reads(key, kind), {key: kind})


def _reads(key: str, kind: Any) -> Callable[[_Reader], Any]:
    """A `Form.load` reading one key of type `kind`, checked as the plain fields are."""
    typed = TypedDict("OneKey", {key: kind})  # type: ignore[misc]
    return lambda r: r.converted(typed, (key,))[key]


def unless_empty(key: str, kind: Any, empty: Any, choices: Collection[Any] = ()) -> Form:
    """A field written only when it is not `empty`, and read back as `empty` when its key is absent: a
    field added later leaves the lines of records that do not use it as they were. With `choices`, a
    stored value must be one of them (a name the kit defines, not any string)."""
    read = _reads(key, kind)

    def load(r: _Reader) -> Any:
        value = read(r) if key in r.data else empty
        if choices and value not in choices:
            r.fail(key, f"must be one of {list(choices)} (or absent: {empty!r}), got {value!r:.80}")
        return value

    return Form(lambda _, value: {key: builtin(value)} if value != empty else {}, load, {key: kind})


def unstored(value: Any) -> Form:
    """A field never written; read back as `value`."""
    return Form(lambda _, __: {}, lambda _: value)


def run_identity() -> dict[str, bool]:
    """The metadata of a run-identity field (`_Reader.identity`)."""
    return {RUN_IDENTITY: True}


@dataclass(frozen=True)
class _Schema:
    """A record type's stored line, worked out once from its fields."""

    keys: tuple[str, ...]
    """Fields and derived properties, in the order of the line."""
    plain: tuple[str, ...]
    typed: type
    """A TypedDict of the plain fields (no `Form`), which msgspec converts a line's keys into (the reader
    names a missing key first)."""
    forms: Mapping[str, Form]
    identity: tuple[str, ...]
    scalar: frozenset[str]
    """The keys whose values are JSON scalars by their type: written as they are, with no walk."""

    @functools.cached_property
    def dumps(self) -> tuple[tuple[str, Form | None, bool], ...]:
        """Each key of the line in order, with its field's `Form` (or None) and whether it is a scalar."""
        return tuple((key, self.forms.get(key), key in self.scalar) for key in self.keys)


@functools.cache
def _schema(kind: type[Record]) -> _Schema:
    hints = typing.get_type_hints(kind, include_extras=True)
    fields = dataclasses.fields(kind)
    order = {name: place for place, name in enumerate(kind.layout)}
    keys = tuple(sorted([*(f.name for f in fields), *kind.derived],
                        key=lambda name: order.get(name, len(order))))
    forms = {f.name: f.metadata[FORM] for f in fields if FORM in f.metadata}
    plain = tuple(f.name for f in fields if f.name not in forms)
    typed = TypedDict(f"{kind.__name__}Line",  # type: ignore[misc]
                      {name: hints[name] for name in plain}, total=False)
    identity = tuple(f.name for f in fields if f.metadata.get(RUN_IDENTITY))
    schema = _Schema(keys, plain, typed, forms, identity, frozenset())
    stored = stored_hints(kind, schema)
    scalar = frozenset(key for key in keys if key not in forms and _is_scalar(stored[key]))
    return dataclasses.replace(schema, scalar=scalar)


def _is_scalar(hint: Any) -> bool:
    """Whether every value of a type is a JSON scalar (a string, number, boolean or null)."""
    if isinstance(hint, types.UnionType):
        return all(map(_is_scalar, typing.get_args(hint)))
    return hint in _SCALARS


def stored_hints(kind: type[Record], schema: _Schema | None = None) -> dict[str, Any]:
    """The Python type of every key a record type writes, from its fields, forms and derived properties
    (or class constants): what the columnar copy types its columns by."""
    hints = typing.get_type_hints(kind)
    schema = schema or _schema(kind)
    fields = {f.name for f in dataclasses.fields(kind)}
    out: dict[str, Any] = {}
    for key in schema.keys:
        if key in schema.forms:
            out.update(schema.forms[key].columns)
        elif key in fields:
            out[key] = hints[key]
        elif isinstance(attribute := inspect.getattr_static(kind, key), property):
            out[key] = typing.get_type_hints(attribute.fget)["return"]
        else:
            out[key] = typing.get_args(hints[key])[0]
    return out


_SCALARS = frozenset({str, int, float, bool, type(None)})


def builtin(value: Any) -> Any:
    """A field's value as JSON builtins, as `to_json` gives it: tuples as lists, dataclasses as objects (the
    form orjson writes, made by orjson: a walk in Python made writing a dialogue three times slower)."""
    if type(value) in _SCALARS:
        return value
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY))


@dataclass(frozen=True, kw_only=True)
class Record:
    """One line of a run-store table. Subclasses set `table` and define the identity of `id`."""

    table: ClassVar[str]
    layout: ClassVar[tuple[str, ...]] = ()
    """The order of the stored line's keys where it is not the fields' order (fields, with a `Form`'s keys
    at its field, and `derived` properties); fields it does not name follow, in field order."""
    derived: ClassVar[Mapping[str, str]] = {}
    """Properties written on the line for readers of the raw JSON, each with what its value is made of (a
    phrase taking the value); reading checks them against the fields and says so when one differs."""
    summary_fields: ClassVar[tuple[str, ...]] = ()
    """The keys analysis reads (everything but texts and costs): the columns of the columnar copy."""
    id: str = ""
    status: str

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", self.identity())

    def identity(self) -> str:
        """The id computed from the identity fields; types whose ids come from elsewhere need one given."""
        raise RecordError(f"a {type(self).__name__} record needs its id given")

    @property
    def is_error(self) -> bool:
        return self.status == ERROR

    @property
    def failure(self) -> str:
        """What an error record is about and why it failed, for a report's first errors."""
        return f"{self.id}: {getattr(self, 'error', None) or self.status}"

    def to_json(self) -> dict[str, Any]:
        """The stored line as an object: every field (a `Form`'s keys at its place) and derived property."""
        out: dict[str, Any] = {}
        for key, form, scalar in _schema(type(self)).dumps:
            if scalar:
                out[key] = getattr(self, key)
            elif form is None:
                out[key] = builtin(getattr(self, key))
            else:
                out.update(form.dump(self, getattr(self, key)))
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        """The record of a stored line; a line that does not fit raises `RecordError` naming `where` (file
        and line) and the field."""
        r = _Reader(data, cls, where)
        schema = _schema(cls)
        values = r.converted(schema.typed, tuple(key for key in schema.plain
                                                 if key in r.data or key not in schema.identity))
        r.identity(schema.identity)
        if not values["id"]:
            r.fail("id", "is empty")
        values.update({name: form.load(r) for name, form in schema.forms.items()})
        record = cls(**values)
        for key, made_of in cls.derived.items():
            stored, computed = r.get(key), getattr(record, key)
            if stored != computed:
                r.fail(key, f"is {stored!r:.80} but {made_of.format(computed)}")
        return record


class _Varied:
    """A record holding a `Variant`, read by its parts as records were before it held one."""

    variant: Variant

    @property
    def prompt_version(self) -> str:
        return self.variant.prompt_version

    @property
    def prompt_set(self) -> str:
        return self.variant.prompt_set

    @property
    def sample(self) -> int:
        return self.variant.sample
