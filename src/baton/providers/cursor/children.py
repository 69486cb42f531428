"""Cursor subagents as canonical delegation: a stateful child normalizer.

With ``clientCapabilities._meta.subagents`` (the Cursor profile sets it), Cursor
announces each subagent on its parent's session and then streams the child's own
updates on a *child* session id. Shapes, from a third-party reading of Cursor's ACP
bundle (the seed confirms the two variants, not every field)::

    subagent_spawned       {subagentSessionId, name, task, capabilities,
                            _meta: {cursor: {toolCallId, agentId, model?}}}
    subagent_state_update  {subagentSessionId, state, _meta?}
                           state: completed | failed | cancelled | disconnected
    child activity         any session/update whose sessionId is a child's

Why stateful: the later messages carry only the child session id, so role, task
and origin must be remembered from the spawn, and an agent bug (or a forged frame)
must not be able to re-parent a child. The rules:

* **Parent.** A spawn is accepted only on the turn's session or on a live child's
  session (nested subagents); anything else is ``child_foreign``.
* **Known spawn.** A state update or child activity for a session never spawned is
  ``child_unknown``; no child is ever invented from an update.
* **Immutable origin.** A child's parent session, spawning tool call and agent id are
  fixed at spawn. A repeated spawn or state update claiming a different one is
  rejected as ``child_identity`` and the original identity is kept.
* **Stale.** Anything after a terminal state is ``child_stale``.
* **Never fail the parent.** Child-session updates go to the child's bucket (an
  update count and a 4000-character tail of its text, never the parent
  transcript); unknown sessions yield one notice each, bounded.

``disconnected`` (Cursor gave up waiting after a cancel; the child may still run
server-side) is canonical ``failed`` plus a ``child_disconnected`` warning.
At most :data:`MAX_CHILDREN` children are tracked; terminal ones are forgotten
first when room is needed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from baton.events.bounds import clip_text
from baton.events.model import (
    DelegationChild,
    DelegationCompleted,
    DelegationStarted,
    DelegationUpdated,
    Payload,
    ProviderNotice,
)
from baton.events.redaction import NoRedaction, Redaction
from baton.jsontypes import JsonMapping
from baton.providers.cursor._common import native_id, opt_str, safe_id

MAX_CHILDREN = 256
MAX_REMEMBERED_UNKNOWN = 256
TAIL_CHARS = 4000
SOURCE = "cursor.subagent"

TERMINAL_STATES: Mapping[str, str] = {
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "disconnected": "failed",
}


@dataclass(slots=True)
class Child:
    """What baton remembers about one subagent (bounded)."""

    session_id: str
    parent_session_id: str
    tool_call_id: str | None
    agent_id: str | None
    model: str | None
    role: str | None
    task: str | None
    turn: int
    status: str = "running"
    terminal: bool = False
    updates: int = 0
    tail: str = ""
    """The last :data:`TAIL_CHARS` characters of the child's assistant text."""

    @property
    def child_id(self) -> str:
        return safe_id(self.session_id, "child")

    def canonical(self, *, duration_ms: int | None = None) -> DelegationChild:
        return DelegationChild(
            child_id=self.child_id,
            role=self.role,
            description=self.task,
            model=self.model,
            agent_id=self.agent_id,
            status=self.status,
            duration_ms=duration_ms,
            parent_tool_call_id=self.tool_call_id,
        )


def _identity(update: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(toolCallId, agentId, model)`` from ``_meta.cursor``, when present."""
    meta = update.get("_meta")
    cursor = meta.get("cursor") if isinstance(meta, Mapping) else None
    if not isinstance(cursor, Mapping):
        return None, None, None
    return (
        opt_str(native_id(cursor.get("toolCallId")), 160),
        opt_str(native_id(cursor.get("agentId")), 160),
        opt_str(cursor.get("model"), 200),
    )


class ChildNormalizer:
    """Tracks Cursor's child sessions and turns their lifecycle into delegation events."""

    def __init__(self) -> None:
        self.children: OrderedDict[str, Child] = OrderedDict()
        self._unknown: OrderedDict[str, None] = OrderedDict()
        self._stale_noticed: OrderedDict[str, None] = OrderedDict()
        self._turn = 0
        self._parent: str | None = None

    # ------------------------------------------------------------------ turns

    def begin_turn(self, parent_session_id: str | None) -> None:
        self._turn += 1
        self._parent = parent_session_id

    def end_turn(self) -> list[Payload]:
        """Children still open when the prompt settled are visible, not dropped.

        Cursor holds the prompt response until the turn's children are terminal, so
        an open child here means a background run or a lost state update.
        """
        open_children = [c for c in self.children.values() if not c.terminal]
        if not open_children:
            return []
        names = ", ".join(c.child_id for c in open_children[:8])
        more = "" if len(open_children) <= 8 else f" and {len(open_children) - 8} more"
        return [
            _notice(
                "child_unsettled",
                f"turn ended with {len(open_children)} subagent(s) still open: {names}{more}",
            )
        ]

    def by_agent_id(self, agent_id: str) -> Child | None:
        return next((c for c in self.children.values() if c.agent_id == agent_id), None)

    # ----------------------------------------------------------------- updates

    def spawned(
        self, on_session: str | None, update: JsonMapping, redaction: Redaction | None = None
    ) -> list[Payload]:
        """``subagent_spawned`` received on session ``on_session``."""
        redaction = redaction or NoRedaction()
        child_session = native_id(update.get("subagentSessionId"))
        if child_session is None:
            return [
                _notice(
                    "malformed", "subagent_spawned without subagentSessionId", "subagent_spawned"
                )
            ]
        tool_call_id, agent_id, model = _identity(update)
        if on_session is None or not self._live_parent(on_session) or child_session == on_session:
            return [
                _notice(
                    "child_foreign",
                    f"subagent {_show(child_session)} announced on session {_show(on_session)}, "
                    "which is neither this turn's session nor a live subagent's; rejected",
                    "subagent_spawned",
                )
            ]
        existing = self.children.get(child_session)
        if existing is not None:
            claimed = (on_session, tool_call_id, agent_id)
            kept = (existing.parent_session_id, existing.tool_call_id, existing.agent_id)
            if _conflicts(claimed, kept):
                return [_identity_notice(existing, claimed, "subagent_spawned")]
            return []  # a repeated spawn (e.g. replay) with the same identity
        room = self._make_room()
        if room is not None:
            return [room]
        name = update.get("name")
        task = update.get("task")
        child = Child(
            session_id=child_session,
            parent_session_id=on_session,
            tool_call_id=tool_call_id,
            agent_id=agent_id,
            model=model,
            role=clip_text(redaction.text(name), 200) if isinstance(name, str) else None,
            task=clip_text(redaction.text(task)) if isinstance(task, str) else None,
            turn=self._turn,
        )
        self.children[child_session] = child
        return [DelegationStarted(source=SOURCE, children=[child.canonical()])]

    def state_update(self, on_session: str | None, update: JsonMapping) -> list[Payload]:
        """``subagent_state_update`` received on session ``on_session``."""
        child_session = native_id(update.get("subagentSessionId"))
        if child_session is None:
            return [
                _notice(
                    "malformed",
                    "subagent_state_update without subagentSessionId",
                    "subagent_state_update",
                )
            ]
        child = self.children.get(child_session)
        if child is None:
            return [
                _notice(
                    "child_unknown",
                    f"state update for subagent {_show(child_session)} that was never spawned; "
                    "ignored",
                    "subagent_state_update",
                )
            ]
        tool_call_id, agent_id, _ = _identity(update)
        claimed = (on_session, tool_call_id, agent_id)
        if _conflicts(claimed, (child.parent_session_id, child.tool_call_id, child.agent_id)):
            return [_identity_notice(child, claimed, "subagent_state_update")]
        state = update.get("state")
        if not isinstance(state, str) or not state:
            return [
                _notice(
                    "malformed",
                    f"subagent_state_update for {child.child_id} without state",
                    "subagent_state_update",
                )
            ]
        if child.terminal:
            return [
                _notice(
                    "child_stale",
                    f"subagent {child.child_id} reported {clip_text(state, 64)!r} after it "
                    f"already ended {child.status!r}; ignored",
                    "subagent_state_update",
                )
            ]
        out: list[Payload] = []
        terminal = TERMINAL_STATES.get(state)
        if terminal is None:
            child.status = clip_text(state, 64)
            return [DelegationUpdated(source=SOURCE, children=[child.canonical()])]
        child.status = terminal
        child.terminal = True
        out.append(DelegationCompleted(source=SOURCE, children=[child.canonical()]))
        if state == "disconnected":
            out.append(
                _notice(
                    "child_disconnected",
                    f"subagent {child.child_id} disconnected: Cursor stopped waiting for it "
                    "(after a cancel); it may still be running on Cursor's side",
                    "subagent_state_update",
                )
            )
        return out

    def child_update(self, session_id: str, update: JsonMapping) -> list[Payload] | None:
        """An update on a child's own session: bucketed, never the parent's transcript.

        Returns ``None`` when ``session_id`` is not a known child (the caller decides
        what an unknown session means).
        """
        child = self.children.get(session_id)
        if child is None:
            return None
        if child.terminal:
            if _remember(self._stale_noticed, session_id):
                return [
                    _notice(
                        "child_stale",
                        f"update for subagent {child.child_id} after it ended "
                        f"{child.status!r}; kept raw",
                        _variant(update),
                    )
                ]
            return []
        child.updates += 1
        if update.get("sessionUpdate") == "agent_message_chunk":
            content = update.get("content")
            text = content.get("text") if isinstance(content, Mapping) else None
            if isinstance(text, str):
                child.tail = (child.tail + text[-TAIL_CHARS:])[-TAIL_CHARS:]
        return []

    def unknown_session(self, session_id: str, update: JsonMapping) -> list[Payload]:
        """One ``child_unknown`` notice per unknown session id (bounded memory)."""
        if not _remember(self._unknown, session_id):
            return []
        return [
            _notice(
                "child_unknown",
                f"update for unknown session {_show(session_id)} routed to the child bucket "
                "(no subagent_spawned announced it)",
                _variant(update),
            )
        ]

    # ---------------------------------------------------------------- internals

    def _live_parent(self, session_id: str) -> bool:
        """The turn's session, or a live child's (nested subagents)."""
        if session_id == self._parent:
            return True
        child = self.children.get(session_id)
        return child is not None and not child.terminal

    def _make_room(self) -> ProviderNotice | None:
        if len(self.children) < MAX_CHILDREN:
            return None
        for key, child in self.children.items():
            if child.terminal:
                del self.children[key]
                return None
        return _notice(
            "child_limit",
            f"more than {MAX_CHILDREN} open subagents; the new one is not tracked",
            "subagent_spawned",
        )


def _conflicts(
    claimed: tuple[str | None, str | None, str | None],
    kept: tuple[str | None, str | None, str | None],
) -> bool:
    """A claimed identity field conflicts when it is given and differs from the kept one."""
    return any(c is not None and c != k for c, k in zip(claimed, kept, strict=True))


def _identity_notice(
    child: Child, claimed: tuple[str | None, str | None, str | None], variant: str
) -> ProviderNotice:
    fields = ("parent session", "tool call", "agent id")
    kept = (child.parent_session_id, child.tool_call_id, child.agent_id)
    diffs = [
        f"{name} {_show(k)} → {_show(c)}"
        for name, c, k in zip(fields, claimed, kept, strict=True)
        if c is not None and c != k
    ]
    return _notice(
        "child_identity",
        f"subagent {child.child_id} origin is immutable; rejected a claim to change "
        + "; ".join(diffs),
        variant,
    )


def _variant(update: Mapping[str, Any]) -> str | None:
    variant = update.get("sessionUpdate")
    return variant if isinstance(variant, str) else None


def _remember(seen: OrderedDict[str, None], key: str) -> bool:
    if key in seen:
        return False
    seen[key] = None
    while len(seen) > MAX_REMEMBERED_UNKNOWN:
        seen.popitem(last=False)
    return True


def _show(value: str | None) -> str:
    return "none" if value is None else repr(clip_text(value, 80))


def _notice(
    category: str,
    summary: str,
    variant: str | None = None,
    severity: Literal["info", "warning"] = "warning",
) -> ProviderNotice:
    return ProviderNotice(
        category=category, severity=severity, summary=clip_text(summary), variant=variant
    )


__all__ = ["MAX_CHILDREN", "TERMINAL_STATES", "Child", "ChildNormalizer"]
