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

from baton.request_model.documents import Answer, RequestDocument
from baton.request_model.errors import RequestError
from baton.requests.kinds import rules_for
from baton.requests.kinds.question import native_selections

__all__ = ["cancelled_reply", "expired_reply", "native_selections", "reply_for"]


# Any: JSON out (a JSON-RPC result for the agent).
def reply_for(document: RequestDocument, answer: Answer) -> dict[str, Any]:
    """The JSON-RPC ``result`` to send to the agent for this answer."""
    rules = rules_for(document)
    if rules.reply is None or not isinstance(answer, rules.answer_type):
        raise RequestError(f"a {document.kind} request has no agent reply")
    return rules.reply(document, answer)


# Any: JSON out (a JSON-RPC result for the agent).
def cancelled_reply(document: RequestDocument) -> dict[str, Any]:
    """The reply for a request whose turn ended first (ACP §1.7: ``cancelled``)."""
    rules = rules_for(document)
    if rules.cancelled_reply is None:
        raise RequestError(f"a {document.kind} request has no agent reply")
    return rules.cancelled_reply(document)


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
    rules = rules_for(document)
    if rules.expired_reply is None:
        raise RequestError(f"a {document.kind} request has no agent reply")
    return rules.expired_reply(document)
