"""The 20 PersonaLens domains and their preference types, read from schema.json beside this module.

Kept as data rather than code so generation prompts, validation, the data loader and the offline
backend all read one source. Preference names repeat across domains (e.g. "Preferred Genres" in
Media, Movies and Music), so a preference type is always addressed by (domain, name).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from personalens_utils.base.errors import KitError

MULTI_DOMAIN = "Multi-Domain"
"""Folder name under task/ holding the multi-domain task definitions (not a domain itself)."""


class SchemaError(KitError, KeyError):
    """A domain or preference type the schema does not know."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class PreferenceType:
    domain: str
    name: str
    description: str
    categorical: bool
    multi_valued: bool
    options: tuple[str, ...]
    """Allowed values of a categorical type; empty for free-text types."""
    examples: tuple[str, ...]
    """Illustrative values of a free-text type; empty for categorical types."""


@dataclass(frozen=True, slots=True)
class Intent:
    """An action the assistant supports in a domain (e.g. AddAlarm)."""

    name: str
    description: str


@dataclass(frozen=True, slots=True)
class Domain:
    name: str
    description: str
    intents: tuple[Intent, ...]
    preferences: tuple[PreferenceType, ...]

    @property
    def preference_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.preferences)

    def preference(self, name: str) -> PreferenceType:
        for pref in self.preferences:
            if pref.name == name:
                return pref
        raise SchemaError(f"domain {self.name!r} has no preference type {name!r}; "
                          f"known: {', '.join(self.preference_names)}")


_QUALIFIED = re.compile(r"^(?P<name>.+?)\s*\((?P<domain>[^()]+)\)$")


@dataclass(frozen=True)
class Schema:
    domains: tuple[Domain, ...]
    _by_name: dict[str, Domain] = field(init=False, repr=False, compare=False)
    _multi: dict[str, dict[str, bool]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {d.name: d for d in self.domains})
        object.__setattr__(self, "_multi", {d.name: {p.name: p.multi_valued for p in d.preferences}
                                            for d in self.domains})

    @property
    def domain_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.domains)

    def has_domain(self, name: str) -> bool:
        return name in self._by_name

    def domain(self, name: str) -> Domain:
        try:
            return self._by_name[name]
        except KeyError:
            raise SchemaError(f"unknown domain {name!r}; known: {', '.join(self.domain_names)}") from None

    def multi_valued(self, domain: str) -> dict[str, bool]:
        """Preference type name -> multi-valued flag, for one domain (a fast lookup for validation)."""
        self.domain(domain)
        return self._multi[domain]

    def preference(self, domain: str, name: str) -> PreferenceType:
        return self.domain(domain).preference(name)

    def resolve_preference(self, name: str, domains: list[str] | tuple[str, ...]) -> list[PreferenceType]:
        """The preference types a task's relevant-preference entry refers to, among the task's domains.

        Task files list bare names ("Cuisine Preference") and sometimes qualify an ambiguous one
        ("Preferred Genres (Music)"); a bare name shared by several of the domains matches each.
        Names matching none of the domains give an empty list (the official tasks contain a few).
        """
        qualified = _QUALIFIED.match(name)
        if qualified and self.has_domain(qualified["domain"]):
            name, domains = qualified["name"], [qualified["domain"]]
        found = []
        for dom in domains:
            if self.has_domain(dom):
                found.extend(p for p in self.domain(dom).preferences if p.name == name)
        return found


def _parse(raw: dict) -> Schema:
    domains = []
    for d in raw["domains"]:
        prefs = tuple(
            PreferenceType(domain=d["name"], name=p["name"], description=p["description"],
                           categorical=p["categorical"], multi_valued=p["multi_valued"],
                           options=tuple(p["options"]), examples=tuple(p["examples"]))
            for p in d["preferences"]
        )
        intents = tuple(Intent(i["name"], i["description"]) for i in d["intents"])
        domains.append(Domain(d["name"], d["description"], intents, prefs))
    return Schema(tuple(domains))


@cache
def load_schema() -> Schema:
    """The packaged schema (parsed once per process)."""
    text = resources.files("personalens_utils.reference").joinpath("schema.json").read_text("utf-8")
    return _parse(json.loads(text))


DOMAINS: tuple[str, ...] = load_schema().domain_names
