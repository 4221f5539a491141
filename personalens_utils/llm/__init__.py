"""The one door to language models: request/response types, the client and its backends."""

from .backends import make_backend
from .cache import ResponseCache
from .client import LLMClient
from .options import ClientOptions
from .types import (
    CallKind,
    ChatModel,
    FatalError,
    LLMError,
    Message,
    PreflightError,
    Request,
    Response,
    RetriesExhaustedError,
    RetryableError,
    Usage,
)

__all__ = [
    "CallKind",
    "ChatModel",
    "ClientOptions",
    "FatalError",
    "LLMClient",
    "LLMError",
    "Message",
    "PreflightError",
    "Request",
    "Response",
    "ResponseCache",
    "RetriesExhaustedError",
    "RetryableError",
    "Usage",
    "make_backend",
]
