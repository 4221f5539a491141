"""Model names resolve to each backend's id, retired models to a named successor with a reason;
prices follow Anthropic's cache and batch multipliers."""

from __future__ import annotations

import ast

import pytest
from support.source_trees import source_tree

from personalens_utils.llm import FatalError, Usage, registry


@pytest.mark.parametrize(
    ("name", "backend", "expected"),
    [
        ("Claude 3 Sonnet", "offline", "claude-3-sonnet-20240229"),
        ("claude-3-sonnet", "offline", "claude-3-sonnet-20240229"),
        ("claude-3.5-sonnet", "offline", "claude-3-5-sonnet-20241022"),
        ("Claude 3.5 Haiku", "bedrock", "us.anthropic.claude-3-5-haiku-20241022-v1:0"),
        ("claude-3-haiku-20240307", "bedrock", "anthropic.claude-3-haiku-20240307-v1:0"),
        ("claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5-20250929"),
        ("claude-haiku-4-5", "bedrock", "us.anthropic.claude-haiku-4-5-20251001-v1:0"),
        ("claude-opus-4-5", "anthropic", "claude-opus-4-5-20251101"),
        ("Claude 3 Sonnet", "anthropic", "claude-sonnet-4-5-20250929"),
        ("claude-3-5-sonnet-20241022", "bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ("Claude 3 Haiku", "anthropic", "claude-haiku-4-5-20251001"),
        ("claude-opus-4-1", "anthropic", "claude-opus-4-5-20251101"),
        ("Llama 3.1 70B Instruct", "openai", "meta-llama/Llama-3.1-70B-Instruct"),
        ("llama3-1-8b-instruct", "openai", "meta-llama/Llama-3.1-8B-Instruct"),
        ("Mixtral 8x7B Instruct", "openai", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
        ("mistral-7b-instruct-v0.2", "openai", "mistralai/Mistral-7B-Instruct-v0.2"),
    ],
)
def test_names_resolve_per_backend(name: str, backend: str, expected: str) -> None:
    assert registry.resolve(name, backend) == expected


def test_unknown_ids_pass_through_unchanged() -> None:
    assert registry.resolve("qwen2.5:7b-instruct", "openai") == "qwen2.5:7b-instruct"
    assert registry.resolve("us.anthropic.claude-x-v1:0", "bedrock") == "us.anthropic.claude-x-v1:0"
    assert registry.resolve("", "anthropic") == ""


def test_current_model_resolves_without_substitution() -> None:
    found = registry.resolve_model("Claude Sonnet 4.5", "anthropic")
    assert (found.model_id, found.name, found.successor, found.reason) == (
        "claude-sonnet-4-5-20250929", "Claude Sonnet 4.5", None, ""
    )
    assert found.describe("judge") == "judge: anthropic:claude-sonnet-4-5-20250929 (Claude Sonnet 4.5)"


def test_retired_paper_model_names_its_successor_and_why() -> None:
    found = registry.resolve_model("Claude 3 Sonnet", "anthropic")
    assert found.model_id == "claude-sonnet-4-5-20250929"
    assert (found.name, found.successor) == ("Claude 3 Sonnet", "Claude Sonnet 4.5")
    assert "retired on the Anthropic API on 2025-07-21" in found.reason
    assert "successor Claude Sonnet 4.5" in found.reason and "\n" not in found.reason
    line = found.describe("user agent")
    assert line.startswith("user agent: anthropic:claude-sonnet-4-5-20250929 (Claude Sonnet 4.5) - ")
    assert "Claude 3 Sonnet was retired" in line


def test_offline_backend_never_substitutes() -> None:
    found = registry.resolve_model("Claude 3 Sonnet", "offline")
    assert (found.model_id, found.successor, found.reason) == ("claude-3-sonnet-20240229", None, "")


def test_every_retired_model_has_a_successor_that_is_not_retired_there() -> None:
    for info in registry.MODELS:
        for backend in info.retired:
            successor = registry.lookup(info.successor)
            assert successor is not None, info.name
            assert backend in successor.ids and backend not in successor.retired, (info.name, backend)


def test_unknown_model_name_is_an_error_listing_the_known_names() -> None:
    with pytest.raises(FatalError, match="unknown model name 'Claude 3 Sonet'") as caught:
        registry.resolve_model("Claude 3 Sonet", "anthropic")
    assert "Claude 3 Sonnet" in str(caught.value) and "Claude Haiku 4.5" in str(caught.value)


def test_role_lines_name_each_role() -> None:
    lines = registry.role_lines({"user agent": "Claude 3 Sonnet", "assistant": "my-model"}, "openai")
    assert lines[0].startswith("user agent: openai:claude-sonnet-4-5-20250929 (Claude Sonnet 4.5) - ")
    assert lines[1] == "assistant: openai:my-model"


def test_a_model_without_an_id_on_a_backend_says_where_it_is_available() -> None:
    with pytest.raises(FatalError, match="no id for the 'bedrock' backend; it is available on: anthropic"):
        registry.resolve("Claude Opus 5", "bedrock")


# The official code's short names and Bedrock ids (its model_id_reverse_dict, read from the archive in
# test_official_short_names_match_the_official_code below) and the paper's prose names.
OFFICIAL = {
    "claude-3-sonnet-v1": "Claude 3 Sonnet",
    "claude-3-haiku-v1": "Claude 3 Haiku",
    "claude-3-5-haiku-v1": "Claude 3.5 Haiku",
    "claude-3-5-sonnet-v2": "Claude 3.5 Sonnet",
    "llama-3-1-8b-instruct-v1": "Llama 3.1 8B Instruct",
    "llama-3-1-70b-instruct-v1": "Llama 3.1 70B Instruct",
    "mistral-7b-instruct-v2": "Mistral 7B Instruct",
    "mixtral-8x7b-instruct-v1": "Mixtral 8x7B Instruct",
}


@pytest.mark.parametrize(("short", "name"), OFFICIAL.items())
def test_official_short_names_are_the_papers_models(short: str, name: str) -> None:
    assert registry.same_model(short, name)
    assert registry.official_name(name) == short
    assert registry.resolve(short, "offline") == registry.resolve(name, "offline")


def _official_bedrock_ids(official_code) -> dict[str, str]:
    """Every short name -> Bedrock id pair the official scripts map, in either direction."""
    pairs: dict[str, str] = {}
    for source in sorted(official_code.rglob("*.py")):
        for node in ast.walk(source_tree(source)):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                target = getattr(node.targets[0], "id", "")
                if target not in ("model_id_dict", "model_id_reverse_dict"):
                    continue
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    short, bedrock = (value.value, key.value) if target == "model_id_dict" else (
                        key.value, value.value)
                    pairs.setdefault(short, bedrock)
    return pairs


def test_official_short_names_match_the_official_code(official_code) -> None:
    pairs = _official_bedrock_ids(official_code)
    assert len(pairs) >= 13 and set(OFFICIAL) <= set(pairs)
    for short, bedrock_id in pairs.items():
        info = registry.lookup(short)
        assert info is not None, short
        assert info.official_name == short
        assert registry.lookup(bedrock_id) is info, (short, bedrock_id)


def test_bedrock_ids_are_inference_profiles_where_on_demand_needs_them() -> None:
    profile = {name: registry.is_inference_profile(registry.lookup(name).ids["bedrock"]) for name in (
        "Claude 3 Sonnet", "Claude 3.5 Haiku", "Claude 3.5 Sonnet", "Llama 3.1 8B Instruct",
        "Llama 3.1 70B Instruct", "Mistral 7B Instruct", "Mixtral 8x7B Instruct", "Claude Sonnet 4.5")}
    assert profile == {
        "Claude 3 Sonnet": False, "Claude 3.5 Haiku": True, "Claude 3.5 Sonnet": True,
        "Llama 3.1 8B Instruct": True, "Llama 3.1 70B Instruct": True, "Mistral 7B Instruct": False,
        "Mixtral 8x7B Instruct": False, "Claude Sonnet 4.5": True}
    assert registry.resolve("llama-3-1-8b-instruct-v1", "bedrock") == "us.meta.llama3-1-8b-instruct-v1:0"
    assert registry.resolve("Llama 3.1 8B Instruct", "bedrock") == "us.meta.llama3-1-8b-instruct-v1:0"


def test_a_bedrock_id_given_as_such_is_called_as_written_and_still_known() -> None:
    for given in ("meta.llama3-1-8b-instruct-v1:0", "eu.meta.llama3-1-8b-instruct-v1:0"):
        assert registry.resolve(given, "bedrock") == given
        assert registry.lookup(given).name == "Llama 3.1 8B Instruct"
    # a retired model's Bedrock id still gives way to its successor
    assert registry.resolve("anthropic.claude-3-sonnet-20240229-v1:0", "bedrock") == registry.resolve(
        "Claude Sonnet 4.5", "bedrock")
    assert registry.price_for("us.anthropic.claude-3-5-haiku-20241022-v1:0") == registry.price_for(
        "Claude 3.5 Haiku")


def test_cost_uses_cache_multipliers_and_batch_discount() -> None:
    usage = Usage(
        input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000, cache_write_tokens=0
    )
    # Sonnet 4.5: $3 in, $15 out, cache read 0.1 x input.
    assert registry.cost_usd("claude-sonnet-4-5", usage) == pytest.approx(3 + 15 + 0.3)
    assert registry.cost_usd("claude-sonnet-4-5", usage, batch=True) == pytest.approx((3 + 15 + 0.3) / 2)
    writes = Usage(cache_write_tokens=2_000_000)
    assert registry.cost_usd("Claude 3.5 Haiku", writes) == pytest.approx(2 * 0.80 * 1.25)
    # A model row with its own cache-read price overrides the multiplier.
    assert registry.cost_usd("claude-3-haiku", Usage(cache_read_tokens=1_000_000)) == pytest.approx(0.03)


def test_unpriced_models_return_none() -> None:
    assert registry.cost_usd("meta-llama/Llama-3.1-8B-Instruct", Usage(1000, 1000)) is None
    assert registry.cost_usd("some-local-model", Usage(1000, 1000)) is None


def test_temperature_support_flags() -> None:
    assert registry.honours_temperature("claude-3-sonnet")
    assert registry.honours_temperature("claude-sonnet-4-5")
    assert not registry.honours_temperature("claude-opus-4-8")
    assert registry.honours_temperature("an-unknown-model")


def test_prices_carry_the_date_they_were_taken() -> None:
    assert registry.PRICES_TAKEN.count("-") == 2
