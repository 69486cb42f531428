"""The seam between the generic ACP normalizer and one provider's native detail.

The generic normalizer (:mod:`baton.events.acp_normalizer`) owns the stable ACP
``session/update`` variants. A provider extension sees what the generic layer does
not own: extra update variants (Cursor's ``subagent_spawned``), vendor methods
(``cursor/*``) and provider ``_meta`` (Claude's ``parentToolUseId``). Extensions are
sans-I/O state machines: they get plain data and return payloads plus, for vendor
requests, what to answer. Everything they do not claim becomes a
``provider.notice{unclassified}`` in the generic layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from baton.events.model import Payload

JsonObject = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class VendorOutcome:
    """What to do with a vendor method (``cursor/update_todos`` ...).

    ``route="reply"``: answer at once with ``result`` (requests) or nothing
    (notifications). ``route="human"``: the method is a human decision
    (question/plan); the runner hands ``request`` to the durable-requests ledger, and
    answers ``result`` only if no ledger is attached (headless-safe fallback).
    """

    payloads: Sequence[Payload] = ()
    route: Literal["reply", "human"] = "reply"
    result: Any = None
    request: Any = None


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
    """What an extension may know about the active turn (no I/O handles)."""

    session_id: str | None
    turn_id: str | None
    workspace: str
    extras: dict[str, Any] = field(default_factory=dict)


class ProviderExtension(Protocol):
    family: str

    def classify_update(
        self, variant: str, update: JsonObject, ctx: TurnContext
    ) -> list[Payload] | None:
        """Payloads for an update variant the generic layer does not own, else ``None``."""

    def vendor_method(
        self, method: str, params: JsonObject, *, has_id: bool, ctx: TurnContext
    ) -> VendorOutcome | None:
        """Handle a vendor method, or ``None`` if this provider does not know it."""

    def parent_tool_call_id(self, update: JsonObject) -> str | None:
        """Delegation lineage carried in provider ``_meta`` of a tool call, if any."""

    def observe_update(self, variant: str, update: JsonObject, ctx: TurnContext) -> list[Payload]:
        """Extra payloads from the native detail (``_meta`` ...) of a stable variant."""

    def foreign_session_update(
        self, session_id: str, update: JsonObject, ctx: TurnContext
    ) -> list[Payload]:
        """A ``session/update`` for another session id (a child); never fails the parent."""

    def begin_turn(self, ctx: TurnContext) -> list[Payload]:
        """Reset per-turn state; payloads to emit at turn start (usually none)."""

    def end_turn(self, ctx: TurnContext) -> list[Payload]:
        """Payloads to emit when the turn settles (e.g. usage unavailable)."""


class NullExtension:
    """The extension for providers with nothing beyond stable ACP."""

    def __init__(self, family: str) -> None:
        self.family = family

    def classify_update(
        self, variant: str, update: JsonObject, ctx: TurnContext
    ) -> list[Payload] | None:
        return None

    def vendor_method(
        self, method: str, params: JsonObject, *, has_id: bool, ctx: TurnContext
    ) -> VendorOutcome | None:
        return None

    def parent_tool_call_id(self, update: JsonObject) -> str | None:
        return None

    def observe_update(self, variant: str, update: JsonObject, ctx: TurnContext) -> list[Payload]:
        return []

    def foreign_session_update(
        self, session_id: str, update: JsonObject, ctx: TurnContext
    ) -> list[Payload]:
        return []

    def begin_turn(self, ctx: TurnContext) -> list[Payload]:
        return []

    def end_turn(self, ctx: TurnContext) -> list[Payload]:
        return []
