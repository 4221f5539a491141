"""Is the number right? Checks of a PersonaLens number against what it claims to measure (docs/validity.md).

- `anchored`: human-anchored estimates: the judge's scores on every dialogue corrected by human
  ratings of a random sample (prediction-powered inference), a synthetic annotator for offline runs,
  and a planner of how many labels an interval width needs. Imported by name
  (`from personalens_utils.validity import anchored`): `ppi_py` takes seconds to import.
- `blame`: who caused each failure (the assistant, the user agent, the judge, or nobody), by a reviewer.
- `tasks`: which tasks measure personalization at all (the gap between a blind and a full-context assistant).
- `people`: a person as the user (the simulation loop drives a `Person` in place of the user agent) and
  the fidelity table comparing people's dialogues with the simulator's.
"""

from personalens_utils.validity.blame import (
    BlameConfig,
    BlameError,
    ReviewerIsJudge,
    blame_frame,
    blame_rates,
    resimulate_user_faults,
    run_blame,
    table3_without_user_faults,
)
from personalens_utils.validity.people import (
    HUMAN,
    FidelityError,
    Person,
    PersonDialogue,
    PersonError,
    fidelity_frame,
    fidelity_table,
    start_dialogue,
)
from personalens_utils.validity.tasks import (
    OFFLINE_BLIND,
    OFFLINE_FULL,
    Arm,
    TaskAuditError,
    flagged_units,
    table3_on_measuring_tasks,
    task_audit_table,
    task_audit_unavailable,
    task_gaps,
)

__all__ = [
    "HUMAN",
    "OFFLINE_BLIND",
    "OFFLINE_FULL",
    "Arm",
    "BlameConfig",
    "BlameError",
    "FidelityError",
    "Person",
    "PersonDialogue",
    "PersonError",
    "ReviewerIsJudge",
    "TaskAuditError",
    "blame_frame",
    "blame_rates",
    "fidelity_frame",
    "fidelity_table",
    "flagged_units",
    "resimulate_user_faults",
    "run_blame",
    "start_dialogue",
    "table3_on_measuring_tasks",
    "table3_without_user_faults",
    "task_audit_table",
    "task_audit_unavailable",
    "task_gaps",
]
