"""What one request kind means, as one record: the row type of :data:`REQUEST_KINDS`.

Each kind module (permission, question, plan, elicitation, review) builds one
:class:`KindRules`; the generic code (:func:`baton.requests.validate.validate_answer`,
:mod:`baton.requests.replies`) looks the kind up once instead of testing every type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from baton.request_model.documents import Answer

__all__ = ["AutomaticDecision", "KindRules", "Reply", "listed"]

D = TypeVar("D")
A = TypeVar("A", bound=Answer)

# Any: JSON out (a JSON-RPC result for the agent).
Reply = dict[str, Any]


class AutomaticDecision(Protocol):
    """What an automatic answer is made from (:class:`baton.requests.policy.Decision`)."""

    @property
    def outcome(self) -> Literal["allow", "deny", "escalate"]: ...
    @property
    def reason(self) -> str: ...
    @property
    def plan_choice(self) -> Literal["accept", "reject"]: ...


@dataclass(kw_only=True, frozen=True, slots=True)
class KindRules(Generic[D, A]):
    """A kind's answer type, its validation and its replies to the agent.

    A kind with no agent behind it (a review) has no replies and is never
    answered automatically: ``None``.
    """

    answer_type: type[A]
    validate: Callable[[D, A], A]
    """Return the answer normalized, or raise ``InvalidAnswer`` saying what is wrong."""
    reply: Callable[[D, A], Reply] | None
    """The JSON-RPC ``result`` for a validated answer."""
    cancelled_reply: Callable[[D], Reply] | None
    """The reply when the turn ended first (ACP §1.7: ``cancelled``)."""
    expired_reply: Callable[[D], Reply] | None
    """The reply when nobody answered in time: a denial, not a cancellation."""
    automatic_answer: Callable[[D, AutomaticDecision], A] | None
    """The answer a policy's ``allow``/``deny`` decision gives, with no human."""


def listed(values: Sequence[str]) -> str:
    """Ids for an error message: ``a, b`` or ``none``."""
    return ", ".join(values) if values else "none"
