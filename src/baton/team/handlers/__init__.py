"""The executor's step handlers: one per kind of :mod:`~baton.team.steps` step, in a table.

Each handler is a small frozen object built with exactly the collaborators it uses
(the FCoP port, the task book, the escalations, the turn runner, the ledger...),
never a base class; :func:`handler_table` is the one place that pairs each step
type with its handler. Modules, by what they do to a TASK:

- :mod:`.flow`: note a state, queue the TASK for a role, wake a parent;
- :mod:`.claim`: claim it (T2), or claim one that can never run and report why;
- :mod:`.dispatch`: a turn for the slot evaluating it;
- :mod:`.submit`: submit its report (T3), accepting consolidated children (T4);
- :mod:`.review`: open the human's review request with the document they read;
- :mod:`.decisions`: apply the human's or a role's review decision (T4/T5);
- :mod:`.settle`: settle it when FCoP says done;
- :mod:`.escalate`: needs attention / failed, and the human's retry;
- :mod:`.repair`: repair it when found in two FCoP stages;
- :mod:`.worktree`: make its tree's branch and worktree, merge it when approved;
- :mod:`.budget`: park it at a budget limit, let it go on, defer its claim.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from baton.budgets.rules import Breach
from baton.fcop_port.port import FcopPort
from baton.requests.ledger import Ledger
from baton.store.journal import Journal
from baton.team import steps
from baton.team.attention import Escalations
from baton.team.book import TaskBook
from baton.team.handlers.budget import DeferForBudget, ParkTask, UnparkTask
from baton.team.handlers.claim import ClaimNotRun, ClaimTask
from baton.team.handlers.decisions import ApplyHumanAnswer, ApplyRoleDecision
from baton.team.handlers.dependents import Dependents
from baton.team.handlers.dispatch import DispatchTurn
from baton.team.handlers.escalate import Escalate, RetryTask
from baton.team.handlers.flow import NoteState, QueueJob, WakeParent
from baton.team.handlers.outcome import Handler, Outcome, RunTurn, Then
from baton.team.handlers.repair import RepairTwoStages
from baton.team.handlers.review import OpenHumanReview, ReviewDocuments, ReviewSummary
from baton.team.handlers.settle import SettleTask
from baton.team.handlers.submit import SubmitReport
from baton.team.handlers.table import HandlerTable
from baton.team.handlers.worktree import MergeTreeBranch, PrepareTreeWorktree
from baton.team.jobs import Job
from baton.team.next_step import TeamRules
from baton.team.turns import TurnRunner
from baton.team.workspaces import Workspaces

__all__ = [
    "Handler",
    "HandlerTable",
    "Outcome",
    "ReviewDocuments",
    "ReviewSummary",
    "RunTurn",
    "StepParts",
    "Then",
    "handler_table",
]


@dataclass(frozen=True, slots=True)
class StepParts:
    """Everything some handler uses; each handler is given only its own share."""

    port: FcopPort
    book: TaskBook
    journal: Journal
    ledger: Ledger
    escalations: Escalations
    turns: TurnRunner
    rules: TeamRules
    run_id: str
    review_summary: ReviewSummary
    enqueue: Callable[[Job], None]
    schedule: Callable[[str], None]
    watch_request: Callable[[str, str], None]
    workspaces: Workspaces
    held: Callable[[Breach], Awaitable[None]]
    """Told what budget holds a TASK back (a window's reopening wakes it)."""


def handler_table(p: StepParts) -> HandlerTable:
    """Every step :func:`~baton.team.next_step.next_step` answers, paired with its handler."""
    dependents = Dependents(p.port, p.schedule)
    human = p.rules.human
    table = HandlerTable()
    table.add(steps.Note, NoteState(p.book))
    table.add(steps.Queue, QueueJob(p.enqueue))
    table.add(steps.NotifyParent, WakeParent(p.schedule))
    table.add(steps.Resolve, RepairTwoStages(p.port, p.journal, p.escalations))
    table.add(steps.Claim, ClaimTask(p.port, p.book, p.escalations))
    table.add(steps.NotRun, ClaimNotRun(p.port, p.book, p.escalations))
    table.add(steps.Dispatch, DispatchTurn(p.turns))
    table.add(steps.Submit, SubmitReport(p.port, p.book, p.escalations, dependents, p.rules))
    reviews = OpenHumanReview(
        p.port, p.book, p.ledger, p.run_id, human, p.review_summary, p.watch_request, p.workspaces
    )
    table.add(steps.OpenReview, reviews)
    table.add(steps.PrepareWorktree, PrepareTreeWorktree(p.book, p.workspaces, p.escalations))
    table.add(steps.MergeTree, MergeTreeBranch(p.book, p.workspaces, reviews, human))
    table.add(
        steps.ApplyHumanReview,
        ApplyHumanAnswer(p.port, p.book, p.escalations, dependents, human),
    )
    table.add(steps.ApplyDecision, ApplyRoleDecision(p.port, p.book, p.escalations, dependents))
    table.add(steps.Settle, SettleTask(p.book, dependents))
    table.add(steps.Attention, Escalate(p.escalations))
    table.add(steps.Fail, Escalate(p.escalations, failed=True))
    table.add(steps.Retry, RetryTask(p.book, human))
    table.add(steps.Park, ParkTask(p.book, p.held))
    table.add(steps.Unpark, UnparkTask(p.book))
    table.add(steps.DeferClaim, DeferForBudget(p.held))
    return table
