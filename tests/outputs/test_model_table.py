"""Table 11 is written from the registry: its rows, ids, successors and prices follow the registry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from personalens_utils.analysis import table11
from personalens_utils.llm import registry
from personalens_utils.outputs.ids import OutputId
from personalens_utils.outputs.tables import read_table


def row(frame, model: str, backend: str) -> dict:
    hits = frame[(frame["model"] == model) & (frame["backend"] == backend)]
    assert len(hits) == 1, (model, backend)
    return hits.iloc[0].to_dict()


def test_every_paper_model_with_role_version_and_what_is_called() -> None:
    frame = table11().frame
    assert set(frame["model"]) == {
        "Claude 3 Haiku", "Claude 3.5 Haiku", "Claude 3 Sonnet", "Claude 3.5 Sonnet",
        "Llama 3.1 8B Instruct", "Llama 3.1 70B Instruct", "Mistral 7B Instruct", "Mixtral 8x7B Instruct",
    }
    user = row(frame, "Claude 3 Sonnet", "anthropic")
    assert user["paper version"] == "claude-3-sonnet-20240229"
    assert user["paper role"] == "user agent, assistant"
    assert user["status"] == "retired 2025-07-21"
    assert (user["model called"], user["id called"]) == (
        "Claude Sonnet 4.5", registry.resolve("Claude 3 Sonnet", "anthropic")
    )
    assert row(frame, "Claude 3.5 Sonnet", "bedrock")["paper role"] == "judge"
    llama = row(frame, "Llama 3.1 8B Instruct", "openai")
    assert llama["paper version"] == "llama3-1-8b-instruct"
    assert llama["id called"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert llama["prices read"] == "self-hosted, no price"
    assert frame[frame["model"] == "Llama 3.1 8B Instruct"]["backend"].tolist() == ["bedrock", "openai"]
    on_bedrock = row(frame, "Llama 3.1 8B Instruct", "bedrock")
    assert on_bedrock["id called"] == "us.meta.llama3-1-8b-instruct-v1:0"
    assert on_bedrock["prices read"] == "Bedrock price not recorded"


def test_official_short_names_are_shown_and_resolve_to_the_row_model() -> None:
    frame = table11().frame
    names = dict(zip(frame["model"], frame["official name"], strict=False))
    assert names["Claude 3 Sonnet"] == "claude-3-sonnet-v1"
    assert names["Claude 3.5 Sonnet"] == "claude-3-5-sonnet-v2"
    for model, short in names.items():
        assert registry.lookup(short).name == model


def test_prices_and_dates_come_from_the_registry() -> None:
    before = row(table11().frame, "Claude 3 Haiku", "anthropic")
    assert before["input USD/Mtok"] == registry.lookup("Claude Haiku 4.5").price.input
    assert before["prices read"] == registry.PRICES_TAKEN
    cheaper = tuple(
        replace(info, price=registry.Price(0.5, 2.5)) if info.name == "Claude Haiku 4.5" else info
        for info in registry.MODELS
    )
    result = table11(cheaper, prices_taken="2027-01-01")
    after = row(result.frame, "Claude 3 Haiku", "anthropic")
    prices = (after["input USD/Mtok"], after["output USD/Mtok"], after["prices read"])
    assert prices == (0.5, 2.5, "2027-01-01")
    assert "2027-01-01" in result.caption


def test_a_retired_model_without_its_successor_in_the_registry_is_an_error() -> None:
    orphaned = tuple(info for info in registry.MODELS if info.name != "Claude Sonnet 4.5")
    with pytest.raises(ValueError, match="Claude 3 Sonnet is retired on anthropic"):
        table11(orphaned)


def test_unknown_backend_is_named() -> None:
    with pytest.raises(ValueError, match=r"unknown backends \['vertex'\]"):
        table11(backends=("anthropic", "vertex"))


def test_saved_with_the_other_tables(tmp_path) -> None:
    result = table11()
    paths = result.save(tmp_path, OutputId("table", 11, "models"))
    assert paths["csv"].name == "table11_models.csv"
    back = read_table(paths["csv"])
    assert back["id called"].tolist() == result.frame["id called"].tolist()
