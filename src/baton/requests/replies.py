"""What the agent receives: a validated answer turned back into the native reply.

Answers are stored with opaque ids (``question-N``/``option-N``) and abstract
decisions (``allow``); the agent needs its own ids and its own wire shape. This
module is the only place that maps back, and it maps only *validated* answers,
so a forged id can never reach an agent. Shapes follow ACP
(``session/request_permission``, ``elicitation/create``) and Cursor's
extensions (``cursor/ask_question``, ``cursor/create_plan``: ``{"outcome":
{"outcome": ...}}``).
"""

from __future__ import annotations

from typing import Any

from baton.request_model.documents import (
    Answer,
    ElicitationAnswer,
    ElicitationRequest,
    PermissionAnswer,
    PermissionRequest,
    PlanAnswer,
    PlanRequest,
    QuestionAnswer,
    QuestionRequest,
    RequestDocument,
)
from baton.request_model.errors import InvalidAnswer, RequestError
from baton.requests.validate import choose_permission_option, validate_answer

__all__ = ["cancelled_reply", "expired_reply", "native_selections", "reply_for"]


def native_selections(
    document: QuestionRequest, answer: QuestionAnswer
) -> list[tuple[str, list[str]]]:
    """``(native question id, [native option ids])`` in document order."""
    normalized = validate_answer(document, answer)
    assert isinstance(normalized, QuestionAnswer)
    out: list[tuple[str, list[str]]] = []
    for selection in normalized.selections:
        question = document.question(selection.question_id)
        assert question is not None  # validated above
        out.append(
            (
                question.native_id,
                [o.native_id for o in question.options if o.id in selection.option_ids],
            )
        )
    return out


# Any: JSON out (a JSON-RPC result for the agent).
def reply_for(document: RequestDocument, answer: Answer) -> dict[str, Any]:
    """The JSON-RPC ``result`` to send to the agent for this answer."""
    if isinstance(document, PermissionRequest) and isinstance(answer, PermissionAnswer):
        option = choose_permission_option(document, answer)
        return {"outcome": {"outcome": "selected", "optionId": option.option_id}}
    if isinstance(document, QuestionRequest) and isinstance(answer, QuestionAnswer):
        if answer.outcome == "skipped":
            return {"outcome": {"outcome": "skipped", "reason": answer.reason or "skipped"}}
        return {
            "outcome": {
                "outcome": "answered",
                "answers": [
                    {"questionId": q, "selectedOptionIds": opts}
                    for q, opts in native_selections(document, answer)
                ],
            }
        }
    if isinstance(document, PlanRequest) and isinstance(answer, PlanAnswer):
        validate_answer(document, answer)
        if answer.decision == "accept":
            return {"outcome": {"outcome": "accepted"}}
        outcome: dict[str, Any] = {"outcome": "rejected"}
        if answer.reason:
            outcome["reason"] = answer.reason
        return {"outcome": outcome}
    if isinstance(document, ElicitationRequest) and isinstance(answer, ElicitationAnswer):
        form = validate_answer(document, answer)
        assert isinstance(form, ElicitationAnswer)
        if form.action == "accept":
            content = {
                k: list(v) if isinstance(v, tuple) else v for k, v in (form.content or {}).items()
            }
            return {"action": "accept", "content": content}
        return {"action": form.action}
    raise RequestError(f"a {document.kind} request has no agent reply")


# Any: JSON out (a JSON-RPC result for the agent).
def cancelled_reply(document: RequestDocument) -> dict[str, Any]:
    """The reply for a request whose turn ended first (ACP §1.7: ``cancelled``)."""
    if isinstance(document, ElicitationRequest):
        return {"action": "cancel"}
    if isinstance(document, PermissionRequest | QuestionRequest | PlanRequest):
        return {"outcome": {"outcome": "cancelled"}}
    raise RequestError(f"a {document.kind} request has no agent reply")


# Any: JSON out (a JSON-RPC result for the agent).
def expired_reply(document: RequestDocument) -> dict[str, Any]:
    """The reply for a request nobody answered in time: a denial, not a cancellation.

    Surfaces promise "denied at HH:MM if nobody answers", and the turn goes on
    (ACP keeps ``cancelled`` for a turn being cancelled: agents end the turn on
    it). So a permission selects the agent's own rejection (``reject_once``,
    else ``reject_always``), a plan is rejected, a question skipped and a form
    declined; only a permission offering no rejection at all falls back to
    ``cancelled``, the one reply that allows nothing.
    """
    reason = "no answer in time"
    if isinstance(document, PermissionRequest):
        try:
            return reply_for(document, PermissionAnswer(decision="deny"))
        except InvalidAnswer:  # the agent offered no rejection
            return cancelled_reply(document)
    if isinstance(document, PlanRequest):
        return {"outcome": {"outcome": "rejected", "reason": reason}}
    if isinstance(document, QuestionRequest):
        return {"outcome": {"outcome": "skipped", "reason": reason}}
    if isinstance(document, ElicitationRequest):
        return {"action": "decline"}
    raise RequestError(f"a {document.kind} request has no agent reply")
