"""What the team loop does next with one TASK, from facts only: ``next_step(facts) -> Step``.

The facts it reads are defined here; the steps it answers with are
:mod:`baton.team.steps` (the executor's vocabulary).

Pure: no I/O, no clock, no ids. The executor (:mod:`baton.team.executor`)
gathers :class:`Facts` (FCoP's view of the TASK through the port, baton's
record, turns, questions and requests from the store), asks for the next
:class:`Step`, performs it, gathers again, and stops at a step that waits.
Because every decision is re-derived from durable facts, recovery after a
crash is the same call: nothing is guessed from what the crashed process was
"probably" doing.

The rules, in the order they are checked:

1. FCoP first: a TASK seen in two stages is repaired host-side before anything
   else (:class:`Resolve`); a TASK that is gone is left alone.
2. A record that needs a human (``needs_attention``, ``failed``) waits for the
   human's retry; one parked for its budget (``needs_budget``) goes on once no limit
   of it is reached (a raise, a window that moved on).
3. ``inbox``: a delegated TASK that waits for siblings (``after:``, FCoP
   ``references``) is gated by :func:`baton.workflow.ordering.gate`: not
   finished yet → ``waiting_prerequisites``, unclaimed; one that can never
   finish → :class:`NotRun` (claimed, reported ``blocked`` by baton, submitted);
   otherwise queue the work for its role; in a slot, claim it (T2); not while one of
   its budgets is past its soft limit (:class:`DeferClaim`).
4. ``active``: a turn of this attempt still dispatched/running in a dead
   team loop is *interrupted*: with a REPORT it is submitted, else the role is
   re-prompted with its context (``resume``; the same deterministic operation
   ids make a re-prompted leader create only the missing children). A REPORT
   head is submitted (T3). Nothing dispatched yet: the task prompt (or the
   revision prompt after T5). After a finished turn without a report: open
   children → wait; an open question → wait, an answered one → the answer as
   a turn; a turn the human cancelled → ``needs_attention`` (their retry
   re-prompts it); a failed/cancelled turn → re-prompt with context while
   retries last, then ``failed``; all children reported → consolidate (once per attempt;
   a child whose report is missing makes it ``needs_attention`` instead: a lost result);
   then one reminder, then ``needs_attention``. ``turn_limit`` bounds them all, and a
   budget limit reached parks the TASK instead of any turn (:class:`Park`), also the
   re-prompt of a turn a crash interrupted after it crossed the limit.
5. ``review``: the human's review request is opened (in the same transaction
   as the record), waited for, and its answer applied (T4/T5); a role's
   recorded decision is applied, else the review is asked of the reviewer
   (``explicit``) or the parent is re-evaluated (``on_consolidation``).
6. ``done``/``archive``: settled; the parent is re-evaluated.

With ``[team] isolation = "worktree"`` a turn first needs its tree's branch and
worktree (:class:`PrepareWorktree`), and the human's approval of a tree's root is
a merge before it is T4 (:class:`MergeTree`).

Length: the facts and the rules that read them, side by side (a fact exists for a
rule; a reader of one needs the other).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from baton.budgets.rules import Standing
from baton.team.records import QuestionRecord, TaskRecord, TurnRecord
from baton.team.states import DispatchState, QuestionState, TaskState
from baton.team.steps import (
    ApplyDecision,
    ApplyHumanReview,
    Attention,
    Claim,
    DeferClaim,
    Dispatch,
    Fail,
    JobKind,
    MergeTree,
    Note,
    NotifyParent,
    NotRun,
    OpenReview,
    Park,
    PrepareWorktree,
    Queue,
    Resolve,
    Retry,
    Settle,
    Step,
    Submit,
    Unpark,
    Wait,
)
from baton.workflow.ordering import Prerequisite, Unmet, Waiting, gate
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.states import WorktreeState

__all__ = [
    "OPEN_CHILD_STAGES",
    "ChildView",
    "DecisionView",
    "Facts",
    "FcopTask",
    "ReportView",
    "RequestView",
    "TeamRules",
    "next_step",
]

OPEN_CHILD_STAGES = frozenset({"inbox", "active"})
SETTLED_CHILD_STAGES = frozenset({"review", "done", "archive"})
"""Stages a child reaches only by reporting: its result is its report's."""


# ------------------------------------------------------------------------- facts


@dataclass(frozen=True, slots=True)
class FcopTask:
    """FCoP's view of one TASK (``stage`` is ``ambiguous`` in two stages, ``missing`` if gone)."""

    task_id: str
    stage: str
    sender: str
    recipient: str
    subject: str
    parent: str | None = None
    attempt_id: str | None = None
    last_tool: str | None = None
    """The tool of the last transition (``reject_task`` means a fresh attempt after T5)."""


@dataclass(frozen=True, slots=True)
class ReportView:
    report_id: str
    result: str
    sender: str


@dataclass(frozen=True, slots=True)
class ChildView:
    task_id: str
    recipient: str
    sender: str
    stage: str
    result: str | None = None


@dataclass(frozen=True, slots=True)
class DecisionView:
    """An acceptance/rejection REVIEW recorded for the attempt in review."""

    review_id: str
    reviewer: str
    approve: bool
    reason: str


@dataclass(frozen=True, slots=True)
class RequestView:
    """A human request's state (a review, an attention request) and its answer."""

    request_id: str
    state: str
    approve: bool | None = None
    """For an answered review: the decision; for an attention request: retry or not."""
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TeamRules:
    """The team's rules, as next_step needs them (from ``[team]`` in ``baton.toml``)."""

    human: str
    leader: str
    child_acceptance: Literal["on_consolidation", "explicit"]
    turn_limit: int
    reminder_turns: int
    retries: int = 1
    """Re-prompts of an attempt after a failed or cancelled turn (an interruption is free)."""


@dataclass(frozen=True, slots=True)
class Facts:
    task: FcopTask
    record: TaskRecord | None
    role: str | None
    """The role the TASK routes to (None: not one of this team's)."""
    reviewer_role: str | None = None
    """The role of the TASK's sender, when it is one (it reviews the TASK's report)."""
    head: ReportView | None = None
    """The REPORT head of the current attempt."""
    children: tuple[ChildView, ...] = ()
    decision: DecisionView | None = None
    last_turn: TurnRecord | None = None
    """The last dispatch for this TASK (any attempt, any kind)."""
    turn_live: bool = False
    """The last turn is running in *this* team loop right now."""
    question: QuestionRecord | None = None
    """An open ``ask_human`` question of the current attempt."""
    review: RequestView | None = None
    """The human's review request for the current attempt."""
    attention: RequestView | None = None
    """The open (or just answered) attention request."""
    review_turns: int = 0
    """Review turns of the current attempt already dispatched to the reviewer."""
    slot_role: str | None = None
    """The role of the slot worker evaluating (it may claim and prompt); None: the coordinator."""
    for_review: bool = False
    """The slot worker took this TASK as a review job (its sender reviews it)."""
    prerequisites: tuple[Prerequisite, ...] = ()
    """An inbox TASK's sibling prerequisites (its ``references`` to siblings), with facts."""
    tree_root: str | None = None
    """The TASK whose branch this one works on (itself for a root); None: no isolation."""
    worktree: WorktreeRecord | None = None
    """That tree's branch and worktree, once made."""
    budget: Standing = field(default_factory=Standing)
    """Where its budgets stand: its task tree, its role, the run, its role's window."""
    budget_tree: str | None = None
    """The task tree it is charged to (the TASK a human filed), isolated or not."""

    @property
    def known_record(self) -> TaskRecord:
        """The record, for a step the rules only choose once baton has one."""
        assert self.record is not None, f"{self.task.task_id}: a step needs its record"
        return self.record

    @property
    def is_tree_root(self) -> bool:
        return self.tree_root is not None and self.tree_root == self.task.task_id

    @property
    def own_slot(self) -> bool:
        """A slot of the TASK's own role, on its own work: may claim and prompt it."""
        return self.slot_role is not None and self.slot_role == self.role and not self.for_review

    @property
    def reviewer_slot(self) -> bool:
        """A slot of the reviewer's role, on a review job: may prompt the review."""
        return (
            self.slot_role is not None and self.slot_role == self.reviewer_role and self.for_review
        )


# ------------------------------------------------------------------- next step


def _work(f: Facts, kind: JobKind, p: TeamRules) -> Step:
    """Prompt ``kind`` now (in a slot) or hand it to the role's queue; bounded by turn_limit
    and by its budgets (a limit reached parks it, whatever the turn was for)."""
    if f.role is None:
        return Wait("not routed to a role")
    if f.budget.hard is not None:
        return Park(f.budget.hard)
    record = f.record
    if record is not None and record.turns >= p.turn_limit and kind != "resume":
        return Attention(f"turn limit ({p.turn_limit}) reached without a settled report")
    if not f.own_slot:
        return Queue(f.role)
    return _in_worktree(f) or Dispatch(kind)


def _in_worktree(f: Facts) -> Step | None:
    """Before a turn of an isolated tree: its branch and worktree must be live."""
    if f.tree_root is None:
        return None
    worktree = f.worktree
    if worktree is None or worktree.state is WorktreeState.CREATING:
        return PrepareWorktree(f.tree_root)
    if worktree.state is not WorktreeState.LIVE:
        return Attention(
            f"its task tree's branch {worktree.branch} is {worktree.state.value}: "
            "no agent works on it any more"
        )
    return None


def _open_children(f: Facts, p: TeamRules) -> list[ChildView]:
    stages = set(OPEN_CHILD_STAGES)
    if p.child_acceptance == "explicit":
        stages.add("review")
    return [c for c in f.children if c.stage in stages]


def _turn_of_attempt(f: Facts) -> TurnRecord | None:
    """The last turn of the TASK's own work in the current attempt (reviews of it excluded)."""
    turn = f.last_turn
    if turn is None or turn.kind == "review" or turn.attempt_id != f.task.attempt_id:
        return None
    return turn


def _cancelled_unattended(f: Facts, turn: TurnRecord) -> bool:
    """A finished turn the human cancelled that nothing has acted on since.

    Its TASK goes to ``needs_attention``; the human's retry moves the record on, and the
    same turn then reads as any cancelled turn. A work turn's finish moves the record to
    ``turn_finished``; a review turn's leaves it, so there the record is older than the turn.
    """
    record = f.record
    if not turn.cancelled_by or record is None or turn.state is not DispatchState.FINISHED:
        return False
    if turn.kind == "review":
        return record.updated_at <= (turn.ended_at or "")
    return record.state is TaskState.TURN_FINISHED


def _consolidate(f: Facts, p: TeamRules) -> Step:
    """The leader's consolidation, unless a delegated result was lost (a human looks then:
    nothing is made up for a child that has no report)."""
    lost = [c.task_id for c in f.children if c.stage in SETTLED_CHILD_STAGES and not c.result]
    if lost:
        return Attention(f"the result of {', '.join(lost)} was lost (no report to consolidate)")
    return _work(f, "consolidate", p)


def _active(f: Facts, p: TeamRules) -> Step:
    record = f.record
    turn = _turn_of_attempt(f)
    unfinished = turn is not None and turn.state in (
        DispatchState.DISPATCHED,
        DispatchState.RUNNING,
    )
    if unfinished and f.turn_live:
        return Wait("the turn is running")
    if f.head is not None:
        accept: tuple[str, ...] = ()
        if p.child_acceptance == "on_consolidation":
            accept = tuple(
                c.task_id for c in f.children if c.stage == "review" and c.sender == f.role
            )
        return Submit(f.head.report_id, f.head.result, accept)
    if unfinished or (turn is not None and turn.state is DispatchState.INTERRUPTED):
        return _work(f, "resume", p)  # never finished: re-prompt with its context
    open_children = _open_children(f, p)
    if turn is None:
        if f.task.last_tool == "reject_task":
            return _work(f, "revise", p)
        if open_children:
            return Note(TaskState.WAITING_CHILDREN, "delegated work is still open")
        return _consolidate(f, p) if f.children else _work(f, "work", p)
    # The last turn of this attempt finished without a report.
    if _cancelled_unattended(f, turn):
        return Attention(f"{turn.cancelled_by} (no report was filed)")
    if open_children:
        return Note(TaskState.WAITING_CHILDREN, "delegated work is still open")
    question = f.question
    if question is not None and question.state is QuestionState.PENDING:
        return Note(TaskState.WAITING_HUMAN, f"{question.role} asked {p.human} a question")
    if question is not None and question.state is QuestionState.ANSWERED:
        return _work(f, "answer", p)
    if turn.outcome != "completed":
        if record is not None and record.resumes >= p.retries:
            detail = f": {turn.error}" if turn.error else ""
            return Fail(f"the agent's turn {turn.outcome}{detail} and no report was filed")
        return _work(f, "retry", p)
    if f.children and turn.kind != "consolidate":
        return _consolidate(f, p)
    if record is not None and record.reminders >= p.reminder_turns:
        return Attention("the agent ended its turn without a report, also after the reminder")
    return _work(f, "remind", p)


def _review_turn(f: Facts) -> TurnRecord | None:
    turn = f.last_turn
    if turn is None or turn.kind != "review" or turn.attempt_id != f.task.attempt_id:
        return None
    return turn


def _review(f: Facts, p: TeamRules) -> Step:
    task = f.task
    if task.sender == p.human:
        review = f.review
        if review is None or review.state in ("expired", "cancelled", "rejected"):
            if f.head is None:
                return Attention("the TASK is in review without a REPORT head")
            return OpenReview(f.head.report_id, f.head.result, f.head.sender)
        if review.state == "pending":
            if f.record is not None and f.record.state is not TaskState.IN_REVIEW:
                return Note(TaskState.IN_REVIEW, f"waiting for {p.human}'s review")
            return Wait(f"waiting for {p.human}'s review")
        if review.state == "answered" and review.approve is not None:
            worktree = f.worktree
            if (
                review.approve
                and f.is_tree_root
                and worktree is not None
                and worktree.state
                in (WorktreeState.LIVE, WorktreeState.MERGING, WorktreeState.MERGED)
            ):
                return MergeTree(review.request_id)  # then the approval itself (T4)
            return ApplyHumanReview(review.request_id, review.approve, review.reason or "")
        return Attention(f"the review request {review.request_id} is {review.state}")
    if f.decision is not None:
        d = f.decision
        return ApplyDecision(d.reviewer, d.review_id, d.approve, d.reason)
    if f.reviewer_role is None:
        return Attention(
            f"reported, but its sender {task.sender!r} is neither a role nor {p.human}: "
            "nobody can review it"
        )
    if f.record is not None and f.record.state is not TaskState.IN_REVIEW:
        return Note(TaskState.IN_REVIEW, f"reported to {task.sender}")
    if p.child_acceptance == "on_consolidation" and task.parent is not None:
        return NotifyParent(task.parent)
    turn = _review_turn(f)
    if turn is not None and turn.state in (DispatchState.DISPATCHED, DispatchState.RUNNING):
        if f.turn_live:
            return Wait(f"{task.sender} is reviewing")
    elif turn is not None and _cancelled_unattended(f, turn):
        return Attention(f"{turn.cancelled_by} (no review was filed)")
    elif (
        turn is not None
        and turn.state is DispatchState.FINISHED
        and f.review_turns > p.reminder_turns
    ):
        return Attention(f"{task.sender} did not review the report")
    if not f.reviewer_slot:
        return Queue(f.reviewer_role, review=True)
    if f.review_turns >= p.turn_limit:
        return Attention(f"turn limit ({p.turn_limit}) reached while {task.sender} reviews")
    if f.budget.hard is not None:
        return Park(f.budget.hard)
    return _in_worktree(f) or Dispatch("review")


def next_step(f: Facts, p: TeamRules) -> Step:
    """The next step for one TASK (see the module docstring for the rules)."""
    task, record = f.task, f.record
    if task.stage == "ambiguous":
        return Resolve()
    if task.stage == "missing":
        return Wait("the TASK is not in the workspace")
    if record is not None and record.state is TaskState.DROPPED:
        return Wait(f"dropped: {record.reason or 'its task tree was abandoned'}")
    if record is not None and record.state is TaskState.NEEDS_BUDGET:
        if task.stage in ("done", "archive"):
            return Settle()
        if f.budget.hard is None:
            return Unpark()
        return Wait(f"needs attention: budget: {f.budget.hard.describe()}")
    if record is not None and record.state in (TaskState.NEEDS_ATTENTION, TaskState.FAILED):
        attention = f.attention
        if attention is not None and attention.state == "answered" and attention.approve:
            return Retry(attention.request_id)
        if task.stage in ("done", "archive"):
            return Settle()
        return Wait(f"needs attention: {record.reason}")
    if task.stage in ("done", "archive"):
        if record is not None and record.state is TaskState.SETTLED:
            return Wait("settled")
        return Settle()
    if task.recipient == p.human:
        return Wait(f"addressed to {p.human}")
    if f.role is None:
        return Wait("not routed to a role")
    if task.stage == "inbox":
        if record is not None and record.state is TaskState.REFUSED:
            return Wait("refused")
        if f.prerequisites:
            verdict = gate(f.prerequisites, acceptance=p.child_acceptance)
            if isinstance(verdict, Waiting):
                return Note(
                    TaskState.WAITING_PREREQUISITES, "after " + ", ".join(verdict.waiting_for)
                )
            if isinstance(verdict, Unmet):
                return NotRun(verdict.reasons)
        if f.budget.soft is not None:
            return DeferClaim(f.budget.soft)
        return Claim() if f.own_slot else Queue(f.role)
    if task.stage == "active":
        return _active(f, p)
    if task.stage == "review":
        return _review(f, p)
    return Wait(f"unknown stage {task.stage!r}")


def open_children(children: Sequence[ChildView]) -> list[ChildView]:
    """Children still being worked on (for prompts and status)."""
    return [c for c in children if c.stage in OPEN_CHILD_STAGES]
