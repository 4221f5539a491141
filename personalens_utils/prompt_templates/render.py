"""Profile material as prompt text: the one place every stage renders users and dialogues from.

Templates live beside this module (one per stage); this module turns the structured pieces they are
filled with (demographics, preferences, past interactions, the situation, the dialogue so far) into
text. Where two stages render the same material differently, both forms are here under names that
say how they differ: changing a form changes that stage's prompts, so bump its prompt version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from personalens_utils.prompt_templates.dialogue import EMPTY_CLOSING, HISTORY_LINE
from personalens_utils.reference.demographics import FIELDS
from personalens_utils.reference.situation import SITUATION_FIELDS


def _joined(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _readable(key: str) -> str:
    return SITUATION_FIELDS.get(key) or key.replace("_", " ").capitalize()


def render_fields(values: Mapping[str, Any]) -> str:
    """One "- Label: value" line per key (keys made readable); the dialogue prompts' form."""
    return "\n".join(f"- {_readable(k)}: {_joined(v)}" for k, v in values.items()) or "- (none)"


def render_fields_as_keyed(values: Mapping[str, Any]) -> str:
    """One "- key: value" line per key, keys as stored (situation keys by their label); the judge's form."""
    if not values:
        return "(none)"
    return "\n".join(f"- {SITUATION_FIELDS.get(key, key)}: {_joined(v)}" for key, v in values.items())


def render_demographics(demographics: Mapping[str, str]) -> str:
    """The generation prompts' profile: every demographic field in schema order, the user id first.

    The id makes two people with identical demographics get distinct prompts (and cache entries).
    """
    fields = ("user_id", *FIELDS) if "user_id" in demographics else FIELDS
    return "\n".join(f"- {f.replace('_', ' ').capitalize()}: {demographics[f]}" for f in fields)


def render_preferences(preferences: Mapping[str, Mapping[str, Any]]) -> str:
    """Preferences under one heading per domain, one line each; the dialogue and judge prompts' form."""
    blocks = [f"{domain}:\n{render_fields(prefs)}" for domain, prefs in preferences.items()]
    return "\n\n".join(blocks) or "(none)"


def render_preferences_nested(preferences: Mapping[str, Mapping[str, Any]]) -> str:
    """Preferences as a nested list, a lone domain unheaded; the generation prompts' form."""
    if len(preferences) == 1:
        (values,) = preferences.values()
        return "\n".join(f"- {name}: {_joined(v)}" for name, v in values.items())
    blocks = []
    for domain, values in preferences.items():
        lines = "\n".join(f"  - {name}: {_joined(v)}" for name, v in values.items())
        blocks.append(f"{domain}:\n{lines}")
    return "\n".join(blocks)


def render_interactions(interactions: Mapping[str, str]) -> str:
    """Past-interaction summaries, headed by domain when there is more than one."""
    if len(interactions) == 1:
        return next(iter(interactions.values()))
    return "\n\n".join(f"{domain}:\n{text}" for domain, text in interactions.items()) or "(none)"


def render_history(turns: Sequence[Mapping[str, str]]) -> str:
    """The dialogue so far, one "SPEAKER: text" line per turn, as the user agent reads it."""
    return "\n".join(HISTORY_LINE.format(speaker=t["role"].upper(), content=t["content"]) for t in turns)


def render_conversation(turns: Sequence[Mapping[str, str]]) -> str:
    """The dialogue as judges and annotators read it: an empty closing message as the assistant saw it."""
    return render_history([{"role": t["role"], "content": t["content"] or EMPTY_CLOSING} for t in turns])
