"""The prompt of each kind of turn, built from FCoP (blocking reads: run in a thread).

Every prompt text comes from :mod:`baton.workflow.header` (deterministic, quoted
where it carries other agents' text); this module only gathers what a prompt needs:
the TASK and its body, the children's reports, the rejection reason, the question.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from baton.fcop_errors import CoordinationError, TaskNotFound
from baton.fcop_port.port import FcopPort, TaskInfo
from baton.store.store import Store
from baton.store.turn_tools import recorded_calls
from baton.team import steps
from baton.team.next_step import Facts
from baton.team.records import TaskRecord, TurnRecord
from baton.team.slots import Slot
from baton.team_config import TeamConfig
from baton.workflow.header import (
    ChildReport,
    PromptContext,
    ToolRecord,
    answer_prompt,
    consolidation_prompt,
    reminder_prompt,
    resume_prompt,
    review_prompt,
    revision_prompt,
    task_prompt,
)

__all__ = ["Prompts", "recorded_in"]


@dataclass(kw_only=True, eq=False)
class Prompts:
    """Builds turn prompts for one team over one workspace."""

    port: FcopPort
    team: TeamConfig
    recorded: Callable[[TurnRecord], Sequence[ToolRecord]] | None = None
    """A finished turn's tool calls as the store recorded them (blocking), for the
    reminder: the agent reports that work instead of "nothing was done"."""

    def context(self, slot: Slot, task: TaskInfo, attempt: str) -> PromptContext:
        return PromptContext(
            role=slot.spec.name,
            team=self.team.name,
            leader=self.team.leader,
            human=self.team.human,
            team_roles=self.team.role_names,
            tools=tuple(slot.spec.tools),
            task_id=task.task_id,
            attempt_id=attempt,
            subject=task.subject,
            sender=task.sender,
            body=task.body,
            parent=task.parent,
        )

    def child_reports(self, parent: str) -> list[ChildReport]:
        out = []
        for child in self.port.children(parent):
            head = None
            if child.attempt_id is not None and child.stage != "inbox":
                head = self.port.find_report_head(child.task_id, child.attempt_id)
            out.append(
                ChildReport(
                    task_id=child.task_id,
                    role=child.recipient,
                    subject=child.subject,
                    stage=child.stage,
                    report_id=head.report_id if head else None,
                    result=head.result if head else None,
                    body=head.body if head else "(no report)",
                )
            )
        return out

    def build(
        self, kind: steps.JobKind, facts: Facts, slot: Slot, record: TaskRecord
    ) -> tuple[str, str, str | None]:
        """(prompt, anchor task, anchor attempt) — blocking reads; run in a thread."""
        task = self.port.read_task(facts.task.task_id)
        attempt = task.attempt_id or ""
        if kind == "review":
            head = self.port.find_report_head(task.task_id, attempt)
            if head is None:
                raise CoordinationError(f"{task.task_id} has no report to review")
            anchor = task
            if task.parent is not None:
                with contextlib.suppress(TaskNotFound):
                    anchor = self.port.read_task(task.parent)
            ctx = self.context(slot, anchor, anchor.attempt_id or attempt)
            child = ChildReport(
                task_id=task.task_id,
                role=task.recipient,
                subject=task.subject,
                stage=task.stage,
                report_id=head.report_id,
                result=head.result,
                body=head.body,
            )
            prompt = review_prompt(ctx, child)
            if facts.review_turns:
                prompt = "[baton] Reminder: no review decision was recorded.\n\n" + prompt
            return prompt, anchor.task_id, anchor.attempt_id
        ctx = self.context(slot, task, attempt)
        if kind == "work":
            return task_prompt(ctx), task.task_id, attempt
        if kind in ("resume", "retry"):
            why = (
                "baton stopped before the turn finished"
                if kind == "resume"
                else f"the turn {facts.last_turn.outcome if facts.last_turn else 'failed'}"
                + (
                    f" ({facts.last_turn.error})"
                    if facts.last_turn and facts.last_turn.error
                    else ""
                )
            )
            delegated = self.child_reports(task.task_id) if facts.children else []
            return resume_prompt(ctx, why=why, delegated=delegated), task.task_id, attempt
        if kind == "remind":
            left = self.team.reminder_turns - record.reminders - 1
            last = facts.last_turn
            recorded = self.recorded(last) if self.recorded is not None and last else ()
            prompt = reminder_prompt(ctx, turns_left=left, recorded=recorded)
            return prompt, task.task_id, attempt
        if kind == "consolidate":
            return (
                consolidation_prompt(ctx, self.child_reports(task.task_id)),
                task.task_id,
                attempt,
            )
        if kind == "revise":
            refs = task.last_transition.get("evidence_ref") or []
            reviews = [r for r in refs if isinstance(r, str) and r.startswith("REVIEW-")]
            reviewer, reason = task.sender, ""
            if reviews:
                with contextlib.suppress(CoordinationError):
                    review = self.port.read_review(reviews[0])
                    reviewer, reason = review.sender, review.body
            return revision_prompt(ctx, reviewer=reviewer, reason=reason), task.task_id, attempt
        question = facts.question
        assert kind == "answer" and question is not None
        text = answer_prompt(ctx, question=question.question, answer=question.answer or "")
        return text, task.task_id, attempt


def recorded_in(store: Store) -> Callable[[TurnRecord], list[ToolRecord]]:
    """The reader :class:`Prompts` takes: a turn's recorded tool calls from ``store``."""

    def read(turn: TurnRecord) -> list[ToolRecord]:
        digest = turn.prompt_sha256
        if digest is None or turn.run_id is None:
            return []
        run_id = turn.run_id
        calls = store.read_tx(lambda tx: recorded_calls(tx, run_id, turn.slot, digest))
        return [ToolRecord(c.title, c.status, c.output) for c in calls]

    return read
