"""Per-kind rules for human requests, keyed by document type in one table.

What a permission, question, plan, form or review means (how its answer is
validated, what the agent is sent back) lives in that kind's module; generic
code asks :func:`rules_for` once instead of testing every type. A document type
without a row fails loudly (:class:`~baton.request_model.errors.RequestError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from baton.request_model.documents import (
    ElicitationRequest,
    PermissionRequest,
    PlanRequest,
    QuestionRequest,
    RequestDocument,
    ReviewRequest,
)
from baton.request_model.errors import RequestError
from baton.requests.kinds.elicitation import ELICITATION
from baton.requests.kinds.permission import PERMISSION
from baton.requests.kinds.plan import PLAN
from baton.requests.kinds.question import QUESTION
from baton.requests.kinds.review import REVIEW
from baton.requests.kinds.rules import KindRules

__all__ = ["REQUEST_KINDS", "KindRules", "rules_for"]

# Any: each row is typed by its own document and answer types; the table holds them all.
REQUEST_KINDS: Mapping[type[RequestDocument], KindRules[Any, Any]] = MappingProxyType(
    {
        PermissionRequest: PERMISSION,
        QuestionRequest: QUESTION,
        PlanRequest: PLAN,
        ElicitationRequest: ELICITATION,
        ReviewRequest: REVIEW,
    }
)


# Any: see REQUEST_KINDS.
def rules_for(document: RequestDocument) -> KindRules[Any, Any]:
    """The rules of ``document``'s kind; a type without a row is a bug, said loudly."""
    rules = REQUEST_KINDS.get(type(document))
    if rules is None:
        raise RequestError(f"no rules for a {type(document).__name__} request (add a row)")
    return rules
