"""The order `make test` (`pytest -n 2 --dist loadgroup`) hands work to its workers.

The journeys (tests/journeys/) are a chain of whole commands on the official data that takes most of the
suite's time on one worker; started late, it alone would decide when the suite ends. xdist's loadgroup
scheduler hands out groups largest first, so a bigger group would go ahead of it and the journeys would
start behind it. `JourneysFirst` hands the journeys' group out first; xdist then gives that worker
nothing more until the group is nearly done, and the other worker runs the rest of the suite.
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController


class JourneysFirst(LoadGroupScheduling):
    """loadgroup scheduling with one group handed out before every other unit of work."""

    first = "journeys"
    """The group (`conftest.JOURNEYS`)."""

    def _assign_work_unit(self, node: WorkerController) -> None:
        if self.first in self.workqueue:
            self.workqueue.move_to_end(self.first, last=False)
        super()._assign_work_unit(node)
