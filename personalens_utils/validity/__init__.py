"""Is the number right? Checks of a PersonaLens number against what it claims to measure (docs/validity.md).

- `anchored`: human-anchored estimates: the judge's scores on every dialogue corrected by human
  ratings of a random sample (prediction-powered inference), a synthetic annotator for offline runs,
  and a planner of how many labels an interval width needs. Imported by name
  (`from personalens_utils.validity import anchored`): `ppi_py` takes seconds to import.
- `people`: a person as the user (the simulation loop drives a `Person` in place of the user agent) and
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
