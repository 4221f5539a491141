"""Where a model is served, as far as it decides which model answers: part of cache keys and record ids.

An OpenAI-compatible server serves whatever checkpoint its operator loaded under whatever name, so two
servers answering to one model name may be two models: the server's address is part of what a call
reached. OpenAI's own API (the backend's default endpoint) is left out, so do the other backends: an
Anthropic or Bedrock base URL is a gateway to the same provider's models, whose ids already name one
model version, and the offline backend has no address. Those keep the cache keys and ids they always had.

The address is kept without what may hold a secret (user and password, query, fragment), so no key
enters identity or a log line through it.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

OPENAI_URL = "https://api.openai.com/v1"
"""OpenAI's public API: the openai backend's default endpoint."""
SERVED_AT = " at "
"""What joins a model id and its endpoint in a record's model id (`served_id`)."""


def public_url(url: str) -> str:
    """`url` without credentials, query or fragment and without a trailing slash, the host in lower case."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # not a port number: the address as written, for the error it will give
        port = ""
    return urlunsplit((parts.scheme.lower(), host + port, parts.path.rstrip("/"), "", ""))


def openai_endpoint(base_url: str) -> str:
    """The identity of an openai backend's endpoint: "" for OpenAI's public API, else its `public_url`."""
    url = public_url(base_url)
    return "" if url == OPENAI_URL else url


def served_id(model_id: str, endpoint: str) -> str:
    """A record's model id: the id the backend is called with, and where, when the endpoint is identity."""
    return f"{model_id}{SERVED_AT}{endpoint}" if endpoint else model_id
