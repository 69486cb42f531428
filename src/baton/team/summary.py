"""Where a team run left its TASKs: what ``baton up --until-idle`` reports when it returns."""

from __future__ import annotations

from dataclasses import dataclass

from baton.store import team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.records import RoleRecord, TaskRecord
from baton.team.states import TaskState

__all__ = ["RunSummary", "summarize"]


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Why the loop is idle (or that it was stopped), TASK ids by where they stand."""

    done: tuple[str, ...]
    waiting_human: tuple[str, ...]
    stalled: tuple[str, ...]
    """``needs_attention`` or ``failed``: a human has to look."""
    blocked: tuple[str, ...]
    refused: int
    paused_roles: tuple[str, ...]
    interrupted: tuple[str, ...] = ()
    stopped: bool = False
    """The loop was asked to stop (a signal) before it was idle."""


async def summarize(store: Store, *, now: float, stopped: bool) -> RunSummary:
    """The summary from the store's records (``now``: the wall clock, for paused roles)."""

    def read(tx: Tx) -> tuple[list[TaskRecord], int, list[RoleRecord]]:
        tasks = [TaskRecord.from_row(r) for r in team_sql.all_tasks(tx)]
        return (
            tasks,
            team_sql.count_refusals(tx),
            [RoleRecord.from_row(r) for r in team_sql.all_roles(tx)],
        )

    tasks, refused, roles = await store.aread(read)

    def ids(*states: TaskState) -> tuple[str, ...]:
        return tuple(sorted(t.task_id for t in tasks if t.state in states))

    waiting = {
        t.task_id
        for t in tasks
        if t.state in (TaskState.IN_REVIEW, TaskState.WAITING_HUMAN)
        and (t.state is TaskState.WAITING_HUMAN or t.review_request is not None)
    }
    waiting |= {t.task_id for t in tasks if t.for_human and t.state is TaskState.SEEN}
    return RunSummary(
        done=ids(TaskState.SETTLED),
        waiting_human=tuple(sorted(waiting)),
        stalled=ids(TaskState.NEEDS_ATTENTION, TaskState.FAILED),
        blocked=ids(TaskState.WAITING_CHILDREN, TaskState.WAITING_PREREQUISITES),
        refused=refused,
        paused_roles=tuple(sorted(r.role for r in roles if (r.breaker_until or 0) > now)),
        interrupted=ids(TaskState.INTERRUPTED),
        stopped=stopped,
    )
