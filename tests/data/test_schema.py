"""The packaged schema against the official schema.json, plus its own consistency."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from personalens_utils.reference.schema import DOMAINS, SchemaError, load_schema


def test_twenty_domains_with_unique_preference_names() -> None:
    schema = load_schema()
    assert len(DOMAINS) == 20 == len(set(DOMAINS))
    for domain in schema.domains:
        assert domain.preferences and domain.intents and domain.description
        assert len(set(domain.preference_names)) == len(domain.preferences)


def test_categorical_types_have_options_and_free_text_types_examples() -> None:
    for domain in load_schema().domains:
        for pref in domain.preferences:
            assert pref.description
            if pref.categorical:
                assert pref.options and not pref.examples, (domain.name, pref.name)
            else:
                assert pref.examples and not pref.options, (domain.name, pref.name)


def test_lookups_and_unknown_names() -> None:
    schema = load_schema()
    assert schema.preference("Rental Cars", "Preferred Fuel Type").multi_valued is False
    with pytest.raises(SchemaError, match="unknown domain 'Bus'"):
        schema.domain("Bus")
    with pytest.raises(SchemaError, match="no preference type 'Genre'"):
        schema.preference("Music", "Genre")


def test_resolve_preference_handles_shared_and_qualified_names() -> None:
    schema = load_schema()
    shared = schema.resolve_preference("Preferred Genres", ["Media", "Music", "Events"])
    assert [p.domain for p in shared] == ["Media", "Music"]
    qualified = schema.resolve_preference("Preferred Genres (Music)", ["Media", "Music"])
    assert [p.domain for p in qualified] == ["Music"]
    assert schema.resolve_preference("Location Preference", ["Music", "Events"]) == []


def test_matches_official_schema(official_schema_path: Path) -> None:
    official = json.loads(official_schema_path.read_text(encoding="utf-8"))
    schema = load_schema()
    assert [d["domain"] for d in official] == list(DOMAINS)
    for entry in official:
        domain = schema.domain(entry["domain"])
        assert [t["name"] for t in entry["tasks"]] == [i.name for i in domain.intents]
        assert [a["name"] for a in entry["affinities"]] == list(domain.preference_names)
        for aff in entry["affinities"]:
            pref = domain.preference(aff["name"])
            assert pref.categorical is aff["is_categorical"]
            assert pref.multi_valued is aff["has_multiple_values"]
            assert len(pref.options or pref.examples) == len(aff["possible_values"])
            assert list(pref.options or pref.examples) == aff["possible_values"]


def test_descriptions_are_not_copied(official_schema_path: Path) -> None:
    official = json.loads(official_schema_path.read_text(encoding="utf-8"))
    schema = load_schema()
    for entry in official:
        domain = schema.domain(entry["domain"])
        assert domain.description != entry["description"]
        for aff in entry["affinities"]:
            assert domain.preference(aff["name"]).description != aff["description"]
        for task, intent in zip(entry["tasks"], domain.intents, strict=True):
            assert intent.description != task["description"]
