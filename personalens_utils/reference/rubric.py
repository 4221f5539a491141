"""The judge's rubric as the paper states it: each dimension's scale, answer label and whose turns it reads.

These are facts every floor may need: the judging stage builds its prompts around them
(`judging.dimensions`), and the run store's columnar copy reads stored answers by their labels
(`runstore.official_reading`) without importing a stage.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    """One judged dimension: its family, scale, the label its score follows, whose turns it reads, and
    whether it scores each turn (the official code never does)."""

    name: str
    family: str
    low: int
    high: int
    label: str
    speaker: str | None = None
    turn_level: bool = False


TASK_COMPLETION = "task_completion"


def _quality(family: str, speaker: str) -> Scale:
    label = "Naturalness Score:" if family == "naturalness" else "Coherence Score:"
    return Scale(f"{family}_{speaker}", family, 1, 5, label, speaker)


SCALES: dict[str, Scale] = {
    scale.name: scale
    for scale in (
        Scale(TASK_COMPLETION, TASK_COMPLETION, 0, 1, "VERDICT:"),
        Scale("personalization", "personalization", 1, 4, "Personalization Score:"),
        _quality("naturalness", "assistant"),
        _quality("naturalness", "user"),
        _quality("coherence", "assistant"),
        _quality("coherence", "user"),
        Scale("turn_personalization", "personalization", 1, 4, "Personalization Score:", turn_level=True),
    )
}
"""Every dimension the kit judges, in the order tables list them."""
