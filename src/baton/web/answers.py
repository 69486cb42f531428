"""Answering a request from the web: validated here, then again by the ledger.

"Validate twice" (see ``docs/requests.md``): the surface checks the answer
against the document it read, so the human gets the specific error at once,
and the ledger checks it again inside its write transaction against the
*persisted* document, which is the check that actually protects the agent (the
page may be stale, or the request forged). This module is the web's half, plus
the one table that turns the ledger's refusals into HTTP statuses.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

from baton.app.facade.requests import (
    AnswerConflict,
    AnswerResult,
    IllegalTransition,
    InvalidAnswer,
    Ledger,
    NotPending,
    ReviewAnswer,
    UnknownRequest,
    parse_answer,
    validate_answer,
)
from baton.app.worktrees import approval_refusal
from baton.errors import BatonError, RequestError, StoreError

__all__ = ["WEB_RULE", "status_for", "submit_answer"]

WEB_RULE: Final = "web"
"""Recorded as the ``rule`` of every answer given through the web (``decided_by="human"``)."""

_STATUS: Final[tuple[tuple[type[BatonError], int], ...]] = (
    (UnknownRequest, 404),
    (AnswerConflict, 409),
    (NotPending, 409),
    (IllegalTransition, 409),
    (InvalidAnswer, 422),  # includes StaleAnswer: forged, malformed, stale
    (RequestError, 422),
    (StoreError, 503),
)
"""Most specific first: ``AnswerConflict`` is a ``NotPending``, ``StaleAnswer`` an ``InvalidAnswer``."""


def status_for(exc: BatonError) -> int:
    """The HTTP status for a refusal (500 for an error this table does not know)."""
    return next((status for cls, status in _STATUS if isinstance(exc, cls)), 500)


async def submit_answer(
    ledger: Ledger, request_id: str, data: object, *, project_dir: Path | None = None
) -> AnswerResult:
    """Answer ``request_id`` (an id or a unique prefix) with the answer in ``data``.

    Order matters for the status a client sees: an unknown id is a 404 before
    the body is even looked at; a request that can no longer take any answer
    (cancelled, expired, rejected on arrival) is a 409; then the body must be a
    valid answer for *this* document (422); only then does the ledger decide
    between a first answer, a replay of the same answer (``replayed=True``) and
    a conflicting one (409).
    """
    full_id = await ledger.resolve_id(request_id)
    record = await ledger.get(full_id)
    closed = record.closed_to_answers()
    if closed is not None:
        raise closed
    assert record.document is not None
    answer = parse_answer(data)
    validate_answer(record.document, answer)  # first check, against the document we read
    if (
        project_dir is not None
        and isinstance(answer, ReviewAnswer)
        and answer.decision == "approve"
    ):
        refused = await asyncio.to_thread(approval_refusal, project_dir, ledger.store, record)
        if refused is not None:
            raise InvalidAnswer(f"{refused}; the review stays open: send it back to rebase")
    return await ledger.answer(full_id, answer, decided_by="human", rule=WEB_RULE)
