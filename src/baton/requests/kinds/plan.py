"""A plan approval: an answer approves one revision; a stale one is refused."""

from __future__ import annotations

from typing import Any

from baton.request_model.documents import PlanAnswer, PlanRequest
from baton.request_model.errors import StaleAnswer
from baton.requests.kinds.rules import AutomaticDecision, KindRules, Reply

__all__ = ["PLAN"]


def _validate(document: PlanRequest, answer: PlanAnswer) -> PlanAnswer:
    if answer.revision != document.revision:
        raise StaleAnswer(
            f"stale plan answer: it approves revision {answer.revision[:12] or '(none)'}, "
            f"but the plan awaiting approval is revision {document.revision[:12]}"
        )
    return answer


def _reply(document: PlanRequest, answer: PlanAnswer) -> Reply:
    _validate(document, answer)
    if answer.decision == "accept":
        return {"outcome": {"outcome": "accepted"}}
    outcome: dict[str, Any] = {"outcome": "rejected"}
    if answer.reason:
        outcome["reason"] = answer.reason
    return {"outcome": outcome}


def _cancelled(document: PlanRequest) -> Reply:
    return {"outcome": {"outcome": "cancelled"}}


def _expired(document: PlanRequest) -> Reply:
    return {"outcome": {"outcome": "rejected", "reason": "no answer in time"}}


def _automatic(document: PlanRequest, decision: AutomaticDecision) -> PlanAnswer:
    return PlanAnswer(
        decision=decision.plan_choice,
        revision=document.revision,
        reason=None if decision.plan_choice == "accept" else decision.reason,
    )


PLAN: KindRules[PlanRequest, PlanAnswer] = KindRules(
    answer_type=PlanAnswer,
    validate=_validate,
    reply=_reply,
    cancelled_reply=_cancelled,
    expired_reply=_expired,
    automatic_answer=_automatic,
)
