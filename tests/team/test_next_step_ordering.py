"""The ordering gate as a fact of :func:`baton.team.next_step.next_step` (pure, no I/O)."""

from __future__ import annotations

import pytest

from baton.team import steps
from baton.team.next_step import ChildView, Facts, FcopTask, TeamRules, next_step
from baton.team.records import TaskRecord
from baton.team.states import TASK, IllegalTeamTransition, TaskEvent, TaskState
from baton.workflow.ordering import Prerequisite

POLICY = TeamRules(
    human="ADMIN", leader="PM", child_acceptance="on_consolidation", turn_limit=8, reminder_turns=1
)


def facts(*prerequisites: Prerequisite, own_slot: bool = True) -> Facts:
    task = FcopTask("TASK-qa", "inbox", sender="PM", recipient="QA", subject="check", parent="P")
    record = TaskRecord(
        task_id="TASK-qa", role="QA", state=TaskState.SEEN, created_at="t", updated_at="t"
    )
    return Facts(
        task=task,
        record=record,
        role="QA",
        slot_role="QA" if own_slot else None,
        prerequisites=prerequisites,
    )


def test_a_task_whose_sibling_has_not_finished_waits_unclaimed() -> None:
    step = next_step(facts(Prerequisite("TASK-dev", "DEV", "active", None)), POLICY)
    assert step == steps.Note(TaskState.WAITING_PREREQUISITES, "after TASK-dev")


@pytest.mark.parametrize("own_slot", [True, False])
def test_a_task_whose_siblings_are_done_is_claimed_or_queued(own_slot: bool) -> None:
    done = Prerequisite("TASK-dev", "DEV", "review", "done")
    step = next_step(facts(done, own_slot=own_slot), POLICY)
    assert step == (steps.Claim() if own_slot else steps.Queue("QA"))


def test_a_task_whose_sibling_failed_is_not_run_with_the_reason() -> None:
    step = next_step(facts(Prerequisite("TASK-dev", "DEV", "review", "blocked")), POLICY)
    assert isinstance(step, steps.NotRun)
    assert step.reasons == ("TASK-dev (DEV) reported 'blocked'",)


def test_explicit_acceptance_waits_for_the_sibling_to_be_accepted() -> None:
    explicit = TeamRules(
        human="ADMIN", leader="PM", child_acceptance="explicit", turn_limit=8, reminder_turns=1
    )
    reported = Prerequisite("TASK-dev", "DEV", "review", "done")
    assert isinstance(next_step(facts(reported), explicit), steps.Note)
    accepted = Prerequisite("TASK-dev", "DEV", "done", "done")
    assert next_step(facts(accepted), explicit) == steps.Claim()


def test_the_waiting_state_is_in_the_task_table() -> None:
    waiting = TASK.next(TaskState.SEEN, TaskEvent.WAIT_PREREQUISITES)
    assert waiting is TaskState.WAITING_PREREQUISITES
    assert TASK.next(waiting, TaskEvent.CLAIM) is TaskState.CLAIMED
    assert TASK.next(waiting, TaskEvent.ATTENTION) is TaskState.NEEDS_ATTENTION
    with pytest.raises(IllegalTeamTransition):
        TASK.next(waiting, TaskEvent.DISPATCH)  # never prompted before it is claimed
    with pytest.raises(IllegalTeamTransition):
        TASK.next(TaskState.CLAIMED, TaskEvent.WAIT_PREREQUISITES)


def _leader(*children: ChildView) -> Facts:
    from baton.team.records import TurnRecord
    from baton.team.states import DispatchState

    task = FcopTask(
        "TASK-pm", "active", sender="ADMIN", recipient="PM", subject="s", attempt_id="a"
    )
    record = TaskRecord(
        task_id="TASK-pm", role="PM", state=TaskState.TURN_FINISHED, created_at="t", updated_at="t"
    )
    turn = TurnRecord(
        task_id="TASK-pm",
        dispatch=1,
        slot="PM",
        role="PM",
        kind="work",
        state=DispatchState.FINISHED,
        started_at="t",
        attempt_id="a",
        outcome="completed",
    )
    return Facts(
        task=task, record=record, role="PM", slot_role="PM", children=children, last_turn=turn
    )


def test_a_lost_child_result_needs_a_human_instead_of_a_consolidation() -> None:
    """Issue 30 item 4: nothing is made up for a delegated task without a report."""
    fine = ChildView("TASK-dev", "DEV", "PM", "review", result="done")
    lost = ChildView("TASK-qa", "QA", "PM", "done", result=None)
    assert next_step(_leader(fine), POLICY) == steps.Dispatch("consolidate")
    step = next_step(_leader(fine, lost), POLICY)
    assert isinstance(step, steps.Attention) and "TASK-qa" in step.reason, step
