"""The seam between the generic ACP normalizer and one provider's native detail.

The generic normalizer (:mod:`baton.events.acp_normalizer`) owns the stable ACP
``session/update`` variants. A provider extension (:mod:`baton.providers`) sees what
the generic layer does not own: extra update variants (Cursor's ``subagent_spawned``),
vendor methods (``cursor/*``) and provider ``_meta`` (Claude's ``parentToolUseId``).
Extensions are sans-I/O state machines: they get plain data and return payloads plus,
for vendor requests, what to answer. Everything they do not claim becomes a
``provider.notice{unclassified}`` in the generic layer.

The seam lives here, in ``events/``, beside the normalizer that calls it; providers
implement it (``providers → events``, never back).

Who is at fault: an agent payload that fails an explicit check raises
:class:`MalformedPayload`, one that fails a model's validation raises pydantic's
``ValidationError``; :data:`AGENT_FAULTS` is exactly those two, the only errors the
normalizer and the extensions turn into a ``malformed`` notice. Anything else raised
while handling a payload is a bug in baton and propagates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from baton.errors import RemoteProtocolError
from baton.events.model import Payload
from baton.events.redaction import NoRedaction, Redaction
from baton.jsontypes import JsonMapping
from baton.request_model.documents import RequestDocument

__all__ = [
    "AGENT_FAULTS",
    "STABLE_VARIANTS",
    "UNSTABLE_VARIANTS",
    "InventoryEntry",
    "JsonMapping",
    "MalformedPayload",
    "NullExtension",
    "ProviderExtension",
    "TurnContext",
    "VendorOutcome",
    "require",
]


STABLE_VARIANTS: Mapping[str, str] = {
    "user_message_chunk": "transcript.user",
    "agent_message_chunk": "transcript.assistant",
    "agent_thought_chunk": "transcript.thinking",
    "tool_call": "tool.execution",
    "tool_call_update": "tool.execution",
    "plan": "plan.updated",
    "available_commands_update": "commands.updated",
    "current_mode_update": "mode.changed",
    "config_option_update": "config.changed",
    "session_info_update": "session.info_updated",
    "usage_update": "usage.reported",
}
"""Every stable ACP v1 ``sessionUpdate`` variant and the canonical family it feeds: the
one table; the generic normalizer owns these, an extension may only add to them."""

UNSTABLE_VARIANTS: Mapping[str, str] = {
    "plan_update": "unstable plan document update (schema.unstable); not mapped yet",
    "plan_removed": "unstable plan removal (schema.unstable); not mapped yet",
    "subagent_update": "unstable subagent update (schema.unstable); not mapped yet",
    "session_message": "unstable whole-message upsert (schema.unstable); not mapped yet",
    "session_message_chunk": "unstable message chunk (schema.unstable); not mapped yet",
    "notice": "agent notice, sent without the session.notices capability baton does not advertise",
    "compaction_update": "context compaction progress, sent without the session.compaction "
    "capability baton does not advertise",
    "compaction_summary_chunk": "compaction summary text, sent without the session.compaction "
    "capability baton does not advertise",
}
"""Variants baton recognises without mapping them, surfaced as notices: those of
``schema.unstable.json``, and stable ones an agent may send only when the client advertised a
capability baton does not (``notice``, ``compaction_*``: stable in the pinned schema,
``@agentclientprotocol/sdk`` 2.4.0)."""


class MalformedPayload(RemoteProtocolError):
    """An agent's payload failed an explicit check: the agent's fault, never baton's."""


AGENT_FAULTS: tuple[type[Exception], ...] = (MalformedPayload, ValidationError)
"""The errors that mean "the agent sent something malformed"; nothing else is caught."""


# Any: a JSON value from the agent, checked against ``kind`` here.
def require(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it is a ``kind``, else :class:`MalformedPayload` naming ``what``."""
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise MalformedPayload(f"{what} must not be a boolean")
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise MalformedPayload(f"{what} must be {names}, not {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class VendorOutcome:
    """What to do with a vendor method (``cursor/update_todos`` ...).

    ``route="reply"``: answer at once with ``result`` (requests) or nothing
    (notifications). ``route="human"``: the method is a human decision
    (question/plan); ``request`` is its document, built by the provider directly as a
    :mod:`baton.request_model.documents` document (validated and bounded by the one document
    model); the runner hands it to the durable-requests ledger. ``result`` is the
    headless-safe answer, used when the request cannot reach a human.
    """

    payloads: Sequence[Payload] = ()
    route: Literal["reply", "human"] = "reply"
    result: Any = None
    request: RequestDocument | None = None


@dataclass(frozen=True, slots=True)
class InventoryEntry:
    """One native event or method a provider is known to emit, and where it goes."""

    native: str
    kind: Literal["update", "method", "meta"]
    canonical: str | None
    """Canonical event family it maps to, or ``None`` when unsupported."""
    note: str = ""
    """Why, when unsupported or partial."""


@dataclass(slots=True)
class TurnContext:
    """What an extension may know about the active turn (no I/O handles).

    Set by the generic normalizer; typed so that what crosses the seam is checked.
    """

    session_id: str | None
    turn_id: str | None
    workspace: str
    redaction: Redaction = field(default_factory=NoRedaction)
    """Every agent-controlled display string an extension emits goes through it
    (the runner always sets baton's redactor; the default is for unit tests)."""
    usage_reported: bool = False
    """The generic layer emitted an available ``usage.reported`` in this turn
    (``usage_update`` or ``PromptResponse.usage``): report usage *unavailable*
    in ``end_turn`` only when it is ``False``, never a made-up zero."""
    next_plan_revision: Callable[[], int] | None = None
    """The next plan revision shared with the generic ``plan`` variant, so that
    ``acp.plan`` and a provider's plan snapshots never reuse one; ``None``: count alone."""


class ProviderExtension(Protocol):
    family: str

    def classify_update(
        self, variant: str, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload] | None:
        """Payloads for an update variant the generic layer does not own, else ``None``."""

    def vendor_method(
        self, method: str, params: JsonMapping, *, has_id: bool, ctx: TurnContext
    ) -> VendorOutcome | None:
        """Handle a vendor method, or ``None`` if this provider does not know it."""

    def parent_tool_call_id(self, update: JsonMapping) -> str | None:
        """Delegation lineage carried in provider ``_meta`` of a tool call, if any."""

    def observe_update(self, variant: str, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        """Extra payloads from the native detail (``_meta`` ...) of a stable variant."""

    def foreign_session_update(
        self, session_id: str, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        """A ``session/update`` for another session id (a child); never fails the parent."""

    def begin_turn(self, ctx: TurnContext) -> list[Payload]:
        """Reset per-turn state; payloads to emit at turn start (usually none)."""

    def end_turn(self, ctx: TurnContext) -> list[Payload]:
        """Payloads to emit when the turn settles (e.g. usage unavailable)."""


@dataclass(slots=True, kw_only=True, eq=False)
class NullExtension:
    """The extension for providers with nothing beyond stable ACP."""

    family: str

    def classify_update(
        self, variant: str, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload] | None:
        return None

    def vendor_method(
        self, method: str, params: JsonMapping, *, has_id: bool, ctx: TurnContext
    ) -> VendorOutcome | None:
        return None

    def parent_tool_call_id(self, update: JsonMapping) -> str | None:
        return None

    def observe_update(self, variant: str, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        return []

    def foreign_session_update(
        self, session_id: str, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        return []

    def begin_turn(self, ctx: TurnContext) -> list[Payload]:
        return []

    def end_turn(self, ctx: TurnContext) -> list[Payload]:
        return []
