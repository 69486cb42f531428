"""The human's review of a TASK they filed: the document they read, opened as a request.

The request is committed with the record's move to ``in_review`` (one transaction),
then watched: whoever answers it (CLI, dashboard, another process) wakes the TASK.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from baton.budgets.limits import BudgetConfig, format_amount
from baton.budgets.rules import ScopeKey, Spend
from baton.fcop_port.port import FcopPort, TaskInfo
from baton.request_model.documents import ReviewChanges, ReviewRequest
from baton.requests.ledger import Ledger
from baton.store import budget_sql, team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team import steps
from baton.team.attention import loop_request
from baton.team.book import TaskBook
from baton.team.facts import tree_root
from baton.team.handlers.outcome import Outcome, Then
from baton.team.next_step import Facts, ReportView
from baton.team.prompts import Prompts
from baton.team.records import TaskRecord
from baton.team.slots import Slot
from baton.team.states import TaskState
from baton.team.workspaces import Workspaces
from baton.workflow.review_summary import ChildSummary, ReviewFacts, review_document
from baton.worktrees.review import review_changes
from baton.worktrees.states import WorktreeState

__all__ = [
    "OpenHumanReview",
    "ReviewDocuments",
    "ReviewSummary",
    "changes_line",
    "tree_cost",
]

ReviewSummary = Callable[[TaskInfo, ReportView, str, tuple[str, ...] | None], str]
"""``(task, report head, report body, files) -> text`` of the review document a human
reads (blocking reads: called in a worker thread). ``files``: the paths the tree's
branch changes, when it has one (else the files the agents reported writing)."""


@dataclass(frozen=True, slots=True)
class ReviewDocuments:
    """What the human reviews: the work, not the prompt.

    :func:`~baton.workflow.review_summary.review_document` over the TASK, its
    report, each delegated child's result with an excerpt of its report, and the
    files the agents reported writing (kept per TASK in the store's records).
    """

    prompts: Prompts
    store: Store
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """The limits in force: the tree's ``per_task`` one is shown beside its cost."""

    def __call__(
        self, task: TaskInfo, head: ReportView, body: str, files: tuple[str, ...] | None
    ) -> str:
        children = self.prompts.child_reports(task.task_id)
        ids = [task.task_id, *(c.task_id for c in children)]

        def reported(tx: Tx) -> dict[str, tuple[str, ...]]:
            out = {}
            for task_id in ids:
                row = team_sql.TASKS.get(tx, task_id)
                if row is not None:
                    out[task_id] = TaskRecord.from_row(row).files_changed
            return out

        changed = self.store.read_tx(reported)
        cost = self.store.read_tx(lambda tx: tree_cost(tx, self.budget, task.task_id))
        facts = ReviewFacts(
            task_id=task.task_id,
            subject=task.subject,
            role=head.sender,
            result=head.result,
            report_id=head.report_id,
            body=body,
            children=tuple(
                ChildSummary(
                    c.task_id,
                    c.role,
                    c.subject,
                    c.result,
                    c.report_id,
                    c.body if c.report_id else "",
                    changed.get(c.task_id, ()),
                )
                for c in children
            ),
            files_changed=files if files is not None else changed.get(task.task_id, ()),
            cost=cost,
        )
        return review_document(facts)


def tree_cost(tx: Tx, budget: BudgetConfig, task_id: str) -> str | None:
    """What ``task_id``'s task tree spent, against its ``per_task`` limits when any are set
    (the review document's cost line); None when nothing was ever charged to it."""
    row = team_sql.TASKS.get(tx, task_id)
    tree = tree_root(tx, task_id, TaskRecord.from_row(row) if row is not None else None)
    scope = ScopeKey("task", tree)
    [standing] = budget_sql.standings(tx, budget, [scope], time.time())
    if standing.spend == Spend():
        return None
    text = standing.spend.describe()
    limits = [
        f"{dimension} {format_amount(dimension, limit)}"
        for dimension, limit in standing.limits.items()
    ]
    return f"{text} (per_task limit: {', '.join(limits)})" if limits else text


@dataclass(frozen=True, slots=True)
class OpenHumanReview:
    port: FcopPort
    book: TaskBook
    ledger: Ledger
    run_id: str
    human: str
    summary: ReviewSummary
    watch_request: Callable[[str, str], None]
    workspaces: Workspaces

    async def __call__(self, step: steps.OpenReview, facts: Facts, slot: Slot | None) -> Outcome:
        await self._open(facts, ReportView(step.report_id, step.result, step.sender))
        return Then.STOP

    async def reopen(self, facts: Facts, answered: str, *, merge_refused: str) -> None:
        """A fresh review of the same report after an approval that could not merge:
        the answered request is delivered (acted on) in the same transaction."""
        record = facts.record
        assert record is not None and facts.head is not None
        await self._open(
            facts, facts.head, merge_refused=merge_refused, answered=answered, nth=record.version
        )

    async def _open(
        self,
        facts: Facts,
        head: ReportView,
        *,
        merge_refused: str | None = None,
        answered: str | None = None,
        nth: int | None = None,
    ) -> None:
        record = facts.known_record
        info = await asyncio.to_thread(self.port.read_task, facts.task.task_id)
        found = await asyncio.to_thread(
            self.port.find_report_head, info.task_id, info.attempt_id or ""
        )
        body = found.body if found is not None else ""
        changes = await self._changes(facts, merge_refused)
        files = tuple(f.path for f in changes.files) if changes is not None else None
        summary = await asyncio.to_thread(self.summary, info, head, body, files)
        if changes is not None:
            summary = f"{summary.rstrip()}\n\n{changes_line(changes)}\n"
        document = ReviewRequest(
            task_id=info.task_id,
            report_ref=head.report_id,
            summary=summary,
            role=head.sender,
            changes=changes,
        )
        key = f"review:{info.task_id}:{info.attempt_id}" + (f":merge-{nth}" if nth else "")
        change = loop_request(self.ledger, document, run_id=self.run_id, key=key)
        delivered = await asyncio.to_thread(self.book.delivered, answered) if answered else None
        request_id = change.records[0].request_id

        def also(tx: Tx) -> None:
            change.apply(tx)
            if delivered is not None:
                delivered.apply(tx)

        why = (
            f"the merge was refused ({merge_refused}): waiting for {self.human}'s review again"
            if merge_refused
            else f"waiting for {self.human}'s review"
        )
        await self.book.move(
            record,
            TaskState.IN_REVIEW,
            why=why,
            also=also,
            extra=[*change.payloads, *(delivered.payloads if delivered else ())],
            review_request=request_id,
            report_ref=head.report_id,
            result=head.result,
        )
        self.watch_request(request_id, info.task_id)

    async def _changes(self, facts: Facts, merge_refused: str | None) -> ReviewChanges | None:
        """The tree's change and merge preflight, for the root of a tree on its own branch."""
        worktree = facts.worktree
        if not facts.is_tree_root or worktree is None or worktree.state is not WorktreeState.LIVE:
            return None
        root = facts.task.task_id
        await self.workspaces.checkpoint(root, f"baton: checkpoint of {root} for its review")
        change = await self.workspaces.change(root)
        if change is None:
            return None
        preflight = await self.workspaces.preflight(root)
        return review_changes(change, preflight, task_id=root, merge_refused=merge_refused)


def changes_line(changes: ReviewChanges) -> str:
    """The one line a terminal shows of a change (the page shows the diff)."""
    count = len(changes.files) + changes.more_files
    verdict = (
        "merges cleanly"
        if not changes.base_conflicts
        else f"CONFLICTS with {changes.base} in {len(changes.base_conflicts)} file(s)"
    )
    line = (
        f"Changes: {count} file(s), +{changes.added} -{changes.removed} on {changes.branch} "
        f"(base {changes.base}); {verdict}"
    )
    if changes.branch_conflicts:
        others = ", ".join(c.branch for c in changes.branch_conflicts)
        line += f"; overlaps live branches: {others}"
    if changes.merge_refused:
        line = f"NOT MERGED: {changes.merge_refused}\n{line}"
    return line
