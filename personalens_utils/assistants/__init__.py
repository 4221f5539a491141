"""The assistant under test: one `Assistant` protocol and every kind of it, chosen by spec once.

- `prompted.PromptedAssistant`: a language model on any backend, given the prompt set's request;
- `reference.ReferenceAssistant`: the offline reference assistants of known quality (`ref-*` on offline);
- `python.PythonAssistant`: the user's own class (`python:package.module:Name`), e.g.
  `retrieval.RetrievalAssistant` (BM25 over past-interaction notes, then one call to any model).

`resolve.resolve_assistant(spec, clients)` (or `AssistantSpec.parse(...).make(clients)`) is the one place
that reads an assistant spec; docs/architecture.md, "Add an assistant".
"""

from personalens_utils.assistants.base import Assistant, Pricing
from personalens_utils.assistants.python import AssistantError, AssistantLLM, AssistantView, PythonOptions
from personalens_utils.assistants.resolve import (
    AssistantSpec,
    assistant_on,
    resolve_assistant,
    spec_of,
    stored_name,
)

__all__ = [
    "Assistant",
    "AssistantError",
    "AssistantLLM",
    "AssistantSpec",
    "AssistantView",
    "Pricing",
    "PythonOptions",
    "assistant_on",
    "resolve_assistant",
    "spec_of",
    "stored_name",
]
