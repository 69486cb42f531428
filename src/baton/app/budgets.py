"""Budgets as the surfaces use them: where every scope stands, and a human's raise.

``baton budget`` (the command line) and the dashboard both read :func:`budget_report`
and raise through :func:`raise_limits`: the raised limits and their ``budget.raised``
events are committed in one transaction (a run of kind ``budget`` carries the events),
and the store's ``budget`` topic wakes a running ``baton up``, which lets the TASKs
the old limit parked go on.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from baton.budgets.limits import (
    SCOPE_TABLES,
    SCOPES,
    BudgetConfig,
    Limits,
    ScopeKind,
    format_amount,
)
from baton.budgets.rules import ScopeKey, ScopeStanding
from baton.errors import ConfigError
from baton.events.model import BudgetRaised, Payload
from baton.events.sequencer import utc_now
from baton.store import budget_sql
from baton.store.store import Store
from baton.store.tx import Tx

__all__ = ["BudgetReport", "Commit", "budget_report", "raise_limits", "task_spend"]

Commit = Callable[[Sequence[Payload], Callable[[Tx], None]], Awaitable[None]]
"""A journal's commit: the change and its events in one transaction."""


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """Every scope that spent something or has a limit, against its effective limits."""

    config: BudgetConfig
    standings: tuple[ScopeStanding, ...]

    def of(self, kind: ScopeKind) -> list[ScopeStanding]:
        return [s for s in self.standings if s.scope.kind == kind]

    def to_json(self) -> dict[str, object]:
        config = self.config
        return {
            "soft": config.soft,
            "window": config.window.label if config.window else None,
            "limits": {
                SCOPE_TABLES[k]: dict(config.limits(k).items()) for k in SCOPES if config.limits(k)
            },
            "scopes": [s.to_json(config.soft) for s in self.standings],
        }


def budget_report(
    store: Store, config: BudgetConfig, *, runs: int = 10, now: float | None = None
) -> BudgetReport:
    """Task trees, roles, credentials' windows and the latest ``runs`` runs, with spend."""
    moment = time.time() if now is None else now

    def read(tx: Tx) -> tuple[ScopeStanding, ...]:
        keys: list[ScopeKey] = []
        for kind in ("task", "role"):
            keys += [ScopeKey(kind, key) for key in sorted(budget_sql.spend_by(tx, kind))]
        if config.window is not None:
            since = moment - config.window.seconds
            keys += [ScopeKey("window", key) for key in budget_sql.active_credentials(tx, since)]
        keys += [ScopeKey("run", key) for key in budget_sql.latest_runs(tx, runs)]
        return tuple(budget_sql.standings(tx, config, keys, moment, every=True))

    return BudgetReport(config, store.read_tx(read))


async def raise_limits(
    store: Store,
    config: BudgetConfig,
    scope: ScopeKey,
    limits: Limits,
    *,
    by: str,
    commit: Commit,
) -> list[BudgetRaised]:
    """Raise ``scope``'s limits to ``limits`` (each above the limit in force), one
    transaction with its ``budget.raised`` events; raises :class:`ConfigError` (exit 2)
    for a value that would not raise anything."""
    if not limits:
        raise ConfigError("name at least one limit to raise (--cost-usd, --tokens, …)")
    configured = config.limits(scope.kind)

    def current(tx: Tx) -> tuple[Mapping[str, float], ScopeStanding | None]:
        found = budget_sql.standings(tx, config, [scope], time.time(), every=True)
        return budget_sql.raised(tx, scope), (found[0] if found else None)

    raised, standing = store.read_tx(current)
    payloads = []
    for dimension, value in limits.items():
        previous = raised.get(dimension, configured.get(dimension))
        if previous is None:
            raise ConfigError(
                f"{SCOPE_TABLES[scope.kind]} has no {dimension} limit to raise; "
                f"set one in [budget] {SCOPE_TABLES[scope.kind]} in baton.toml"
            )
        if value <= previous:
            raise ConfigError(
                f"{dimension} {format_amount(dimension, value)} would not raise "
                f"{scope}'s limit of {format_amount(dimension, previous)}; give a higher value"
            )
        spend = standing.spend.get(dimension) if standing is not None else 0.0
        payloads.append(
            BudgetRaised(
                scope=scope.kind,
                key=scope.key,
                dimension=dimension,
                spend=spend,
                limit=value,
                previous=previous,
                by=by,
            )
        )

    def write(tx: Tx) -> None:
        at = utc_now()
        for payload in payloads:
            budget_sql.raise_limit(
                tx, scope, payload.dimension, payload.limit, payload.previous, at, by
            )

    await commit(payloads, write)
    return payloads


def task_spend(store: Store, config: BudgetConfig, task_id: str) -> dict[str, object]:
    """What one TASK spent, and its tree against ``per_task`` (``task show``, the review)."""
    from baton.store import team_sql
    from baton.team.facts import tree_root
    from baton.team.records import TaskRecord

    def read(tx: Tx) -> dict[str, object]:
        row = team_sql.TASKS.get(tx, task_id)
        record = TaskRecord.from_row(row) if row is not None else None
        tree = tree_root(tx, task_id, record)
        own = budget_sql.spend_by(tx, "task_id", [task_id]).get(task_id)
        [standing] = budget_sql.standings(tx, config, [ScopeKey("task", tree)], time.time())
        return {
            "spend": own.to_json() if own is not None else None,
            "tree": standing.to_json(config.soft),
        }

    return store.read_tx(read)
