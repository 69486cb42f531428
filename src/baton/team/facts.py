"""Gathering the :class:`~baton.team.next_step.Facts` of one TASK (blocking I/O: run in a thread).

FCoP through the port (stage, attempt, REPORT head, children, decision
REVIEWs) and the store (baton's record, its turns, its question, the human
requests it has open), read fresh every time: next_step never sees a cache that a
crash could have left stale.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection
from dataclasses import KW_ONLY, dataclass

from baton.budgets.rules import Standing
from baton.fcop_errors import CoordinationError, StateAmbiguous, TaskNotFound
from baton.fcop_port.port import STAGES, FcopPort, TaskInfo
from baton.fcop_port.records import task_info
from baton.request_model.documents import ElicitationAnswer, ReviewAnswer
from baton.requests.records import RequestRecord, record_from_row
from baton.store import requests_sql, team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.budgets import TeamBudgets
from baton.team.next_step import (
    OPEN_CHILD_STAGES,
    ChildView,
    DecisionView,
    Facts,
    FcopTask,
    ReportView,
    RequestView,
    TeamRules,
)
from baton.team.records import QuestionRecord, TaskRecord, TurnRecord
from baton.team.states import QUESTION, QuestionEvent, QuestionState
from baton.team_config import TeamConfig
from baton.workflow.ordering import Prerequisite, prerequisite_ids
from baton.worktrees.model import WorktreeRecord

log = logging.getLogger("baton.team.facts")

UNREADABLE = "unreadable"
"""A prerequisite's stage when its REPORT head cannot be read now (the gate waits)."""

__all__ = ["FactSource", "policy_for"]


def policy_for(team: TeamConfig) -> TeamRules:
    return TeamRules(
        human=team.human,
        leader=team.leader,
        child_acceptance=team.child_acceptance,
        turn_limit=team.turn_limit,
        reminder_turns=team.reminder_turns,
    )


@dataclass(frozen=True, slots=True)
class _Stored:
    record: TaskRecord | None
    last_turn: TurnRecord | None
    review_turns: int
    question: QuestionRecord | None
    question_request: RequestRecord | None
    review: RequestRecord | None
    attention: RequestRecord | None
    tree_root: str | None = None
    worktree: WorktreeRecord | None = None
    tree: str | None = None
    """The task tree it belongs to (for budgets), whether or not trees are isolated."""


MAX_TREE_DEPTH = 32
"""Parent links followed to a tree's root (deeper is a loop or a hostile chain)."""


def tree_root(tx: Tx, task_id: str, record: TaskRecord | None) -> str:
    """The TASK whose branch ``task_id`` works on: recorded at its first dispatch, else
    its topmost ancestor (the TASK a human filed)."""
    if record is not None and record.workspace:
        return record.workspace
    root, up = task_id, record.parent if record is not None else None
    for _ in range(MAX_TREE_DEPTH):
        if not up:
            break
        root = up
        row = team_sql.TASKS.get(tx, up)
        parent = TaskRecord.from_row(row) if row is not None else None
        if parent is not None and parent.workspace:
            return parent.workspace
        up = parent.parent if parent is not None else None
    return root


def _request(tx: Tx, request_id: str | None) -> RequestRecord | None:
    if request_id is None:
        return None
    row = requests_sql.fetch(tx, request_id)
    return record_from_row(row) if row is not None else None


def _review_view(record: RequestRecord | None) -> RequestView | None:
    if record is None:
        return None
    approve = reason = None
    if isinstance(record.answer, ReviewAnswer):
        approve = record.answer.decision == "approve"
        reason = record.answer.reason
    return RequestView(record.request_id, record.state.value, approve, reason)


def _attention_view(record: RequestRecord | None) -> RequestView | None:
    if record is None:
        return None
    approve = None
    if isinstance(record.answer, ElicitationAnswer):
        approve = record.answer.action == "accept"
    return RequestView(record.request_id, record.state.value, approve, None)


def question_answer(request: RequestRecord | None) -> str | None:
    """The human's answer text to an ``ask_human`` elicitation, once answered."""
    if request is None or request.state.value not in ("answered", "delivered"):
        return None
    answer = request.answer
    if not isinstance(answer, ElicitationAnswer):
        return None
    if answer.action == "accept" and answer.content:
        return str(answer.content.get("answer", ""))
    return f"(the human chose to {answer.action})"


@dataclass(eq=False)
class FactSource:
    """Reads the facts of a TASK from FCoP and the store (call from a worker thread)."""

    port: FcopPort
    store: Store
    team: TeamConfig
    _: KW_ONLY
    isolated: bool = False
    """Task trees work on their own branches (:mod:`baton.team.workspaces`)."""
    budgets: TeamBudgets | None = None
    """``[budget]`` for the team (None or empty: nothing is limited)."""

    def record(self, task_id: str) -> TaskRecord | None:
        row = self.store.read_tx(lambda tx: team_sql.TASKS.get(tx, task_id))
        return TaskRecord.from_row(row) if row is not None else None

    def task(self, task_id: str) -> TaskInfo | None:
        """The TASK through Core; in two stages, the first copy read alone (for its fields)."""
        try:
            return self.port.read_task(task_id)
        except TaskNotFound:
            return None
        except StateAmbiguous:
            for stage in STAGES:
                path = self.port.stage_dir(stage) / f"{task_id}.md"
                if path.is_file():
                    fields = self.port.inspect_envelope(path)
                    return task_info(fields, path, "")
            return None

    def _stored(self, task_id: str, attempt: str | None) -> _Stored:
        def read(tx: Tx) -> _Stored:
            row = team_sql.TASKS.get(tx, task_id)
            record = TaskRecord.from_row(row) if row is not None else None
            turns = [TurnRecord.from_row(r) for r in team_sql.turns_of(tx, task_id)]
            question = None
            if attempt is not None:
                qrow = team_sql.open_question(tx, task_id, attempt)
                question = QuestionRecord.from_row(qrow) if qrow is not None else None
            root = worktree = None
            tree = tree_root(tx, task_id, record)
            if self.isolated:
                root = tree
                wrow = team_sql.WORKTREES.get(tx, root)
                worktree = WorktreeRecord.from_row(wrow) if wrow is not None else None
            return _Stored(
                tree_root=root,
                worktree=worktree,
                tree=tree,
                record=record,
                last_turn=turns[-1] if turns else None,
                review_turns=sum(
                    1 for t in turns if t.kind == "review" and t.attempt_id == attempt
                ),
                question=question,
                question_request=_request(tx, question.request_id if question else None),
                review=_request(tx, record.review_request if record else None),
                attention=_request(tx, record.attention_request if record else None),
            )

        return self.store.read_tx(read)

    def gather(
        self,
        task_id: str,
        *,
        slot_role: str | None = None,
        for_review: bool = False,
        live: Collection[tuple[str, int]] = (),
    ) -> Facts:
        info: TaskInfo | None
        try:
            info = self.port.read_task(task_id)
            ambiguous = False
        except TaskNotFound:
            info, ambiguous = None, False
        except StateAmbiguous:
            info, ambiguous = None, True
        attempt = info.attempt_id if info is not None else None
        stored = self._stored(task_id, attempt)
        record = stored.record
        if info is None:
            view = FcopTask(
                task_id=task_id,
                stage="ambiguous" if ambiguous else "missing",
                sender=record.sender if record else "",
                recipient=record.recipient if record else "",
                subject=record.subject if record else "",
                parent=record.parent if record else None,
                attempt_id=record.attempt_id if record else None,
            )
            return Facts(task=view, record=record, role=record.role if record else None)
        view = FcopTask(
            task_id=info.task_id,
            stage=info.stage,
            sender=info.sender,
            recipient=info.recipient,
            subject=info.subject,
            parent=info.parent,
            attempt_id=attempt,
            last_tool=str(info.last_transition.get("tool") or "") or None,
        )
        spec = self.team.role_for(info.recipient)
        reviewer = self.team.role_for(info.sender) if info.sender != self.team.human else None
        head = None
        if attempt is not None and info.stage in ("active", "review"):
            found = self.port.find_report_head(info.task_id, attempt)
            if found is not None:
                head = ReportView(found.report_id, found.result, found.sender)
        children: tuple[ChildView, ...] = ()
        if spec is not None and spec.is_leader and info.stage in ("active", "review"):
            children = self.children(info.task_id)
        decision = None
        if info.stage == "review" and attempt is not None and reviewer is not None:
            found_review = self.port.find_decision(info.task_id, attempt, reviewer=reviewer.name)
            if found_review is not None:
                decision = DecisionView(
                    found_review.review_id,
                    found_review.sender,
                    found_review.review_kind == "acceptance",
                    found_review.body,
                )
        prerequisites: tuple[Prerequisite, ...] = ()
        if info.stage == "inbox" and info.parent is not None and info.references:
            prerequisites = self.prerequisites(info)
        question = stored.question
        answer = question_answer(stored.question_request)
        if question is not None and question.state is QuestionState.PENDING and answer is not None:
            state = QUESTION.next(question.state, QuestionEvent.ANSWER)
            question = dataclasses.replace(question, state=state, answer=answer)
        last = stored.last_turn
        budgets = self.budgets
        standing = Standing()
        if budgets is not None and budgets.config.enabled:
            role = spec.name if spec else None
            standing = self.store.read_tx(lambda tx: budgets.standing(tx, stored.tree, role))
        return Facts(
            task=view,
            record=record,
            role=spec.name if spec else None,
            reviewer_role=reviewer.name if reviewer else None,
            head=head,
            children=children,
            decision=decision,
            last_turn=last,
            turn_live=last is not None and (last.task_id, last.dispatch) in live,
            question=question,
            review=_review_view(stored.review),
            attention=_attention_view(stored.attention),
            review_turns=stored.review_turns,
            slot_role=slot_role,
            for_review=for_review,
            prerequisites=prerequisites,
            tree_root=stored.tree_root,
            worktree=stored.worktree,
            budget=standing,
            budget_tree=stored.tree,
        )

    def children(self, parent: str) -> tuple[ChildView, ...]:
        """A leader's delegated TASKs; once none is open, with each one's reported result
        (what its consolidation is made of: a result that is missing then was lost)."""
        found = self.port.children(parent)
        if any(c.stage in OPEN_CHILD_STAGES for c in found):
            return tuple(ChildView(c.task_id, c.recipient, c.sender, c.stage) for c in found)
        out = []
        for child in found:
            head = None
            if child.attempt_id is not None:
                head = self.port.find_report_head(child.task_id, child.attempt_id)
            result = head.result if head is not None else None
            out.append(ChildView(child.task_id, child.recipient, child.sender, child.stage, result))
        return tuple(out)

    def prerequisites(self, info: TaskInfo) -> tuple[Prerequisite, ...]:
        """The sibling TASKs ``info`` references (``after:``), with their stage and result."""
        assert info.parent is not None
        siblings = {s.task_id: s for s in self.port.children(info.parent)}
        out = []
        for task_id in prerequisite_ids(info.references, siblings):
            sibling = siblings[task_id]
            head = None
            stage = sibling.stage
            if sibling.attempt_id is not None and stage != "inbox":
                try:
                    head = self.port.find_report_head(task_id, sibling.attempt_id)
                except CoordinationError as exc:
                    # Its REPORT cannot be read right now (e.g. the sibling was caught
                    # between two stages by a crash: its relation is invalid until its
                    # own evaluation repairs it). Not finished, not failed: wait, and be
                    # evaluated again when it settles. "No report" here would make this
                    # task NotRun for good.
                    log.warning("prerequisite %s of %s unreadable: %s", task_id, info.task_id, exc)
                    stage = UNREADABLE
            out.append(
                Prerequisite(task_id, sibling.recipient, stage, head.result if head else None)
            )
        return tuple(out)
