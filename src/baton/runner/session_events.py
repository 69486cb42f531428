"""How the parts of one session speak: every event stamped with its session and turn.

The handshake, the turn driver and the client methods each emit events; this is the
one place that decides which turn an event belongs to (the turn the agent's own ids
place it in, else the running turn, else the last one) and that redacts and bounds
what they say, so that attribution is one rule
and no part re-implements it. It is also the one place every draft passes, so a
:class:`DraftWatch` (the session's :class:`~baton.runner.approvals.ApprovalGuard`) sees
them all, whichever part emitted them.

Streaming detail is emitted per run of the agent's notifications, not per update
(:meth:`SessionEvents.drafts` with ``defer``): the work of stamping, storing and showing
is then one pass over many events. The deferred drafts are emitted before anything
else this session emits and at the end of every run (the connection's ``on_run_end``
before any other frame, ``on_batch_end`` at the end of a read), and the reader only
defers between awaits that do not suspend, so no other task can emit in between: the
stream's order is the arrival order, as if each update were emitted at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from baton.events.acp_normalizer import Draft
from baton.events.bounds import bounded_value, clip_text
from baton.events.model import CanonicalEvent, Payload, ProviderNotice
from baton.jsontypes import JsonValue
from baton.runner.emitter import EventEmitter
from baton.runner.turn import Turn
from baton.security.redact import Redactor

if TYPE_CHECKING:
    from baton.store.tx import Tx

__all__ = ["DraftMeter", "DraftWatch", "SessionEvents", "SessionStats", "TurnEvents"]

T = TypeVar("T")

Severity = Literal["info", "warning", "error"]


@dataclass(slots=True)
class SessionStats:
    """Counters over the session's life (the role loop and ``baton sessions`` read them)."""

    turns: int = 0
    tool_calls: int = 0
    files_written: set[str] = field(default_factory=set)
    usage_available: bool = False


class DraftWatch(Protocol):
    """Sees every draft of the session: may rewrite them before, reacts after emission."""

    def prepare(self, drafts: Sequence[Draft]) -> list[Draft]: ...

    def acts_on(self, draft: Draft) -> bool:
        """Whether seeing ``draft`` may emit or do anything: then it is not deferred, so
        what the watch says follows it at once, in arrival order."""
        ...

    async def drafts(self, drafts: Sequence[Draft], turn_id: str | None) -> None: ...


class DraftMeter(Protocol):
    """Meters what was emitted (the session's budget watch): asked after each emitted
    batch whether anything new could matter (O(1)), and only then handed the batch."""

    def due(self) -> bool: ...

    async def check(self, batch: Sequence[Draft], turn_id: str | None) -> None: ...


@dataclass(slots=True)
class SessionEvents:
    """The session's identity as events carry it, and the turns events are attributed to."""

    emitter: EventEmitter
    redactor: Redactor
    agent_session_id: str | None = None
    turn: Turn | None = None
    """The running turn, if any."""
    last_turn: Turn | None = None
    """The turn that ended last: late updates and stale requests belong to it."""
    stats: SessionStats = field(default_factory=SessionStats)
    watch: DraftWatch | None = None
    meter: DraftMeter | None = None
    _deferred: list[Draft] = field(default_factory=list, init=False, repr=False)
    """Drafts of the current run of notifications, not yet emitted (see the module)."""

    @property
    def run_id(self) -> str:
        return self.emitter.run_id

    @property
    def attributed(self) -> Turn | None:
        """The turn an event arriving now belongs to."""
        return self.turn or self.last_turn

    def _turn_id(self) -> str | None:
        turn = self.attributed
        return turn.turn_id if turn else None

    async def emit(
        self,
        payload: Payload,
        *,
        turn_id: str | Literal["auto"] | None = "auto",
        raw: JsonValue = None,
    ) -> CanonicalEvent:
        if self._deferred:
            await self.drafts(())
        return await self.emitter.emit(
            payload,
            session_id=self.agent_session_id,
            turn_id=self._turn_id() if turn_id == "auto" else turn_id,
            raw=raw,
        )

    async def drafts(self, drafts: Iterable[Draft], *, defer: bool = False) -> None:
        """Each draft on the turn the agent's own ids place it in (:attr:`Draft.turn_id`: a
        tool update on its call's turn, a chunk on its message's), flagged ``late`` when
        that is not the running turn; a draft the ids place nowhere on :attr:`attributed`.

        ``defer``: the drafts of one update, which may wait for the end of the run of
        notifications (the next call without it), unless the watch acts on one."""
        batch = drafts if isinstance(drafts, list) else list(drafts)
        watch = self.watch
        if defer and (watch is None or not any(map(watch.acts_on, batch))):
            self._deferred.extend(batch)
            return
        if self._deferred:
            batch, self._deferred = self._deferred + batch, []
        if not batch:
            return  # most updates only add to a coalescing message
        turn_id = self._turn_id()
        if watch is not None:
            batch = watch.prepare(batch)
        await self.emitter.emit_drafts(batch, session_id=self.agent_session_id, turn_id=turn_id)
        if watch is not None and batch:
            await watch.drafts(batch, turn_id)
        meter = self.meter
        if meter is not None and meter.due():  # the end of a batch: a limit stops it here
            await meter.check(batch, turn_id)

    async def notice(
        self,
        category: str,
        summary: str,
        *,
        method: str | None = None,
        severity: Severity = "warning",
        raw: JsonValue = None,
    ) -> None:
        await self.emit(
            ProviderNotice(
                category=category,
                severity=severity,
                summary=clip_text(self.redactor.text(summary)),
                method=method,
            ),
            raw=bounded_value(self.redactor.value(raw)) if raw is not None else None,
        )

    def for_turn(self, turn_id: str | None) -> TurnEvents:
        """The events of one turn, as the request broker speaks them."""
        return TurnEvents(self, turn_id)


@dataclass(frozen=True, slots=True)
class TurnEvents:
    """One turn's events for the request broker: emit one (a view of what happened), or
    commit a state change with its events in one transaction (the turn's journal,
    :meth:`EventEmitter.commit`), so the ledger and the event log never disagree."""

    events: SessionEvents
    turn_id: str | None

    async def __call__(self, payload: Payload) -> None:
        await self.events.emit(payload, turn_id=self.turn_id)

    async def commit(self, payloads: Sequence[Payload], fn: Callable[[Tx], T]) -> T:
        await self.events.drafts(())  # what the agent said before comes first
        return await self.events.emitter.commit(
            payloads, fn, session_id=self.events.agent_session_id, turn_id=self.turn_id
        )
