"""The kit's own errors, shown as the message they carry instead of a traceback.

Every exception class of the package derives from `KitError`. Its message already names what is
wrong, where, and what to do, so IPython (JupyterLab, papermill) shows that message and one line
saying how to see the traceback; the command line prints it once and exits with code 1. The full
traceback stays one flag away: `%xmode Verbose` in the notebook, or `PERSONALENS_TRACEBACK=1` in the
environment (of JupyterLab, papermill or the command).
"""

from __future__ import annotations

import os

FULL_TRACEBACK_VARIABLE = "PERSONALENS_TRACEBACK"
HOW_TO_SEE_THE_TRACEBACK = (
    f"(the full traceback: run `%xmode Verbose` and the cell again, or set {FULL_TRACEBACK_VARIABLE}=1)"
)


def full_traceback_wanted() -> bool:
    """Whether the user asked for full tracebacks of the kit's errors in the environment."""
    return os.environ.get(FULL_TRACEBACK_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


class KitError(Exception):
    """An error the kit raises on purpose; its message says what to fix."""

    says_all = False
    """True when the message is all there is to know (no hint about the traceback is shown)."""

    def short(self) -> str:
        """The error as one message: its type and what it says."""
        return f"{type(self).__name__}: {self}"

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback, unless the user asked for the full one."""
        from IPython import get_ipython  # only IPython calls this method

        shell = get_ipython()
        if shell is not None and (full_traceback_wanted() or shell.InteractiveTB.mode == "Verbose"):
            return list(shell.InteractiveTB.structured_traceback(type(self), self, self.__traceback__))
        return [self.short()] if self.says_all else [self.short(), HOW_TO_SEE_THE_TRACEBACK]
