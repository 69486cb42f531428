"""The ledger's refusals, all :class:`~baton.errors.RequestError` subclasses.

Surfaces catch ``RequestError`` once and print ``Type: message``; the subclasses
exist so callers (the runner, the HTTP layer) can map a refusal to the right
reply without parsing messages: an oversize document becomes a JSON-RPC error to
the agent plus ``request.rejected`` and ``security.payload_rejected`` events, a
conflicting answer becomes HTTP 409, an unknown id 404, and so on. Every message
names the request and the problem, because a human reads it.
"""

from __future__ import annotations

from baton.errors import RequestError

__all__ = [
    "AnswerConflict",
    "IllegalTransition",
    "InvalidAnswer",
    "InvalidDocument",
    "NotPending",
    "PayloadTooLarge",
    "RequestError",
    "StaleAnswer",
    "UnknownRequest",
]


class InvalidDocument(RequestError):
    """A request document is malformed (the agent sent something we cannot present)."""


class PayloadTooLarge(InvalidDocument):
    """A request document is over a size limit; it is rejected, never truncated.

    ``what`` names the limit (``document`` for the 196 KiB UTF-8 cap on the
    canonical JSON, ``description`` for the 100,000-character question text cap),
    ``size`` the measured value and ``limit`` the cap, in the same unit.
    """

    def __init__(self, message: str, *, what: str, size: int, limit: int) -> None:
        super().__init__(message)
        self.what = what
        self.size = size
        self.limit = limit


class InvalidAnswer(RequestError):
    """An answer does not fit its request: forged, duplicate, missing or out of range."""


class StaleAnswer(InvalidAnswer):
    """An answer is bound to a plan revision that is not the persisted one."""


class NotPending(RequestError):
    """The request is no longer waiting for an answer (cancelled, expired, ...)."""


class AnswerConflict(NotPending):
    """The request was already answered, with a different answer."""


class UnknownRequest(RequestError):
    """No request has this id (or the id prefix is ambiguous)."""


class IllegalTransition(RequestError):
    """A state-machine move that the transition table does not allow."""

    def __init__(self, message: str, *, state: str | None, event: str) -> None:
        super().__init__(message)
        self.state = state
        self.event = event
