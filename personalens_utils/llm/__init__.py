"""The one door to language models: request/response types, the client and its backends."""

from personalens_utils.llm.backends import make_backend
from personalens_utils.llm.cache import ResponseCache
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.options import ClientOptions
from personalens_utils.llm.types import (
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
