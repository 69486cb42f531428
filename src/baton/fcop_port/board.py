"""The open tasks as ``baton status`` shows them, read around unsafe files.

``status`` reads every TASK in ``inbox/``, ``active/`` and ``review/`` through
Core. Each file is screened in the parse worker first (without waiting for a
fresh file to settle: showing it is harmless once screened); a file that fails
is listed as unsafe with its reason and never parsed in this process; a file
Core then still refuses is listed too. Nothing here raises for a file's sake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from baton.fcop_errors import CoordinationError, TaskNotFound
from baton.fcop_port.records import Stage, TaskInfo
from baton.intake.limits import DEFAULT_LIMITS, IntakeLimits
from baton.intake.screen import Refused
from baton.intake.sweep import Finding, Sweeper, targets
from baton.intake.worker import ParseWorker, shared_worker

__all__ = ["Board", "TaskReader", "open_tasks"]


class TaskReader(Protocol):
    """What the board needs of the port (``FcopPort`` is one): intake sits below it."""

    @property
    def root(self) -> Path: ...

    def read_task(self, task_id: str) -> TaskInfo: ...


@dataclass(frozen=True, slots=True)
class Board:
    tasks: tuple[TaskInfo, ...]
    unsafe: tuple[Finding, ...]


def open_tasks(
    port: TaskReader,
    stages: Sequence[Stage] = ("inbox", "active", "review"),
    *,
    worker: ParseWorker | None = None,
    limits: IntakeLimits = DEFAULT_LIMITS,
) -> Board:
    """Every readable TASK in ``stages``, and every file that is not."""
    sweeper = Sweeper(
        port.root,
        worker=worker or shared_worker(limits),
        limits=limits,
        stages=stages,
        appends=False,
        require_stable=False,
    )
    report = sweeper.sweep()
    refused = {f.origin for f in report.refused}
    unsafe = list(report.refused)
    tasks: list[TaskInfo] = []
    for target in targets(port.root, stages=stages, appends=False):
        if target.origin in refused or target.expect_id is None:
            continue
        try:
            task = port.read_task(target.expect_id)
        except TaskNotFound:
            continue  # moved on since the listing
        except CoordinationError as exc:
            unsafe.append(
                Finding(target.path, target.origin, Refused("unreadable", str(exc)), target.facts)
            )
            continue
        if task.path == target.path and all(t.task_id != task.task_id for t in tasks):
            tasks.append(task)
    return Board(tuple(tasks), tuple(unsafe))
