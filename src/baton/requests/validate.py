"""Answer validation against a request document: pure, and run twice.

A surface (CLI, web, a notifier's reply) validates an answer before sending it
so the human gets an immediate, specific error; the ledger validates it again
inside the write transaction against the *persisted* document, because the
surface may be another process holding an outdated copy, or a forger. Both use
:func:`validate_answer`, which returns the answer *normalized* (selections in
document order, the permission option resolved to the agent's own ``optionId``)
so that "the same answer twice" can be decided by comparing canonical JSON.

Every refusal names the request element and the problem: a forged id, a
duplicate, a missing answer, too many selections for a single-choice question,
a stale plan revision, a value outside an elicitation field's constraints.
"""

from __future__ import annotations

from baton.request_model.documents import Answer, RequestDocument
from baton.request_model.errors import InvalidAnswer
from baton.requests.kinds import rules_for
from baton.requests.kinds.permission import choose_permission_option

__all__ = ["choose_permission_option", "validate_answer"]


def validate_answer(document: RequestDocument, answer: Answer) -> Answer:
    """Return ``answer`` normalized, or raise :class:`InvalidAnswer` saying what is wrong."""
    if answer.kind != document.kind:
        raise InvalidAnswer(f"a {answer.kind} answer cannot answer a {document.kind} request")
    rules = rules_for(document)
    if not isinstance(answer, rules.answer_type):  # pragma: no cover - kinds agree above
        raise InvalidAnswer(f"cannot validate a {answer.kind} answer")
    normalized: Answer = rules.validate(document, answer)
    return normalized
