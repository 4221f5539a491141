"""The order `make test` (`pytest -n 2 --dist loadgroup`) hands work to its workers.

The journeys (tests/journeys/) are a chain of whole commands on the official data that takes most of the
suite's time on one worker; started late, it alone would decide when the suite ends. xdist's loadgroup
scheduler hands out groups largest first, so a bigger group would go ahead of it and the journeys would
start behind it. `JourneysFirst` hands the journeys' group out first; xdist then gives that worker
nothing more until the group is nearly done, and the other worker runs the rest of the suite.

Next come the groups named `slow:...` (the test files holding a test marked slow, as tests/conftest.py
names them), biggest first, then the others as xdist orders them: a file of many quick tests goes
ahead of a file of one 30-second notebook test, and one started last would leave the other workers idle.
"""

from __future__ import annotations

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController


class JourneysFirst(LoadGroupScheduling):
    """loadgroup scheduling with one group handed out before every other unit of work."""

    first = "journeys"
    """The group (`conftest.JOURNEYS`)."""
    slow = "slow:"
    """How the names of the groups that go next begin."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self._ordered = False

    def _assign_work_unit(self, node: WorkerController) -> None:
        if not self._ordered:
            for group in reversed([group for group in self.workqueue if group.startswith(self.slow)]):
                self.workqueue.move_to_end(group, last=False)
            self._ordered = True
        if self.first in self.workqueue:
            self.workqueue.move_to_end(self.first, last=False)
        super()._assign_work_unit(node)
