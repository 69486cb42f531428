"""Requests in one sentence: what was decided, by whom, under which rule, and when it expires.

Shared by the live inbox (a settled card says what happened to it), the
decisions history and the request cards, so a decision reads the same everywhere.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Final

from baton.app.facade.requests import (
    ElicitationAnswer,
    PermissionAnswer,
    PlanAnswer,
    QuestionAnswer,
    RequestRecord,
    ReviewAnswer,
    State,
)
from baton.app.facade.runs import stall_text

__all__ = [
    "decided_by_text",
    "decision_text",
    "expires_at",
    "parse_ts",
    "prompt_summary",
    "run_outcome",
]


def parse_ts(value: str) -> datetime | None:
    """An ISO timestamp as stored (``...Z`` or with an offset), or None."""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def expires_at(record: RequestRecord) -> str | None:
    """When an unanswered request expires, if whoever waits for it set a deadline.

    The deadline belongs to the request (``expires_at``, coming with the store's
    request migration: set from ``--wait-timeout`` by the waiting process). Until
    a record carries one, there is no countdown, never a guessed one.
    """
    if record.state is not State.PENDING:
        return None
    value = getattr(record, "expires_at", None)
    return value if isinstance(value, str) and parse_ts(value) is not None else None


def _answer_text(answer: Any) -> str:
    if isinstance(answer, PermissionAnswer):
        if answer.decision == "deny":
            return "denied"
        if answer.grant is not None:
            return f"allowed, and granted for this {answer.grant.scope}"
        return "allowed once"
    if isinstance(answer, QuestionAnswer):
        if answer.outcome == "skipped":
            return "skipped"
        chosen = sum(len(s.option_ids) for s in answer.selections)
        return f"answered ({chosen} option{'s' if chosen != 1 else ''} chosen)"
    if isinstance(answer, PlanAnswer):
        return "plan accepted" if answer.decision == "accept" else "plan rejected"
    if isinstance(answer, ElicitationAnswer):
        return {"accept": "form submitted", "decline": "declined", "cancel": "cancelled"}[
            answer.action
        ]
    if isinstance(answer, ReviewAnswer):
        return "accepted" if answer.decision == "approve" else "sent back"
    return "answered"


def decided_by_text(record: RequestRecord) -> str:
    """``by you (web dashboard)``, ``by policy (reads)``, ``headless (no human)``."""
    if record.decided_by is None:
        return ""
    who = {"human": "by a human", "policy": "by policy", "headless": "headless"}.get(
        record.decided_by, record.decided_by
    )
    if record.rule and record.rule.startswith("grant:"):
        return f"by your grant {record.rule.removeprefix('grant:')}"
    if not record.rule:
        return who
    where = _RULE_LABELS.get(record.rule, record.rule) if record.decided_by == "human" else None
    return f"{who} ({where or record.rule})"


_RULE_LABELS = {"web": "web dashboard", "cli": "command line", "terminal": "terminal"}
"""Where a human answered, in words (the ledger's rule names: cli, web, terminal)."""


def decision_text(record: RequestRecord) -> str:
    """What happened to the request, as one line (empty while it is pending)."""
    if record.state is State.PENDING:
        return ""
    if record.answer is not None:
        text = f"{_answer_text(record.answer)} {decided_by_text(record)}".strip()
        reason = getattr(record.answer, "reason", None) or record.reason
        if reason:
            text += f": {reason}"
        if record.state is State.DELIVERED:
            text += " · delivered"
        elif record.state is not State.ANSWERED:
            text += f" · {record.state.value}"
        return text
    why = f": {record.reason}" if record.reason else ""
    return f"{record.state.value}{why}"


def run_outcome(
    status: str, counts: dict[str, int], pending: int, stalled_ms: int | None = None
) -> dict[str, str]:
    """The status a person should read for a run: ``{"label", "tone"}``.

    The stored status says how the process ended; this also says what it means:
    a run blocked on a human is "waiting for you", not "running"; a run whose agent
    has gone silent says "stalled" (``stalled_ms``: its silence, see
    :mod:`baton.store.live_turns`); a run whose steps failed is not a green "completed".
    """
    failed = counts.get("tool.failed", 0)
    ok = counts.get("tool.completed", 0)
    if status == "running":
        if pending:
            return {"label": f"waiting for you ({pending})", "tone": "warn"}
        if stalled_ms is not None:
            return {"label": f"stalled: {stall_text(stalled_ms)}", "tone": "warn"}
        return {"label": "running", "tone": "info"}
    if status == "completed":
        if pending:  # `baton up --until-idle` ends with reviews waiting for you
            return {"label": f"stopped, waiting for you ({pending})", "tone": "warn"}
        if counts.get("turn.failed", 0):
            return {"label": "completed, with failed turns", "tone": "bad"}
        if failed and not ok:
            return {"label": f"failed: every step failed ({failed})", "tone": "bad"}
        if failed:
            return {
                "label": f"completed, {failed} failed step{'s' if failed > 1 else ''}",
                "tone": "warn",
            }
        return {"label": "completed", "tone": "ok"}
    if status == "failed":
        return {"label": "failed", "tone": "bad"}
    return {"label": status, "tone": "bad" if status == "interrupted" else "warn"}


_ROLE_PROMPT: Final = re.compile(r"\A\[baton\] ([^\n]+)")
_ROLE: Final = re.compile(r"^You are ([A-Za-z0-9_-]+)\b", re.M)
_SUBJECT: Final = re.compile(r"^Subject: +(.+)$", re.M)
_ABOUT: Final = re.compile(r"\bon TASK-\S+ \((.+?)\)")


def prompt_summary(prompt: str) -> str:
    """What a prompt asks, in one line: a role prompt (``coordination.header``'s
    ``[baton] …`` prompts, which repeat the same role context every turn) as
    ``ROLE: what · subject``, anything else as is.

    The dashboard's script has the twin of this rule for the run view (``promptSummary``).
    """
    head = _ROLE_PROMPT.match(prompt)
    if head is None:
        return prompt
    what = head.group(1).strip()
    kind = "" if what == "FCoP role context" else what.rsplit(":", 1)[-1].strip().lower()
    role = _ROLE.search(prompt)
    subject = _SUBJECT.search(prompt) or _ABOUT.search(prompt)
    said = " · ".join(x for x in (kind, subject.group(1).strip() if subject else "") if x)
    return (f"{role.group(1)}: " if role else "") + (said or what)
