"""A review of a finished task: a human's decision, with no agent waiting for a reply."""

from __future__ import annotations

from baton.request_model.documents import ReviewAnswer, ReviewRequest
from baton.requests.kinds.rules import KindRules

__all__ = ["REVIEW"]


def _validate(document: ReviewRequest, answer: ReviewAnswer) -> ReviewAnswer:
    return answer


REVIEW: KindRules[ReviewRequest, ReviewAnswer] = KindRules(
    answer_type=ReviewAnswer,
    validate=_validate,
    reply=None,
    cancelled_reply=None,
    expired_reply=None,
    automatic_answer=None,
)
