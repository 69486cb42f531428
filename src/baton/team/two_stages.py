"""A TASK left in two FCoP stages: repaired host-side by rule, or made to need attention.

One path for the two places that meet such a TASK: recovery at start (every one
left by a crash) and an evaluation (one found later). Each repair or refusal is a
``team.recovery`` event naming the documented rule (``docs/coordination.md``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

from baton.events.model import TeamRecovery
from baton.fcop_port.port import FcopPort
from baton.fcop_port.recovery import Unresolved, resolve_two_stages, validate_workspace
from baton.store.journal import Journal

__all__ = ["record_recovery", "repair_two_stages"]

Outcome = Literal["resolved", "needs_attention", "cleaned"]


async def record_recovery(
    journal: Journal,
    task_id: str | None,
    rule: str,
    outcome: Outcome,
    detail: str,
    valid: bool | None,
) -> None:
    """One ``team.recovery`` event (nothing else changes with it)."""
    payload = TeamRecovery(task_id=task_id, rule=rule, outcome=outcome, detail=detail, valid=valid)
    await journal.commit([payload], lambda tx: None)


async def repair_two_stages(
    port: FcopPort,
    journal: Journal,
    task_id: str,
    escalate: Callable[[str, str], Awaitable[None]],
) -> bool:
    """Repair ``task_id`` by rule (then check the workspace), or ``escalate`` it; repaired?"""
    try:
        repair = await asyncio.to_thread(resolve_two_stages, port, task_id)
    except Unresolved as exc:
        await record_recovery(journal, task_id, exc.rule, "needs_attention", exc.detail, None)
        await escalate(task_id, f"left in two FCoP stages: {exc.detail}")
        return False
    verdict = await asyncio.to_thread(validate_workspace, port.root)
    await record_recovery(
        journal, task_id, repair.rule, "resolved", repair.detail, bool(verdict.get("valid"))
    )
    return True
