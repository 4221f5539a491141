"""Spending limits: one client's (`LLMClient.spending_limit`) and one shared by several clients
(`shared_spending_limit`), checked when a call is about to start."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Protocol

from personalens_utils.llm.budget import BudgetReachedError
from personalens_utils.llm.ledger import Ledger
from personalens_utils.llm.options import check_limit


class Spending:
    """A client's spending limit: its own ceiling (dollars of its ledger) and any budget it shares."""

    def __init__(self, ledger: Ledger, max_cost_usd: float | None):
        self.ledger = ledger
        self.ceiling = check_limit(max_cost_usd)
        self.shared: SharedBudget | None = None
        self.refused = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def limit(self, max_cost_usd: float | None) -> Iterator[None]:
        """Refuse new calls in the block once `max_cost_usd` more has been spent; the tighter of two
        nested limits wins."""
        limit = check_limit(max_cost_usd)
        previous = self.ceiling
        if limit is not None:
            ceiling = self.ledger.spent + limit
            self.ceiling = ceiling if previous is None else min(previous, ceiling)
        try:
            yield
        finally:
            self.ceiling = previous

    @property
    def reached(self) -> bool:
        ceiling, shared = self.ceiling, self.shared
        if shared is not None and shared.reached:
            return True
        return ceiling is not None and self.ledger.spent >= ceiling

    def refusal(self, what: str) -> BudgetReachedError:
        """The error for a refused call (`what`: e.g. "judge call to anthropic/claude-..."), counted."""
        with self._lock:
            self.refused += 1
        shared = self.shared
        if shared is not None and shared.reached:
            spent_text = f"${shared.spent:.4f} spent by {shared.names}, limit ${shared.limit:.4f}"
        else:
            spent_text = f"${self.ledger.spent:.4f} spent, limit ${self.ceiling:.4f}"
        return BudgetReachedError(
            f"spending limit reached: {spent_text}; refused a new {what}. Finished work is kept; run again "
            "with a higher max_cost_usd to continue."
        )


class Spender(Protocol):
    """What a shared budget reads of a client (`LLMClient` is one)."""

    backend_name: str
    spending: Spending

    def totals(self) -> dict[str, float]: ...


class SharedBudget:
    """One spending limit over several clients: the roles of one stage on their own backends together
    may spend `limit` from the moment it was made."""

    def __init__(self, clients: Sequence[Spender], limit: float):
        self.clients = list({id(c): c for c in clients}.values())
        self.limit = limit
        self._start = [c.totals()["cost_usd"] for c in self.clients]

    @property
    def spent(self) -> float:
        return sum(c.totals()["cost_usd"] - start for c, start in zip(self.clients, self._start, strict=True))

    @property
    def reached(self) -> bool:
        return self.spent >= self.limit

    @property
    def names(self) -> str:
        return " + ".join(c.backend_name for c in self.clients)


@contextlib.contextmanager
def shared_spending_limit(
    clients: Sequence[Spender], max_cost_usd: float | None
) -> Iterator[SharedBudget | None]:
    """Refuse new calls of every client in `clients` once they have together spent `max_cost_usd` more
    (None: no limit); like `LLMClient.spending_limit`, calls in flight finish."""
    limit = check_limit(max_cost_usd)
    if limit is None:
        yield None
        return
    budget = SharedBudget(clients, limit)
    previous = [(c, c.spending.shared) for c in budget.clients]
    for client in budget.clients:
        client.spending.shared = budget
    try:
        yield budget
    finally:
        for client, before in previous:
            client.spending.shared = before
