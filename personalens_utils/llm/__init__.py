"""The one door to language models: request/response types, the client and its backends."""

from .types import (
    CallKind,
    ChatModel,
    FatalError,
    LLMError,
    Message,
    Request,
    Response,
    RetryableError,
    Usage,
)

__all__ = [
    "CallKind",
    "ChatModel",
    "FatalError",
    "LLMError",
    "Message",
    "Request",
    "Response",
    "RetryableError",
    "Usage",
]
