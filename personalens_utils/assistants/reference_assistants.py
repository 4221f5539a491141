"""Reference assistants of the offline backend: assistants whose quality is known by construction.

Every offline "model" used to answer alike, so tables could not tell a working pipeline from a broken
one. A reference assistant is an offline assistant that fixes what it uses (its `View`), whatever
setting it runs in; each sees strictly more than the one before it, so a sound judge must rank them
in `DESIGNED_ORDER` on personalization and task completion:

- `ref-ignores-context` uses nothing about the user, not even what the user says;
- `ref-dialogue-only` applies only what the user states in the dialogue;
- `ref-past-interactions` also reads preference values off the past-interaction summaries;
- `ref-all-preferences` also knows every relevant preference value of the task and the situation.

On personalization the order is strict. On task completion the first is far below the rest, and
the other three almost always finish (they all apply what the user says), so a sound judge shows
them level or rising, never confidently falling.

`ref-follows-setting` sees exactly what its setting gives, which is what the six-setting ablation
needs. Each sends its view in the request's `view` context entry (`assistants.views`); the wider
view comes from the `oracle` entry (docs/architecture.md), which only the offline backend reads.
"""

from __future__ import annotations

from dataclasses import replace

from personalens_utils.assistants.prompted import PromptedAssistant
from personalens_utils.assistants.views import SETTING_BOUND, View
from personalens_utils.base.stored import BackendName
from personalens_utils.llm import LLMClient, Request
from personalens_utils.llm.specs import ModelSpec

PREFIX = "ref-"
"""Names of reference assistants start with this."""
SETTING_ASSISTANT = "ref-follows-setting"
"""The offline assistant that uses exactly the context it is given (its setting's, or a Python
assistant's selection)."""
FOCUS_ASSISTANT = "ref-past-interactions"
"""The offline assistant of Figures 4, 5 and Table 13 in a reproduction: its per-domain scores vary
with the summaries."""
VIEWS: dict[str, View] = {
    "ref-ignores-context": View(dialogue=False, setting=False),
    "ref-dialogue-only": View(setting=False),
    FOCUS_ASSISTANT: View(setting=False, history=True),
    "ref-all-preferences": View(setting=False, history=True, oracle=True),
    SETTING_ASSISTANT: SETTING_BOUND,
}
DESIGNED_ORDER = ("ref-ignores-context", "ref-dialogue-only", FOCUS_ASSISTANT, "ref-all-preferences")
"""The reference assistants from worst to best on personalization and task completion."""
PAPER_ASSISTANT = "Claude 3 Sonnet"


def default_assistant(backend: BackendName) -> str:
    """The assistant a notebook simulates when none is named: offline, the reference assistant that
    uses exactly its setting's context; elsewhere the paper's assistant."""
    return SETTING_ASSISTANT if backend == "offline" else PAPER_ASSISTANT


def is_reference(model: str) -> bool:
    """Whether `model` names a reference assistant (or claims to, with the prefix)."""
    return model.strip().lower().startswith(PREFIX)


def view_of(model: str) -> View:
    """The view of a reference assistant; a name that is not one sees its setting's context."""
    return VIEWS.get(model.strip().lower(), SETTING_BOUND)


class ReferenceAssistant(PromptedAssistant):
    """An offline reference assistant: the prompt-based request, with its view added for the backend."""

    def __init__(self, client: LLMClient, spec: ModelSpec):
        name = spec.model.strip().lower()
        if name not in VIEWS:
            raise ValueError(f"{spec.model!r} is not a reference assistant; known: {sorted(VIEWS)}")
        super().__init__(client, spec)
        self.view = VIEWS[name]

    def prepared(self, request: Request) -> Request:
        return replace(request, context={**request.context, **self.view.context()})
