"""The team's budgets: where a TASK's scopes stand, and waking what they held back.

:class:`TeamBudgets` reads, inside a fact-gathering read, the spend and effective
limits of the scopes a TASK's next turn would be charged to: its task tree, its role,
the ``baton up`` run and the role's credential window (``baton.budgets``), the same
scopes the role session's meter checks, from the same stored ledger; so a turn the
meter cancelled or refused is a TASK ``next_step`` parks, and a crash between the
spend that crossed a limit and the cancel still parks it after recovery.

:class:`BudgetWakeups` is the loop's collaborator for what budgets hold back: a raise
(``baton budget raise``, any process: the store's ``budget`` topic) and a window that
lets work go on again (a timer at the time it reopens, then ``budget.window_reset``)
both re-evaluate the parked and deferred TASKs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from baton.budgets.limits import BudgetConfig
from baton.budgets.rules import Breach, ScopeKey, Standing, window_reopens_at
from baton.events.model import BudgetWindowReset
from baton.store import budget_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx

__all__ = ["BudgetWakeups", "TeamBudgets"]

log = logging.getLogger("baton.team.budgets")


@dataclass(frozen=True, slots=True)
class TeamBudgets:
    """``[budget]`` as the team loop applies it (see the module)."""

    config: BudgetConfig
    run_id: str
    credentials: Mapping[str, str] = field(default_factory=dict)
    """Role → the credential key its profile's sessions spend (their window)."""
    clock: Callable[[], float] = time.time

    def scopes(self, tree: str | None, role: str | None) -> list[ScopeKey]:
        config = self.config
        scopes: list[ScopeKey] = []
        if config.per_run:
            scopes.append(ScopeKey("run", self.run_id))
        if config.per_task and tree:
            scopes.append(ScopeKey("task", tree))
        if config.per_role and role:
            scopes.append(ScopeKey("role", role))
        credential = self.credentials.get(role or "")
        if config.per_window and config.window is not None and credential:
            scopes.append(ScopeKey("window", credential))
        return scopes

    def standing(self, tx: Tx, tree: str | None, role: str | None) -> Standing:
        """The TASK tree's spend and every limit its next turn would meet."""
        scopes = self.scopes(tree, role)
        found = budget_sql.standings(tx, self.config, scopes, self.clock())
        breaches = [b for s in found for b in s.breaches(self.config.soft)]
        breaches.sort(key=lambda b: b.level != "hard")
        spend = budget_sql.spend(tx, ScopeKey("task", tree)) if tree else None
        return Standing(tuple(breaches), spend)

    def reopens_at(self, tx: Tx, breach: Breach) -> float | None:
        """When a window breach lets work go on (below the level it reached); None for a
        scope no clock resets (a raise does)."""
        window = self.config.window
        if breach.scope.kind != "window" or window is None:
            return None
        now = self.clock()
        entries = budget_sql.window_entries(
            tx, breach.scope.key, now - window.seconds, breach.dimension
        )
        below = 1.0 if breach.level == "hard" else self.config.soft
        return window_reopens_at(entries, breach.limit, window.seconds, below)


@dataclass(kw_only=True, eq=False)
class BudgetWakeups:
    """Re-evaluates what budgets hold back when a limit is raised or a window reopens."""

    budgets: TeamBudgets
    store: Store
    journal: Journal
    wake_all: Callable[[], Awaitable[None]]
    wall_clock: Callable[[], float] = time.time
    timers: dict[ScopeKey, asyncio.Task[None]] = field(default_factory=dict, init=False)

    async def listen(self) -> None:
        """Raises from any process (the store's ``budget`` topic) wake the held TASKs."""
        listener = await self.store.listener()
        await listener.on_each_ring(budget_sql.BUDGET_TOPIC, self.wake_all)

    async def held(self, breach: Breach) -> None:
        """A TASK waits on ``breach``: for a window, wake everything when it reopens."""
        if breach.scope.kind != "window" or breach.scope in self.timers:
            return
        at = await self.store.aread(lambda tx: self.budgets.reopens_at(tx, breach))
        if at is None:
            return
        task = asyncio.get_running_loop().create_task(self._reopen(breach, at))
        self.timers[breach.scope] = task
        task.add_done_callback(lambda _t: self.timers.pop(breach.scope, None))

    async def _reopen(self, breach: Breach, at: float) -> None:
        await asyncio.sleep(max(0.0, at - self.wall_clock()))
        window = self.budgets.config.window
        assert window is not None
        scope = breach.scope
        standing = await self.store.aread(
            lambda tx: budget_sql.standings(tx, self.budgets.config, [scope], self.budgets.clock())
        )
        spend = standing[0].spend.get(breach.dimension) if standing else 0.0

        def clear(tx: Tx) -> None:
            budget_sql.clear_marks(tx, scope)

        self.timers.pop(scope, None)  # what the wake-up defers again arms a new timer
        try:
            await self.journal.commit(
                [
                    BudgetWindowReset(
                        scope="window",
                        key=scope.key,
                        dimension=breach.dimension,
                        spend=spend,
                        limit=breach.limit,
                        window=window.label,
                    )
                ],
                clear,
            )
        except Exception:  # the wake-up still happens: what is held is decided again
            log.exception("recording the window reset of %s failed", scope.key)
        await self.wake_all()

    def cancel(self) -> list[asyncio.Task[None]]:
        tasks = list(self.timers.values())
        for task in tasks:
            task.cancel()
        return tasks
