"""The Cursor provider extension: ``cursor/*`` methods and subagent variants, sans-I/O.

Wire finding (seed): the ``cursor/*`` methods documented as notifications arrive
with JSON-RPC ids. Every one is answered at once (``route="reply"``) and none
becomes human input, except the two that *are* human decisions
(``cursor/ask_question``, ``cursor/create_plan``: ``route="human"``, with the
headless-safe answer in ``result`` for when no ledger is attached). Replies use
Cursor's documented envelope ``{"outcome": {"outcome": ...}}`` (acp.md §2) rather
than a bare ``{}``: a build that validates its reply gets a well-formed one, and
one that ignores it loses nothing.

Per turn: the todo list carries over (it is Cursor's conversation-wide list; see
:mod:`.todos`); the child normalizer learns the turn's session
(the only valid parent of a top-level subagent) and reports children still open at
the end; usage is reported *unavailable* because Cursor's ACP reports none.

Foreign sessions: a ``session/update`` whose ``sessionId`` is not the turn's goes to
:meth:`CursorExtension.foreign_session_update`, which routes it to the child bucket
(nested spawns and state updates included) and never fails the parent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from baton.errors import RequestError
from baton.events.extension import TurnContext, VendorOutcome
from baton.events.model import Payload, SecurityPayloadRejected
from baton.events.redaction import Redaction
from baton.jsontypes import JsonMapping
from baton.providers.cursor import artifacts, plans, questions, tasks
from baton.providers.cursor._common import outcome
from baton.providers.cursor.children import ChildNormalizer
from baton.providers.cursor.todos import TodoReducer
from baton.providers.inventory import (
    CURSOR_INVENTORY,
    TableExtension,
    notice,
)
from baton.request_model.documents import RequestDocument
from baton.request_model.errors import InvalidDocument, PayloadTooLarge

__all__ = [
    "TODOS_FALLBACK",
    "CursorExtension",
]

TODOS_FALLBACK = outcome("accepted", todos=[])


@dataclass(frozen=True, slots=True)
class _HumanMethod:
    """A ``cursor/*`` method that is a human decision, and its handler (see the module)."""

    method: str
    normalize: Callable[[JsonMapping, Redaction], RequestDocument]
    headless_reply: dict[str, Any]
    """The answer when no human surface is attached (and the fallback on a handler fault)."""
    refused: str
    """The outcome answered at once for a request baton cannot present faithfully."""

    def __call__(self, params: JsonMapping, has_id: bool, ctx: TurnContext) -> VendorOutcome:
        try:
            document = self.normalize(params, ctx.redaction)
        except (InvalidDocument, PayloadTooLarge) as exc:
            return _refused(self.method, exc, outcome(self.refused, reason=str(exc)), ctx)
        return VendorOutcome(route="human", request=document, result=self.headless_reply)


_HUMAN_METHODS = (
    _HumanMethod(
        questions.METHOD, questions.normalize_question, questions.HEADLESS_REPLY, "skipped"
    ),
    _HumanMethod(plans.METHOD, plans.normalize_plan, plans.HEADLESS_REPLY, "rejected"),
)


class CursorExtension(TableExtension):
    """Cursor's native detail → canonical payloads (see the module docstring)."""

    usage_unavailable_reason = "Cursor's ACP reports no token usage"

    def __init__(self, *, reset_todos_each_turn: bool = False) -> None:
        super().__init__(CURSOR_INVENTORY)
        self.reset_todos_each_turn = reset_todos_each_turn
        self.todos = TodoReducer()
        self.children = ChildNormalizer()
        self.on_update("subagent_spawned", self._spawned)
        self.on_update("subagent_state_update", self._state_update)
        self.on_method("cursor/update_todos", self._update_todos, fallback=TODOS_FALLBACK)
        self.on_method("cursor/task", self._task, fallback=outcome("completed"))
        self.on_method(
            "cursor/generate_image",
            self._generate_image,
            fallback=outcome("rejected", reason="malformed request"),
        )
        for human in _HUMAN_METHODS:
            self.on_method(human.method, human, fallback=human.headless_reply)
        self.on_meta("cursor", self._meta_cursor)

    # -------------------------------------------------------------------- turns

    def begin_turn(self, ctx: TurnContext) -> list[Payload]:
        if self.reset_todos_each_turn:
            self.todos.reset()
        self.todos.revision_source = ctx.next_plan_revision
        self.children.begin_turn(ctx.session_id)
        return []

    def end_turn(self, ctx: TurnContext) -> list[Payload]:
        return [*self.children.end_turn(), *super().end_turn(ctx)]

    # ------------------------------------------------------------------ updates

    def _spawned(self, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        return self.children.spawned(ctx.session_id, update, ctx.redaction)

    def _state_update(self, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        return self.children.state_update(ctx.session_id, update)

    def _meta_cursor(
        self, key: str, value: Any, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        """``_meta.cursor`` identity is consumed by the subagent handlers; elsewhere it stays raw."""
        return []

    def foreign_session_update(
        self, session_id: str, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        variant = update.get("sessionUpdate")
        if variant == "subagent_spawned":
            return self.children.spawned(session_id, update, ctx.redaction)
        if variant == "subagent_state_update":
            return self.children.state_update(session_id, update)
        bucketed = self.children.child_update(session_id, update)
        if bucketed is not None:
            return bucketed
        return self.children.unknown_session(session_id, update)

    # ------------------------------------------------------------------ methods

    def _update_todos(self, params: JsonMapping, has_id: bool, ctx: TurnContext) -> VendorOutcome:
        result = self.todos.apply(params, redaction=ctx.redaction)
        return VendorOutcome(
            payloads=result.payloads, result=outcome("accepted", todos=result.todos)
        )

    def _task(self, params: JsonMapping, has_id: bool, ctx: TurnContext) -> VendorOutcome:
        payloads, reply = tasks.task_completed(
            params, children=self.children, redaction=ctx.redaction
        )
        return VendorOutcome(payloads=payloads, result=reply)

    def _generate_image(self, params: JsonMapping, has_id: bool, ctx: TurnContext) -> VendorOutcome:
        payloads, reply = artifacts.generate_image(
            params, workspace=ctx.workspace, redaction=ctx.redaction
        )
        return VendorOutcome(payloads=payloads, result=reply)


def _refused(
    method: str, exc: RequestError, reply: Mapping[str, Any], ctx: TurnContext
) -> VendorOutcome:
    """A human request baton cannot present faithfully: answered now, visibly."""
    oversize = isinstance(exc, PayloadTooLarge)
    payloads: list[Payload] = []
    if oversize:
        payloads.append(
            SecurityPayloadRejected(control="request_limits", subject=method, reason=str(exc))
        )
    payloads.append(
        notice(
            "oversize" if oversize else "malformed",
            f"{method} refused before reaching a human: {exc}",
            ctx=ctx,
            method=method,
        )
    )
    return VendorOutcome(payloads=payloads, route="reply", result=dict(reply))
