"""``cursor/update_todos`` → complete ``plan.updated`` snapshots, one reducer per turn.

Cursor sends its checklist as deltas: ``{toolCallId, todos:[{id, content, status}],
merge}``. With ``merge: true`` each todo updates the item with the same native id
(or is appended); ``merge: false`` replaces the whole list. Surfaces should not have
to replay deltas, so every change becomes a *complete* :class:`PlanUpdated`
snapshot (``source="cursor.update_todos"``) with a strictly increasing ``revision``.

Cursor's ``cancelled`` has no canonical counterpart (the canonical statuses are
``pending|in_progress|completed|blocked``): it becomes ``status="blocked"`` with
``native_status="cancelled"``, and the text is left alone, so a surface shows
"Cancelled" from the native status instead of a rewritten string.

Bounds. This is a diagnostic checklist display, not an approval document, so it is
*cut*, with ``truncated=True``, rather than rejected: at most :data:`MAX_ITEMS`
items (items past the limit are dropped), each text at most
:data:`MAX_CONTENT_CHARS` characters, and a snapshot of at most
:data:`MAX_SNAPSHOT_BYTES` of JSON (the longest prefix of items that fits). The
reducer's own state holds at most :data:`MAX_ITEMS` items of bounded text, so a
runaway agent cannot grow it.

Turns. Snapshots and revisions are produced per update, within the turn that sent
it; revisions never restart, so a surface keeping "the latest revision" never goes
backwards. The *list* follows Cursor's own todo list, which lives in the
conversation rather than the turn: a ``merge: true`` in turn 2 that only changes
the status of id ``"a"`` refers to the item created in turn 1. Clearing the list at
each turn would show that item with no text and drop the others, so by default the
list carries over (:class:`~baton.providers.cursor.extension.CursorExtension` takes
``reset_todos_each_turn=True`` for the strict per-turn behaviour, which calls
:meth:`TodoReducer.reset`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.events.bounds import clip_text
from baton.events.extension import MalformedPayload
from baton.events.model import Payload, PlanStep, PlanUpdated, ProviderNotice
from baton.events.redaction import NoRedaction, Redaction
from baton.jsontypes import JsonMapping
from baton.providers.cursor._common import native_id, safe_id

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_ITEMS",
    "MAX_SNAPSHOT_BYTES",
    "SOURCE",
    "CanonicalStatus",
    "TodoReducer",
    "TodoResult",
    "step_size",
]

MAX_ITEMS = 256
MAX_CONTENT_CHARS = 4000
MAX_SNAPSHOT_BYTES = 240 * 1024
SOURCE = "cursor.update_todos"

CanonicalStatus = Literal["pending", "in_progress", "completed", "blocked"]
_STATUS: Mapping[str, CanonicalStatus] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "completed": "completed",
    "cancelled": "blocked",
}


@dataclass(slots=True)
class _Todo:
    native_id: str
    content: str
    status: str
    """The native status, bounded (may be unknown to us)."""
    clipped: bool = False


@dataclass(frozen=True, slots=True)
class TodoResult:
    """What one ``cursor/update_todos`` produced."""

    payloads: list[Payload]
    todos: list[dict[str, str]]
    """The reducer's list after the update, in native shape, for the reply."""


def step_size(step: PlanStep) -> int:
    """Bytes a step adds to a snapshot (its compact JSON), as the size bound counts it."""
    return len(
        json.dumps(step.model_dump(), ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", errors="surrogatepass"
        )
    )


@dataclass(slots=True)
class TodoReducer:
    """Merge/replace todo deltas into complete, bounded, revisioned snapshots."""

    revision_source: Callable[[], int] | None = None
    """Shared revision counter (the generic ``plan`` variant's), if the runner has one."""
    revision: int = 0
    _items: dict[str, _Todo] = field(default_factory=dict)
    _dropped: bool = False
    _last: tuple[tuple[PlanStep, ...], bool] | None = None

    def reset(self) -> None:
        """Forget the list (a strict per-turn reducer), keep counting revisions."""
        self._items = {}
        self._dropped = False
        self._last = None

    def apply(self, params: JsonMapping, *, redaction: Redaction | None = None) -> TodoResult:
        """Apply one ``cursor/update_todos`` params object.

        Raises ``TypeError`` when ``todos`` is not a list (the caller turns that into
        a ``malformed`` notice); bad *items* are skipped with one notice.
        """
        redaction = redaction or NoRedaction()
        todos = params.get("todos")
        if not isinstance(todos, list):
            raise MalformedPayload("cursor/update_todos: todos must be a list")
        notices: list[Payload] = []
        merge = params.get("merge")
        if not isinstance(merge, bool):
            notices.append(
                _notice("cursor/update_todos: merge flag missing or not a boolean; merged")
            )
            merge = True
        parsed, bad = _parse(todos, redaction)
        if bad:
            notices.append(_notice(f"cursor/update_todos: skipped {bad} malformed todo item(s)"))
        if merge:
            self._merge(parsed)
        else:
            self._items = {}
            self._dropped = False
            self._merge(parsed)
        unknown = sorted({s for _, _, s in parsed if s is not None and s not in _STATUS})
        if unknown:
            notices.append(
                _notice(
                    "cursor/update_todos: unknown todo status "
                    + ", ".join(repr(s) for s in unknown[:8])
                    + " shown as pending",
                    severity="info",
                )
            )
        snapshot = self._snapshot()
        payloads: list[Payload] = list(notices)
        if snapshot != self._last:
            self._last = snapshot
            steps, truncated = snapshot
            payloads.append(
                PlanUpdated(
                    source=SOURCE,
                    revision=self._next_revision(),
                    steps=list(steps),
                    truncated=truncated,
                )
            )
        reply = [
            {"id": t.native_id, "content": t.content, "status": t.status}
            for t in self._items.values()
        ]
        return TodoResult(payloads=payloads, todos=reply)

    # ---------------------------------------------------------------- internals

    def _merge(self, parsed: Sequence[tuple[str, str | None, str | None]]) -> None:
        for nid, content, status in parsed:
            current = self._items.get(nid)
            if current is not None:
                if content is not None:
                    current.content, current.clipped = _bounded(content)
                if status is not None:
                    current.status = status
                continue
            if len(self._items) >= MAX_ITEMS:
                self._dropped = True
                continue
            text, clipped = _bounded(content or "")
            self._items[nid] = _Todo(nid, text, status or "pending", clipped)

    def _snapshot(self) -> tuple[tuple[PlanStep, ...], bool]:
        steps: list[PlanStep] = []
        truncated = self._dropped
        budget = MAX_SNAPSHOT_BYTES
        for todo in self._items.values():
            canonical = _STATUS.get(todo.status, "pending")
            step = PlanStep(
                step_id=safe_id(todo.native_id, "todo"),
                content=todo.content,
                status=canonical,
                native_status=todo.status if todo.status != canonical else None,
            )
            size = step_size(step)
            if size > budget:
                truncated = True
                break
            budget -= size
            steps.append(step)
            truncated = truncated or todo.clipped
        return tuple(steps), truncated

    def _next_revision(self) -> int:
        shared = self.revision_source() if self.revision_source is not None else 0
        self.revision = max(self.revision + 1, shared)
        return self.revision


def _bounded(content: str) -> tuple[str, bool]:
    if len(content) <= MAX_CONTENT_CHARS:
        return content, False
    return clip_text(content, MAX_CONTENT_CHARS), True


def _parse(
    todos: Sequence[Any], redaction: Redaction
) -> tuple[list[tuple[str, str | None, str | None]], int]:
    """``(native id, content or None, status or None)`` per valid item, and the bad count."""
    parsed: list[tuple[str, str | None, str | None]] = []
    bad = 0
    for item in todos:
        if not isinstance(item, Mapping):
            bad += 1
            continue
        nid = native_id(item.get("id"))
        content = item.get("content")
        status = item.get("status")
        if (
            nid is None
            or len(nid) > 1024
            or (content is not None and not isinstance(content, str))
            or (status is not None and not isinstance(status, str))
        ):
            bad += 1
            continue
        parsed.append(
            (
                nid,
                redaction.text(content) if content is not None else None,
                clip_text(status, 64) if status is not None else None,
            )
        )
    return parsed, bad


def _notice(summary: str, severity: Literal["info", "warning"] = "warning") -> ProviderNotice:
    return ProviderNotice(
        category="malformed",
        severity=severity,
        summary=clip_text(summary),
        method="cursor/update_todos",
    )
