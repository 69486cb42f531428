"""The executor's step table: every step next_step can answer has exactly one handler."""

from __future__ import annotations

import pytest

from baton.team import steps
from baton.team.handlers import HandlerTable, Outcome, Then
from baton.team.handlers.table import step_types
from baton.team.next_step import Facts, FcopTask
from baton.team.slots import Slot
from tests.team.conftest import Team


def test_the_loops_table_handles_every_step_but_wait(team: Team) -> None:
    loop = team.loop(team.factory())
    table = loop.executor.handlers
    assert table.missing() == frozenset()
    assert steps.Wait in step_types() and len(step_types()) == 21


class _Noop:
    async def __call__(self, step: steps.Claim, facts: Facts, slot: Slot | None) -> Outcome:
        return Then.STOP


def test_a_step_without_a_handler_is_named_and_a_second_handler_is_refused() -> None:
    table = HandlerTable()
    table.add(steps.Claim, _Noop())
    assert steps.Settle in table.missing() and steps.Claim not in table.missing()
    with pytest.raises(ValueError, match="Claim has a handler already"):
        table.add(steps.Claim, _Noop())


async def test_performing_a_step_nobody_handles_is_a_bug_not_a_wait() -> None:
    table = HandlerTable()
    task = FcopTask("TASK-1", "done", sender="ADMIN", recipient="QA", subject="s")
    facts = Facts(task=task, record=None, role=None)
    with pytest.raises(AssertionError, match="no handler for Settle"):
        await table.perform(steps.Settle(), facts, None)
