"""Is the number right? Checks of the benchmark's validity (docs/validity.md).

`people`: a person as the user (the simulation loop drives a `Person` in place of the user agent) and
the fidelity table comparing people's dialogues with the simulator's.
"""

from .people import (
    HUMAN,
    FidelityError,
    Person,
    PersonDialogue,
    PersonError,
    fidelity_frame,
    fidelity_table,
    start_dialogue,
)

__all__ = [
    "HUMAN",
    "FidelityError",
    "Person",
    "PersonDialogue",
    "PersonError",
    "fidelity_frame",
    "fidelity_table",
    "start_dialogue",
]
