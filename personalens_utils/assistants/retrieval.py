"""A retrieval assistant: only the past-interaction notes relevant to the request reach the model.

The prompt-based `base+I` assistant is shown every past-interaction summary of the task's domains.
This one splits those summaries into sentences, ranks the sentences by BM25 (`rank_bm25.BM25Okapi`)
against everything the user has said so far, and puts the top `k` (those sharing at least one word
with the request) into its prompt before calling its model. Run it as

    python:personalens_utils.assistants.retrieval:RetrievalAssistant?k=3&model=offline

`model` is the spec of the model it calls (any backend; `offline` is the offline assistant that
uses exactly the context it is given, so offline scores move with what retrieval selected). In a
setting without I it sees no summaries and retrieves nothing; demographics (D) and situation (S)
are passed on as the prompt-based assistant gets them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rank_bm25 import BM25Okapi

from personalens_utils.assistants.python import AssistantLLM, AssistantView
from personalens_utils.prompt_templates import dialogue as P
from personalens_utils.prompt_templates.render import render_fields

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "do", "for", "from", "have", "i",
    "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "please", "so", "that", "the", "their",
    "them", "they", "this", "to", "was", "we", "were", "what", "which", "with", "would", "you", "your",
))
SPEC = "python:personalens_utils.assistants.retrieval:RetrievalAssistant"
"""The spec that names this assistant (options after `?`)."""
RETRIEVED_HEADING = "## Notes from earlier conversations that match this request"


def tokens(text: str) -> list[str]:
    """Lower-case words without common function words: the terms BM25 matches on."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def passages(interactions: Mapping[str, str]) -> list[tuple[str, str]]:
    """(domain, sentence) for every sentence of every summary, in the order given."""
    return [(domain, sentence.strip()) for domain, text in interactions.items()
            for sentence in _SENTENCE.split(text) if sentence.strip()]


class RetrievalAssistant:
    """Top-k BM25 retrieval over past-interaction sentences, then one call to `model`."""

    version = "1"

    def __init__(self, model: str = "offline", k: int | str = 3):
        self.model = model
        self.k = int(k)
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {k!r}")

    def retrieve(self, view: AssistantView) -> dict[str, str]:
        """The top-k sentences of the summaries the view holds, by domain in their original order."""
        found = passages(view.interactions or {})
        query = tokens(" ".join(view.user_messages()))
        if not found or not query:
            return {}
        scores = BM25Okapi([tokens(sentence) or [""] for _, sentence in found]).get_scores(query)
        terms = set(query)
        ranked = sorted((i for i, (_, sentence) in enumerate(found) if terms & set(tokens(sentence))),
                        key=lambda i: (-scores[i], i))
        chosen = sorted(ranked[: self.k])
        out: dict[str, str] = {}
        for i in chosen:
            domain, sentence = found[i]
            out[domain] = f"{out[domain]} {sentence}" if domain in out else sentence
        return out

    def system_prompt(self, view: AssistantView, retrieved: Mapping[str, str]) -> str:
        """The kit's assistant instructions for the view's setting, with the retrieved notes in place of
        the full summaries."""
        parts = [P.ASSISTANT_VANILLA if view.setting.startswith("vanilla") else P.ASSISTANT_BASE]
        sections = []
        if view.demographics is not None:
            sections.append(P.ASSISTANT_DEMOGRAPHICS.format(demographics=render_fields(view.demographics)))
        if retrieved:
            notes = "\n".join(f"- ({domain}) {text}" for domain, text in retrieved.items())
            sections.append(f"{RETRIEVED_HEADING}\n{notes}\n")
        if view.situation is not None:
            sections.append(P.ASSISTANT_SITUATION.format(situation=render_fields(view.situation)))
        if sections:
            parts.append(P.ASSISTANT_CONTEXT_INTRO + "\n".join(sections))
        parts.append(P.ASSISTANT_CLOSING)
        return "\n".join(parts)

    async def reply(self, view: AssistantView, llm: AssistantLLM) -> str:
        retrieved = self.retrieve(view)
        context = {"interactions": retrieved} if view.interactions is not None else {}
        return await llm.complete(self.system_prompt(view, retrieved), context=context)
