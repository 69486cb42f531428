"""The one transaction rule between a report's acceptance and a slot's re-placement.

A role holder's agent files its report through its actor's relay, which records the call
(:mod:`baton.role_tools.delivery`); the coordinator's hub *accepts* it before running it.
:class:`EpochAcceptance` is the acceptance: in one transaction it locks the slot's
placement row, checks that the store still names the call's epoch as ``placed``, and
moves the call ``pending → accepted``; otherwise it moves it ``pending → refused``, with
the reason, and records ``cluster.fenced_out`` (act ``role tool <tool>``). A re-placement
first moves the same row off that epoch (``fail``/``expire``, then ``place``: epoch N+1),
under the same lock. So the two are ordered, whatever the timing:

* the report was accepted first: the placement that follows finds it
  (:meth:`TurnCalls.filed_report`) and *adopts* the turn's result instead of running the
  turn again (:class:`~baton.cluster.driver.RemoteRoleSession`);
* the slot moved first: the report is stale, refused and recorded; the turn runs again
  under epoch N+1 (its work was never accepted).

The lease is not part of the rule: a holder cut off for longer than its lease may still
have its last report accepted, as long as nobody placed the slot again (nothing else can
have acted for it). ``docs/cluster.md`` draws the two orders.

:class:`TurnCalls` is the coordinator's reading of the outbox: the calls a turn left open
(delivered by the coordinator itself when it adopts or replaces a holder, before deciding
that the turn ended without a report), and whether a turn's report was accepted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baton.cluster.fencing import Placements
from baton.events.model import ClusterFencedOut
from baton.events.sequencer import utc_now
from baton.role_tools.delivery import TOOL_CALL, CallEvent, CallState, Delivery, ToolCall
from baton.store.store import Store
from baton.store.tool_call_sql import calls_of_turn, move_call, open_calls
from baton.store.tx import Tx

__all__ = ["EpochAcceptance", "TurnCalls"]

log = logging.getLogger(__name__)


class EpochAcceptance:
    """:class:`~baton.role_tools.delivery.Acceptance` under the slot's epoch (see above)."""

    def __init__(self, placements: Placements) -> None:
        self.placements = placements
        self.refused: list[tuple[str, str]] = []
        """(call key, reason) of every call refused here (tests read it)."""

    async def accept(self, call: ToolCall) -> str | None:
        accepted = TOOL_CALL.next(CallState.PENDING, CallEvent.ACCEPT).value
        refused = TOOL_CALL.next(CallState.PENDING, CallEvent.REFUSE).value

        def accept_or_refuse(tx: Tx, reason: str | None) -> str | None:
            moved = move_call(
                tx,
                call.call_key,
                expect=CallState.PENDING.value,
                state=accepted if reason is None else refused,
                answer=None,
                reason=reason,
                updated_at=utc_now(),
            )
            if not moved:  # delivered or refused by another coordinator meanwhile
                return "the call moved on meanwhile"
            return reason

        reason = await self.placements.under_epoch(call.slot, call.epoch, accept_or_refuse)
        if reason is not None:
            self.refused.append((call.call_key, reason))
            await self._record(call, reason)
        return reason

    async def _record(self, call: ToolCall, reason: str) -> None:
        event = ClusterFencedOut(
            slot=call.slot, epoch=call.epoch, act=f"role tool {call.tool}", reason=reason
        )
        try:
            await self.placements.record(event)
        except Exception:  # the refusal is kept in the call's row either way
            log.exception("recording the refusal of %s failed", call.call_key)


@dataclass
class TurnCalls:
    """The coordinator's reading of one project's outbox (the store's open calls)."""

    store: Store
    project: str
    delivery: Delivery

    async def of_turn(self, slot: str, epoch: int, turn: str) -> list[ToolCall]:
        project = self.project
        rows = await self.store.aread(lambda tx: calls_of_turn(tx, project, slot, epoch, turn))
        return [ToolCall.from_row(r) for r in rows]

    async def settle(  # Any: the hub's JSON answers, as the agent gets them
        self, slot: str, epoch: int | None = None
    ) -> list[dict[str, Any]]:
        """Deliver the slot's calls still open (of ``epoch`` only, when given), in order:
        what a holder recorded while no hub could take it. Their answers."""
        project = self.project
        rows = await self.store.aread(lambda tx: open_calls(tx, project, slot))
        answers = []
        for call in (ToolCall.from_row(r) for r in rows):
            if epoch is not None and call.epoch != epoch:
                continue
            log.info("slot %s: delivering %s (%s) left open", slot, call.call_key, call.tool)
            answers.append(await self.delivery.deliver(call.call_key, slot=slot))
        return answers

    async def filed_report(self, slot: str, epoch: int, turn: str) -> Sequence[ToolCall]:
        """The turn's calls, once its report is known to be accepted (else empty): its
        accepted calls are delivered first, so what follows sees them in FCoP."""
        calls = await self.of_turn(slot, epoch, turn)
        if not any(c.filed_report for c in calls):
            return ()
        for call in calls:
            if call.state is CallState.ACCEPTED:
                await self.delivery.deliver(call.call_key, slot=slot)
        return await self.of_turn(slot, epoch, turn)
