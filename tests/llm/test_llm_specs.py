"""Model specs per role and the one-client-per-backend mapping."""

from __future__ import annotations

import pytest

from personalens_utils.llm import CallKind, Message, Request
from personalens_utils.llm.client import Clients
from personalens_utils.llm.specs import ModelSpec, SpecError


@pytest.mark.parametrize(("text", "backend", "model", "var"), [
    ("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", None),
    ("openai:Qwen/Qwen2.5-7B-Instruct", "openai", "Qwen/Qwen2.5-7B-Instruct", None),
    ("bedrock:anthropic.claude-3-sonnet-20240229-v1:0", "bedrock",
     "anthropic.claude-3-sonnet-20240229-v1:0", None),
    ("offline:Claude 3 Sonnet", "offline", "Claude 3 Sonnet", None),
    ("offline", "offline", "Claude 3 Sonnet", None),
    ("Claude 3 Sonnet", "anthropic", "Claude 3 Sonnet", None),
    ("llama3:8b", "anthropic", "llama3:8b", None),
    (" openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct ", "openai", "Qwen/Qwen2.5-7B-Instruct", "VLLM_URL"),
    ("OpenAI:gpt-4o", "openai", "gpt-4o", None),
])
def test_parse(text: str, backend: str, model: str, var: str | None) -> None:
    spec = ModelSpec.parse(text, "anthropic", default_model="Claude 3 Sonnet")
    assert (spec.backend, spec.model, spec.base_url_var) == (backend, model, var)


def test_str_and_client_key() -> None:
    spec = ModelSpec.parse("openai@VLLM_URL:qwen", "offline")
    assert str(spec) == "openai@VLLM_URL:qwen" and spec.client_key == "openai@VLLM_URL"
    assert ModelSpec.parse(str(spec), "offline") == spec
    assert ModelSpec.parse("qwen", "openai").client_key == "openai"


@pytest.mark.parametrize(("text", "message"), [
    ("", "give a model spec"),
    ("anthropic:", "no model after 'anthropic:'"),
    ("offline", "names no model"),
    ("opnai@URL:m", "unknown backend 'opnai'"),
    ("anthropic@URL:m", "only an openai spec"),
    ("openai@http://localhost:8000/v1:qwen", "not the URL"),
    ("openai@MY-URL:qwen", "not the URL"),
])
def test_bad_specs_name_the_parameter(text: str, message: str) -> None:
    with pytest.raises(SpecError, match="assistant_model") as err:
        ModelSpec.parse(text, "offline", what="assistant_model")
    assert message in str(err.value)


def test_unknown_default_backend() -> None:
    with pytest.raises(SpecError, match="unknown default backend 'claude'"):
        ModelSpec.parse("x", "claude")


def test_endpoint_variable_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PL_TEST_URL", raising=False)
    spec = ModelSpec.parse("openai@PL_TEST_URL:qwen", "offline")
    with pytest.raises(SpecError, match="PL_TEST_URL is not set"):
        spec.backend_options()
    monkeypatch.setenv("PL_TEST_URL", "http://127.0.0.1:9/v1")
    clients = Clients("offline")
    try:
        backend = clients.client(spec).backend
        assert backend.base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]
        assert "set by PL_TEST_URL" in backend.endpoint()  # type: ignore[attr-defined]
    finally:
        clients.close()


def test_one_client_per_backend_with_its_own_bound_and_books() -> None:
    clients = Clients("offline", max_concurrency={"offline": 3, "openai@X": 2}, progress=False)
    try:
        user = clients.spec("Claude 3 Sonnet")
        judge = clients.spec("offline:GPT-4o")
        assert clients.client(user) is clients.client(judge)
        assert clients.client(user).max_concurrency == 3
        clients.client(user).complete(Request(CallKind.USER_TURN, (Message("user", "hi"),), model=user.model))
        clients.client(judge).complete(Request(CallKind.ASSISTANT_TURN, (Message("user", "hi"),),
                                               model=judge.model))
        frame = clients.usage_frame()
        assert sorted(frame["role"]) == ["assistant", "user agent"]
        assert set(frame["client"]) == {"offline"} and set(frame["backend"]) == {"offline"}
    finally:
        clients.close()


def test_concurrency_mapping_refuses_unknown_backends() -> None:
    with pytest.raises(SpecError, match="unknown backend"):
        Clients("offline", max_concurrency={"vllm": 4})


def test_empty_usage_frame_has_role_and_backend() -> None:
    frame = Clients("offline").usage_frame()
    assert frame.empty and {"role", "client", "backend", "model", "calls"} <= set(frame.columns)
