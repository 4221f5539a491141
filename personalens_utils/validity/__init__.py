"""Is the number right? Validity checks of a run (docs/validity.md): who caused each failure
(`blame`) and which tasks measure personalization at all (`tasks`)."""

from .blame import (
    BlameConfig,
    BlameError,
    ReviewerIsJudge,
    blame_frame,
    blame_rates,
    resimulate_user_faults,
    run_blame,
    table3_without_user_faults,
)
from .tasks import (
    OFFLINE_BLIND,
    OFFLINE_FULL,
    Arm,
    TaskAuditError,
    flagged_units,
    table3_on_measuring_tasks,
    task_audit_table,
    task_gaps,
)

__all__ = [
    "OFFLINE_BLIND",
    "OFFLINE_FULL",
    "Arm",
    "BlameConfig",
    "BlameError",
    "ReviewerIsJudge",
    "TaskAuditError",
    "blame_frame",
    "blame_rates",
    "flagged_units",
    "resimulate_user_faults",
    "run_blame",
    "table3_on_measuring_tasks",
    "table3_without_user_faults",
    "task_audit_table",
    "task_gaps",
]
