"""Role tool calls delivered exactly once: the hub's side of a worker's durable outbox.

An agent on a worker host does not reach the coordinator's hub directly: its role actor
relays each call (``baton.cluster.tool_relay``), and records every *writing* call in the
store first (``cluster_tool_calls``: a report, a task, a question, an issue, a review),
under an idempotency key derived from the call's task, attempt, epoch, turn and place in
the turn (:func:`call_key`). Then it asks the hub to deliver that key, again and again
while the hub is away (the coordinator restarting). The next coordinator also delivers
what is still open when it adopts a turn, before it decides the turn ended without a
report. :class:`Delivery` is that one way in, for both paths:

* a call is **accepted** first, by the rule the caller gives (:class:`Acceptance`: on a
  cluster, one transaction that checks the slot is still placed under the call's epoch;
  a call from an epoch that was replaced is refused as stale and the refusal recorded);
* an accepted call is **run** once, as the agent made it (the task and attempt it was
  made on, whatever the slot's pointer says now), and **delivered** with the agent's
  answer kept in its row;
* asking again for a delivered or refused call returns what was kept: nothing runs twice.

Only the run between "accepted" and "delivered" is not one transaction with the store
(the tools write FCoP files): a coordinator killed inside it leaves the call accepted,
and the next delivery runs it again, which the tools make harmless (a report already
filed with the same body is the one returned, a delegation's operation id finds its
task, a question's id its request). The lifecycle is :data:`TOOL_CALL`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from baton.events.sequencer import utc_now
from baton.fcop_errors import CoordinationError
from baton.jsontypes import JsonMapping, JsonObject
from baton.role_tools.binding import CurrentTask
from baton.role_tools.server import WRITING_TOOLS, RoleTools, ToolRefused, ToolResult
from baton.statetable import StateTable
from baton.store.store import Store
from baton.store.tool_call_sql import TOOL_CALL_COLUMNS, get_call, move_call
from baton.store.tx import Row

__all__ = [
    "TOOL_CALL",
    "Acceptance",
    "CallEvent",
    "CallState",
    "CallsFn",
    "Delivery",
    "ToolCall",
    "answer_of",
    "call_key",
    "refusal",
]

log = logging.getLogger(__name__)


class CallState(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DELIVERED = "delivered"
    REFUSED = "refused"


class CallEvent(StrEnum):
    RECORD = "record"
    ACCEPT = "accept"
    DELIVER = "deliver"
    REFUSE = "refuse"


_S, _E = CallState, CallEvent
TOOL_CALL: Final = StateTable(
    "tool call",
    CallState,
    CallEvent,
    {
        (None, _E.RECORD): _S.PENDING,
        (_S.PENDING, _E.ACCEPT): _S.ACCEPTED,
        (_S.PENDING, _E.REFUSE): _S.REFUSED,
        (_S.ACCEPTED, _E.DELIVER): _S.DELIVERED,
    },
    illegal=lambda message, state, event: CoordinationError(message),
)
"""A relayed role tool call: recorded ``pending`` by the holder; ``accepted`` under its
epoch (or ``refused``: stale, or its session's credential retired); ``delivered`` once run."""


def call_key(
    *,
    project: str,
    slot: str,
    task_id: str | None,
    attempt_id: str | None,
    epoch: int,
    turn: str,
    seq: int,
) -> str:
    """The idempotency key of one call: (task, attempt, epoch, turn, its place in the turn)."""
    parts = (project, slot, task_id or "", attempt_id or "", str(epoch), turn, str(seq))
    return "call-" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One recorded call (a ``cluster_tool_calls`` row)."""

    call_key: str
    project: str
    slot: str
    epoch: int
    turn: str
    seq: int
    tool: str
    arguments: Mapping[str, Any]  # the agent's JSON arguments, checked when relayed
    task_id: str | None
    attempt_id: str | None
    state: CallState
    answer: Mapping[str, Any] | None  # the agent's answer, once delivered or refused
    reason: str | None

    @classmethod
    def from_row(cls, row: Row) -> ToolCall:
        v = dict(zip(TOOL_CALL_COLUMNS, row, strict=True))
        arguments = json.loads(str(v["arguments"]))
        answer = json.loads(str(v["answer"])) if v["answer"] else None
        return cls(
            call_key=str(v["call_key"]),
            project=str(v["project"]),
            slot=str(v["slot"]),
            epoch=int(v["epoch"]),
            turn=str(v["turn"]),
            seq=int(v["seq"]),
            tool=str(v["tool"]),
            arguments=arguments if isinstance(arguments, dict) else {},
            task_id=v["task_id"],
            attempt_id=v["attempt_id"],
            state=CallState(v["state"]),
            answer=answer if isinstance(answer, dict) else None,
            reason=v["reason"],
        )

    @property
    def is_report(self) -> bool:
        return self.tool == "write_report"

    @property
    def filed_report(self) -> bool:
        """A report the hub accepted (being delivered, or delivered without a refusal)."""
        if not self.is_report:
            return False
        if self.state is CallState.ACCEPTED:
            return True
        return self.state is CallState.DELIVERED and "error" not in (self.answer or {})


def refusal(code: str, message: str) -> JsonObject:
    """An answer that refuses the call (what the agent's tool call returns as an error)."""
    return {"error": {"code": code, "message": message}}


def answer_of(result: ToolResult) -> JsonObject:
    return {"result": result}


class Acceptance(Protocol):
    """Whether a recorded call may be delivered, decided and recorded in one transaction."""

    async def accept(self, call: ToolCall) -> str | None:
        """Move the call ``pending → accepted`` and answer None; or, when it may not go
        ahead, ``pending → refused`` (with the reason kept) and answer the reason."""
        ...


ToolsFor = Callable[[str, CurrentTask], RoleTools]
"""``(slot, the call's task and attempt) -> the tools that run it`` (blocking)."""


class Delivery:
    """Delivers recorded calls of one store, once each (see the module docstring)."""

    def __init__(self, store: Store, tools_for: ToolsFor, acceptance: Acceptance) -> None:
        self.store = store
        self.tools_for = tools_for
        self.acceptance = acceptance
        self._locks: dict[str, asyncio.Lock] = {}
        self.runs = 0
        """Calls run here (tests count them: a repeated delivery runs nothing)."""

    async def read(self, call_key: str) -> ToolCall | None:
        row = await self.store.aread(lambda tx: get_call(tx, call_key))
        return None if row is None else ToolCall.from_row(row)

    async def deliver(self, call_key: str, *, slot: str | None = None) -> JsonObject:
        """The call's answer: kept, or made now (accepted, run, kept). ``slot``: the slot the
        asking credential speaks for (a call of another slot is refused)."""
        lock = self._locks.setdefault(call_key, asyncio.Lock())
        try:
            async with lock:
                return await self._deliver(call_key, slot)
        finally:
            if not lock.locked() and self._locks.get(call_key) is lock:
                del self._locks[call_key]

    async def _deliver(self, call_key: str, slot: str | None) -> dict[str, Any]:
        call = await self.read(call_key)
        if call is None:
            return refusal("UNKNOWN_CALL", f"no recorded call {call_key}")
        if slot is not None and call.slot != slot:
            return refusal("NOT_YOUR_CALL", f"call {call_key} was made for another slot")
        if call.state in (CallState.DELIVERED, CallState.REFUSED):
            return dict(call.answer or refusal("REFUSED", call.reason or "refused"))
        if call.state is CallState.PENDING:
            reason = await self.acceptance.accept(call)
            if reason is not None:
                log.warning(
                    "call %s (%s of %s) refused: %s", call_key, call.tool, call.slot, reason
                )
                return refusal("STALE_EPOCH", reason)
        answer = await self._run(call)
        state = TOOL_CALL.next(CallState.ACCEPTED, CallEvent.DELIVER)
        text = json.dumps(answer, ensure_ascii=False)
        moved = await self.store.write(
            lambda tx: move_call(
                tx,
                call_key,
                expect=CallState.ACCEPTED.value,
                state=state.value,
                answer=text,
                reason=None,
                updated_at=utc_now(),
            )
        )
        if not moved:  # another process delivered it meanwhile: its answer is the one
            again = await self.read(call_key)
            if again is not None and again.answer is not None:
                return dict(again.answer)
        return answer

    async def _run(self, call: ToolCall) -> dict[str, Any]:
        self.runs += 1
        pinned = CurrentTask(call.task_id, call.attempt_id)
        return await self._answer(call.slot, call.tool, call.arguments, pinned)

    async def _answer(
        self, slot: str, tool: str, arguments: Mapping[str, Any], pointer: CurrentTask
    ) -> dict[str, Any]:
        """Run the tool on the task ``pointer`` names (in a thread: the tools write files);
        a refusal is the answer, not an error."""

        def run() -> dict[str, Any]:
            return answer_of(self.tools_for(slot, pointer).call(tool, arguments))

        try:
            return await asyncio.to_thread(run)
        except ToolRefused as exc:
            return refusal(exc.code, str(exc))
        except CoordinationError as exc:
            return refusal(getattr(exc, "code", type(exc).__name__), str(exc))

    async def read_only(
        self, slot: str, tool: str, arguments: JsonMapping, pointer: CurrentTask
    ) -> JsonObject:
        """A reading tool (``read_task``, ``list_reports``) run for a relayed call, on the
        task it was made on: nothing to record, nothing to deliver once."""
        if tool in WRITING_TOOLS:
            return refusal("NOT_A_READ", f"{tool} changes something: relay it as a call")
        return await self._answer(slot, tool, arguments, pointer)


CallsFn = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""``(slot, request) -> answer``: what the hub's HTTP front calls for a relayed call."""
