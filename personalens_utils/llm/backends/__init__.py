"""Backends by name. SDK-backed ones are imported only when asked for, so the offline path stays light."""

from __future__ import annotations

import importlib
from typing import Any

from personalens_utils.llm.types import ChatModel

BACKENDS: dict[str, tuple[str, str]] = {
    "offline": ("personalens_utils.llm.offline", "OfflineBackend"),
    "anthropic": ("personalens_utils.llm.backends.anthropic", "AnthropicBackend"),
    "openai": ("personalens_utils.llm.backends.openai", "OpenAIBackend"),
    "bedrock": ("personalens_utils.llm.backends.bedrock", "BedrockBackend"),
}


def make_backend(name: str, **kwargs: Any) -> ChatModel:
    """Build the backend called `name` with its keyword options (see each backend's class)."""
    try:
        module_name, class_name = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}") from None
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(**kwargs)
