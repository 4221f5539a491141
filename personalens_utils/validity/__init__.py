"""Is the number right? Validity checks of a run (docs/validity.md): who caused each failure
(`blame`) and which tasks measure personalization at all (`tasks`)."""

from .blame import (
    BlameConfig,
    BlameError,
    ReviewerIsJudge,
    blame_frame,
    blame_rates,
    run_blame,
    table3_without_user_faults,
)

__all__ = [
    "BlameConfig",
    "BlameError",
    "ReviewerIsJudge",
    "blame_frame",
    "blame_rates",
    "run_blame",
    "table3_without_user_faults",
]
