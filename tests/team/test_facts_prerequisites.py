"""A prerequisite whose REPORT cannot be read right now makes its dependent wait, not fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from baton.fcop_errors import InvalidEnvelope
from baton.fcop_port.records import TaskInfo
from baton.team.facts import FactSource
from baton.workflow.ordering import Ready, Waiting, gate


def _task(task_id: str, stage: str, **kw: Any) -> TaskInfo:
    return TaskInfo(
        task_id=task_id,
        subject=task_id,
        sender="PM",
        recipient="QA",
        stage=stage,
        body="",
        parent="TASK-parent",
        path=Path(f"{task_id}.md"),
        **kw,
    )


class _Port:
    """Fault injection: the sibling's REPORT head raises as fcop does for a TASK caught
    between two stages by a crash (``RELATION_INVALID``)."""

    def __init__(self, broken: bool) -> None:
        self.broken = broken

    def children(self, parent: str) -> list[TaskInfo]:
        return [_task("TASK-first", "done", attempt_id="a1")]

    def find_report_head(self, task_id: str, attempt_id: str) -> Any:
        if self.broken:
            raise InvalidEnvelope("Invalid strong TASK relation", code="RELATION_INVALID")

        class Head:
            result = "done"

        return Head()


def _gate(broken: bool) -> object:
    facts = FactSource(_Port(broken), None, None)  # type: ignore[arg-type]
    info = _task("TASK-second", "inbox", references=("TASK-first",))
    return gate(facts.prerequisites(info))


def test_an_unreadable_prerequisite_waits() -> None:
    verdict = _gate(broken=True)
    assert isinstance(verdict, Waiting) and verdict.waiting_for == ("TASK-first",)


def test_the_same_prerequisite_readable_is_ready() -> None:
    assert isinstance(_gate(broken=False), Ready)
