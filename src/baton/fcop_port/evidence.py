"""REPORTs, REVIEWs and ISSUEs: the append-only envelopes beside the TASKs, written and found.

FCoP's ADR-0002: "REPORT done is evidence; TASK done is lifecycle state". Every
append goes through Core (a REPORT through baton's O(1) ``write_report`` when the
lifecycle writer is on). Look-ups avoid Core's quadratic ``list_reports``
(which re-scans every REPORT once per (subject, attempt) group): the candidates
are the lifecycle's REPORT/REVIEW index (:mod:`baton.fcop_port.lifecycle.subjects`;
every file when the writer is off), prefiltered by their literal ``subject_ref:
TASK-…`` frontmatter line, and each match is validated through Core
(``inspect_state(envelope_path=…)``). The head is fcop's rule
(:func:`~baton.fcop_port.lifecycle.reports.head_of`), the one T3 applies.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from baton.fcop_errors import InvalidEnvelope
from baton.fcop_port.base import PortBase
from baton.fcop_port.calls import fcop_errors
from baton.fcop_port.envelope_text import frontmatter_has, split_body
from baton.fcop_port.records import FcopDict, ReportInfo, ReviewInfo, report_info, review_info

__all__ = ["Evidence"]

_REVIEW_DECISIONS = {"acceptance": "approved", "rejection": "rejected"}


class Evidence(PortBase):
    """The port's REPORT, REVIEW and ISSUE appends and look-ups (see the module docstring)."""

    def write_report(
        self,
        *,
        task_id: str,
        attempt_id: str,
        sender: str,
        recipient: str,
        result: str,
        body: str,
    ) -> ReportInfo:
        """Append a REPORT for ``attempt_id``; a second one replaces the current head.

        Core allows one ``final`` REPORT per attempt; an agent that reports
        again in the same attempt (a correction) gets a ``replacement`` that
        references the current head, so the latest word is the one T3 submits.
        """
        head = self.find_report_head(task_id, attempt_id)
        kwargs: FcopDict = {
            "workspace_id": self.workspace_id,
            "sender": sender,
            "recipient": recipient,
            "subject_ref": task_id,
            "attempt_id": attempt_id,
            "body": body,
            "result": result,
            "report_kind": "final" if head is None else "replacement",
        }
        if head is not None:
            kwargs["references"] = [head.report_id]
        written = self._fast("write_report", lambda lc: lc.write_report(**kwargs), **kwargs)
        return report_info({**kwargs, "report_id": written["report_id"]}, body)

    def write_issue(
        self,
        *,
        sender: str,
        recipient: str,
        severity: str,
        body: str,
        subject_ref: str | None = None,
    ) -> str:
        """Append an ISSUE about a TASK, or about the workspace when ``subject_ref`` is None."""
        written = self._call(
            "write_issue",
            workspace_id=self.workspace_id,
            sender=sender,
            recipient=recipient,
            subject_ref=subject_ref or f"workspace:{self.workspace_id}",
            severity=severity,
            body=body,
        )
        return str(written["issue_id"])

    def write_decision_review(
        self,
        *,
        task_id: str,
        attempt_id: str,
        report_ref: str,
        reviewer: str,
        recipient: str,
        decision: Literal["approve", "reject"],
        reason: str,
    ) -> str:
        """Append the acceptance/rejection REVIEW (evidence only; moves nothing)."""
        kind = "acceptance" if decision == "approve" else "rejection"
        written = self._call(
            "write_review",
            workspace_id=self.workspace_id,
            sender=reviewer,
            recipient=recipient,
            subject_ref=task_id,
            review_kind=kind,
            decision=_REVIEW_DECISIONS[kind],
            attempt_id=attempt_id,
            references=[report_ref],
            body=reason or f"{kind} by {reviewer}",
        )
        return str(written["review_id"])

    def inspect_envelope(self, path: Path) -> FcopDict:
        """Any envelope's fields, validated by Core (schema, identity, relations, no links)."""
        rel = path.relative_to(self.root).as_posix()
        fields: FcopDict = self._call("inspect_state", envelope_path=rel)
        return fields

    def reports_for(self, task_id: str, attempt_id: str | None = None) -> list[ReportInfo]:
        """REPORTs about ``task_id`` (optionally one attempt), each validated by Core."""
        needle = f"\nsubject_ref: {task_id}\n".encode()
        reports = []
        for path in self._candidates("REPORT", task_id, attempt_id):
            if not frontmatter_has(path, needle):
                continue
            fields = self.inspect_envelope(path)
            if fields.get("subject_ref") != task_id:
                continue
            if attempt_id is not None and fields.get("attempt_id") != attempt_id:
                continue
            reports.append(report_info(fields, split_body(path.read_bytes())))
        reports.sort(key=lambda r: (r.created_at, r.report_id))
        return reports

    def find_report_head(self, task_id: str, attempt_id: str) -> ReportInfo | None:
        """The current attempt's REPORT head (Core's rule), or None when none exists.

        Raises :class:`EvidenceError` when replacements do not form one chain.
        """
        from baton.fcop_port.lifecycle.reports import head_of

        group = self.reports_for(task_id, attempt_id)
        if not group:
            return None
        fields = [
            (
                r,
                {
                    "report_id": r.report_id,
                    "report_kind": r.report_kind,
                    "references": list(r.references),
                },
            )
            for r in group
        ]
        with fcop_errors():
            head, _ = head_of(fields, task_id)
        return head

    def _candidates(self, kind: str, subject: str, attempt_id: str | None) -> list[Path]:
        """The files of ``kind`` that may be about ``subject``: the index, or every file."""
        if self._lifecycle is not None:
            return self._lifecycle.candidates(kind, subject, attempt_id)
        folder = self.fcop_dir / ("reports" if kind == "REPORT" else "reviews")
        with os.scandir(folder) as entries:
            return sorted(
                Path(e.path)
                for e in entries
                if e.name.startswith(f"{kind}-") and e.name.endswith(".md")
            )

    def find_decision(
        self, task_id: str, attempt_id: str, *, reviewer: str | None = None
    ) -> ReviewInfo | None:
        """The latest acceptance/rejection REVIEW for this attempt (by ``reviewer``)."""
        needle = f"\nsubject_ref: {task_id}\n".encode()
        found: list[ReviewInfo] = []
        for path in self._candidates("REVIEW", task_id, attempt_id):
            if not frontmatter_has(path, needle):
                continue
            fields = self.inspect_envelope(path)
            kind = fields.get("review_kind")
            if (
                kind not in _REVIEW_DECISIONS
                or fields.get("decision") != _REVIEW_DECISIONS[kind]
                or fields.get("subject_ref") != task_id
                or fields.get("attempt_id") != attempt_id
                or (reviewer is not None and fields.get("sender") != reviewer)
            ):
                continue
            found.append(review_info(fields, split_body(path.read_bytes())))
        found.sort(key=lambda r: (r.created_at, r.review_id))
        return found[-1] if found else None

    def read_review(self, review_id: str) -> ReviewInfo:
        """One REVIEW by id, validated by Core."""
        if not re.fullmatch(r"REVIEW-[A-Za-z0-9][A-Za-z0-9._-]*", review_id):
            raise InvalidEnvelope(f"not a REVIEW id: {review_id!r}", code="INVALID_ENVELOPE")
        path = self.fcop_dir / "reviews" / f"{review_id}.md"
        return review_info(self.inspect_envelope(path), split_body(path.read_bytes()))
