"""T2–T5: claim, submit, and the authorized approve and reject edges.

T2 (inbox → active), T3 (active → review, carrying the current attempt's
REPORT head) and the transitions of T4/T5 go through baton's O(1) writer when it
is on. T4/T5 need an acceptance or
rejection REVIEW (evidence), a single-use authorization REVIEW
(``mark_human_approved``) whose issuer proof a trusted evaluator accepts, and
the transition itself (see :mod:`baton.fcop_port.authority`). A crash
between a round's receipt and its target is finished from that receipt (R5,
:meth:`TaskTransitions.replay_prepared`) rather than authorized twice.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from baton.fcop_errors import (
    CODE_TO_ERROR,
    AuthorizationRefused,
    EvidenceError,
    FcopProtocolError,
)
from baton.fcop_port.authority import Expectation
from baton.fcop_port.evidence import Evidence
from baton.fcop_port.reads import TaskReads
from baton.fcop_port.records import FcopDict, ReportInfo, TaskInfo, TransitionInfo, transition_info

__all__ = ["AUTHORIZATION_TTL", "TaskTransitions"]

AUTHORIZATION_TTL = timedelta(minutes=10)
"""Lifetime of a minted authorization: long enough to consume, short enough to be useless later."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class _Verdict:
    """One reviewer's T4/T5 decision, as it travels through the authorized edge."""

    decision: Literal["approve", "reject"]
    approver: str
    reason: str
    review_ref: str | None
    """The reviewer's own evidence REVIEW, when it already wrote one."""

    @property
    def to_stage(self) -> str:
        return "done" if self.decision == "approve" else "active"

    @property
    def tool(self) -> str:
        return f"{self.decision}_task"

    @property
    def review_kind(self) -> str:
        return "acceptance" if self.decision == "approve" else "rejection"


class TaskTransitions(Evidence, TaskReads):
    """The port's T2–T5 (see the module docstring)."""

    def claim(self, task_id: str, *, actor: str) -> TransitionInfo:
        """T2 (inbox → active); the result's ``attempt_id`` is the new attempt.

        A lost race raises :class:`~baton.fcop_errors.LifecycleConflict`.
        """
        result = self._fast(
            "transition",
            lambda lc: lc.claim(task_id, actor=actor),
            task_id=task_id,
            from_stage="inbox",
            to_stage="active",
            tool="claim_task",
            actor=actor,
        )
        return transition_info(result)

    def submit(self, task_id: str, *, actor: str, report_ref: str | None = None) -> TransitionInfo:
        """T3 (active → review) with the current attempt's REPORT head as evidence."""
        kwargs: FcopDict = {
            "task_id": task_id,
            "from_stage": "active",
            "to_stage": "review",
            "tool": "submit_task",
            "actor": actor,
        }
        if report_ref is not None:
            kwargs["report_ref"] = report_ref
        result = self._fast(
            "transition",
            lambda lc: lc.submit(task_id, actor=actor, report_ref=report_ref),
            **kwargs,
        )
        return transition_info(result)

    def approve(
        self, task_id: str, *, approver: str, reason: str = "", review_ref: str | None = None
    ) -> TransitionInfo:
        """T4 (review → done): acceptance REVIEW, authorization, transition."""
        return self._authorized_edge(task_id, _Verdict("approve", approver, reason, review_ref))

    def reject(
        self, task_id: str, *, approver: str, reason: str = "", review_ref: str | None = None
    ) -> TransitionInfo:
        """T5 (review → active): rejection REVIEW, authorization, transition; new attempt."""
        return self._authorized_edge(task_id, _Verdict("reject", approver, reason, review_ref))

    def _authorized_edge(self, task_id: str, verdict: _Verdict) -> TransitionInfo:
        """The whole authorized edge. Policy: only the TASK's sender or the human decides.

        Steps, each through Core: (1) the evidence REVIEW (``acceptance`` /
        ``approved`` or ``rejection`` / ``rejected``) bound to the attempt and
        referencing the REPORT head, reused when the reviewer already wrote it
        (e.g. through the MCP ``review_report`` tool); (2) a single-use
        authorization REVIEW via ``mark_human_approved`` carrying baton's
        HMAC issuer proof, checked by the trusted evaluator on publication;
        (3) the transition consuming both, checked by the evaluator again.
        """
        if self.authority is None or not self.can_authorize:
            raise AuthorizationRefused(
                "this workspace cannot authorize T4/T5: "
                + (
                    "no trusted evaluator is registered"
                    if self.authority is None
                    else f"its manifest did not adopt Profile {self.authority.profile_ref!r} "
                    "(the Profile set is fixed when the workspace is created)"
                ),
                code="AUTHORIZATION_PROFILE_UNAVAILABLE",
                subject_ref=task_id,
            )
        task = self.read_task(task_id)
        self.check_reviewer(task, verdict.approver)
        if task.stage != "review" or task.attempt_id is None:
            raise CODE_TO_ERROR["INVALID_TRANSITION"](
                f"{task_id} is in {task.stage}, not review", code="INVALID_TRANSITION"
            )
        try:
            return self._authorize_and_move(task, verdict)
        except FcopProtocolError as exc:
            if exc.code != "RECOVERY_REQUIRED" or "conflicting receipt" not in str(exc):
                raise
            # A crash after this round's receipt, before its target (rule R5): finish that
            # move from its own receipt instead of authorizing a second one.
            replayed = self.replay_prepared(task_id, from_stage="review")
            if replayed is None:
                raise
            return replayed

    def replay_prepared(self, task_id: str, *, from_stage: str) -> TransitionInfo | None:
        """R5: replay the exact request of ``task_id``'s one unfinished (``PREPARED``) move.

        ``fcop`` finishes a move whose receipt matches a request exactly; an
        authorized move (T4/T5) can only be replayed with its own REVIEW and
        authorization refs, which are in the receipt. None when there is no such
        receipt with its source still in place.
        """
        source = self.stage_dir(from_stage) / f"{task_id}.md"
        if not source.is_file():
            return None
        needle = f'"task_id":"{task_id}"'.encode()
        pending = []
        for path in sorted((self.fcop_dir / "operations").glob("transition-*.json")):
            data = path.read_bytes()
            if needle not in data:
                continue
            value = json.loads(data)
            if (
                value.get("stage") == "PREPARED"
                and value.get("from_stage") == from_stage
                and value.get("task_id") == task_id
                and not (self.root / str(value.get("target_path", ""))).exists()
            ):
                pending.append(value)
        if len(pending) != 1:
            return None
        value = pending[0]
        request: FcopDict = {
            name: value[name] for name in ("task_id", "from_stage", "to_stage", "tool", "actor")
        }
        for name in ("report_ref", "review_ref", "authorization_ref", "family_digest"):
            if value.get(name) is not None:
                request[name] = value[name]
        if value.get("request_profile_ref") is not None:
            request["profile_ref"] = value["request_profile_ref"]
        return transition_info(self._call("transition", **request))

    def _authorize_and_move(self, task: TaskInfo, verdict: _Verdict) -> TransitionInfo:
        assert self.authority is not None and task.attempt_id is not None
        attempt, approver, to_stage = task.attempt_id, verdict.approver, verdict.to_stage
        head = self.find_report_head(task.task_id, attempt)
        if head is None:
            raise EvidenceError(
                f"{task.task_id}: no REPORT for attempt {attempt}", code="REPORT_REQUIRED"
            )
        evidence = self._evidence_review(task, verdict, head)
        expectation = Expectation(
            issuer=approver,
            subject_ref=task.task_id,
            from_stage="review",
            to_stage=to_stage,
            attempt_id=attempt,
        )
        issued = _now()
        with self.authority.expecting(expectation):
            auth = self._call(
                "mark_human_approved",
                review_id=evidence,
                decision="approved",
                approver=approver,
                profile_ref=self.authority.profile_ref,
                from_stage="review",
                to_stage=to_stage,
                attempt_id=attempt,
                issued_at=issued.isoformat(),
                expires_at=(issued + AUTHORIZATION_TTL).isoformat(),
                issuer_proof=self.authority.mint(expectation, issued_at=issued.isoformat()),
                comment=f"{approver} authorizes review -> {to_stage} for {task.task_id}",
            )
            tool = verdict.tool
            refs = {
                "report_ref": head.report_id,
                "review_ref": evidence,
                "authorization_ref": auth["review_id"],
                "profile_ref": self.authority.profile_ref,
            }
            result = self._fast(
                "transition",
                lambda lc: lc.approve_or_reject(task.task_id, tool=tool, actor=approver, **refs),
                task_id=task.task_id,
                from_stage="review",
                to_stage=to_stage,
                tool=tool,
                actor=approver,
                **refs,
            )
        return dataclasses.replace(
            transition_info(result), evidence_ref=(head.report_id, evidence, auth["review_id"])
        )

    def _evidence_review(self, task: TaskInfo, verdict: _Verdict, head: ReportInfo) -> str:
        assert task.attempt_id is not None
        approver, review_ref, kind = verdict.approver, verdict.review_ref, verdict.review_kind
        if review_ref is not None:
            review = self.find_decision(task.task_id, task.attempt_id, reviewer=approver)
            if review is None or review.review_id != review_ref or review.review_kind != kind:
                raise AuthorizationRefused(
                    f"{review_ref} is not {approver}'s {kind} of {task.task_id} "
                    f"attempt {task.attempt_id}",
                    code="AUTHORIZATION_INVALID",
                    subject_ref=task.task_id,
                )
            if head.report_id not in review.references:
                raise EvidenceError(
                    f"{review_ref} does not reference the REPORT head {head.report_id}",
                    code="REPORT_HEAD_AMBIGUOUS",
                    subject_ref=task.task_id,
                )
            return review_ref
        return self.write_decision_review(
            task_id=task.task_id,
            attempt_id=task.attempt_id,
            report_ref=head.report_id,
            reviewer=approver,
            recipient=task.recipient,
            decision=verdict.decision,
            reason=verdict.reason,
        )

    def check_reviewer(self, task: TaskInfo, approver: str) -> None:
        """baton's policy: the TASK's sender (who delegated it) or the human decides."""
        if approver not in (task.sender, self.human):
            raise AuthorizationRefused(
                f"{approver} may not review {task.task_id}: only its sender "
                f"{task.sender} or {self.human} may",
                code="AUTHORIZATION_INVALID",
                subject_ref=task.task_id,
            )
