"""Placements committed through the store, and side effects fenced by epoch.

The I/O edge of :mod:`baton.cluster.placement`: each move is read, decided by the
pure core, and committed with its ``cluster.placement.changed`` event in one
transaction, as a compare-and-set on the row it was decided from (a move decided
from a stale read changes nothing and is decided again). :meth:`Placements.fenced`
runs a holder's side-effect record (a tool answer's ledger change, a report, a
push's record) in the same transaction as its epoch check: the transaction first
locks the slot's row (a no-op update), so a concurrent re-placement either commits
before it (and the check refuses) or waits until it has committed. This holds on
SQLite (one writer) and on PostgreSQL (row locks, whatever the isolation level).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import Final, TypeVar

from baton.cluster.placement import (
    FencedOut,
    Move,
    Placement,
    PlacementState,
    check,
    confirm,
    expire,
    fail,
    named,
    place,
    release,
    renew,
)
from baton.errors import ControlFlow, StoreError
from baton.events.model import Payload
from baton.store.journal import Journal
from baton.store.placement_sql import (
    PLACEMENT_TOPIC,
    HolderMarks,
    all_placements,
    get_placement,
    hold_placement,
    placed_holder,
    swap_placement,
)
from baton.store.store import Store
from baton.store.tx import Row, Tx
from baton.team.reconcile import HolderTurn

__all__ = ["Placements", "placement_from_row"]

T = TypeVar("T")

_ATTEMPTS: Final = 8
"""Compare-and-set retries of one move (each a fresh read): writers are few per slot."""


class _Raced(ControlFlow):
    """The row moved between the read and the commit: decide again from a fresh read."""


def placement_from_row(row: Row | None) -> Placement | None:
    if row is None:
        return None
    slot, host, epoch, state, lease, _ = row
    return Placement(str(slot), str(host), int(epoch), PlacementState(state), float(lease))


def _utc(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


class Placements:
    """One project's placement rows in one store, moved through one journal.

    ``project``: the team's FCoP workspace id (``''`` for a caller that names none): the
    rows of two teams on one cluster store never meet.
    """

    def __init__(
        self,
        store: Store,
        journal: Journal,
        *,
        clock: Callable[[], float] = time.time,
        project: str = "",
    ) -> None:
        self._store = store
        self._journal = journal
        self._clock = clock
        self.project = project

    async def current(self, slot: str) -> Placement | None:
        project = self.project
        return placement_from_row(
            await self._store.aread(lambda tx: get_placement(tx, project, slot))
        )

    async def all(self) -> list[Placement]:
        project = self.project
        rows = await self._store.aread(lambda tx: all_placements(tx, project))
        return [p for p in map(placement_from_row, rows) if p is not None]

    async def holder_turns(self, slots: Collection[str]) -> dict[str, HolderTurn]:
        """The live holders of ``slots`` as the store knows them (placed, their run running):
        their last turn's marks and whether their lease is live. A restarted coordinator's
        team loop asks this at start (``baton.team.reconcile.HolderLookup``) to adopt the
        turns they still run; a slot without a holder is absent."""
        project = self.project

        def read(tx: Tx) -> dict[str, HolderMarks]:
            found = {slot: placed_holder(tx, project, slot) for slot in sorted(slots)}
            return {slot: marks for slot, marks in found.items() if marks is not None}

        now = self._clock()
        return {
            slot: HolderTurn(marks.prompt_sha256, marks.ended, now < marks.lease_expires_at)
            for slot, marks in (await self._store.aread(read)).items()
        }

    async def _commit(self, slot: str, decide: Callable[[Placement | None, float], Move]) -> Move:
        for _ in range(_ATTEMPTS):
            now = self._clock()
            move = decide(await self.current(slot), now)

            def swap(tx: Tx, move: Move = move, now: float = now) -> None:
                before = move.before
                after = move.after
                if not swap_placement(
                    tx,
                    project=self.project,
                    slot=slot,
                    expect=None if before is None else (before.epoch, before.state.value),
                    host=after.host,
                    epoch=after.epoch,
                    state=after.state.value,
                    lease_expires_at=after.lease_expires_at,
                    updated_at=_utc(now),
                ):
                    raise _Raced(f"slot {slot!r} moved under this placement")
                tx.wake(PLACEMENT_TOPIC)

            try:
                await self._journal.commit([move.event], swap)
            except _Raced:
                continue
            return move
        raise StoreError(f"slot {slot!r}: placement kept moving under {_ATTEMPTS} attempts")

    async def place(self, slot: str, host: str, *, lease_s: float) -> Placement:
        """Place ``slot`` on ``host``; returns the placement with its new epoch."""
        move = await self._commit(
            slot, lambda cur, now: place(cur, slot, host, now=now, lease_s=lease_s)
        )
        return move.after

    async def renew(self, slot: str, epoch: int, *, lease_s: float) -> Placement:
        """The holder extends its lease; raises :class:`FencedOut` for a stale epoch."""
        move = await self._commit(
            slot, lambda cur, now: renew(cur, slot, epoch, now=now, lease_s=lease_s)
        )
        return move.after

    async def confirm(self, slot: str, epoch: int, *, lease_s: float) -> Placement:
        """The holder takes up its placement (see :func:`~baton.cluster.placement.confirm`)."""
        move = await self._commit(
            slot, lambda cur, now: confirm(cur, slot, epoch, now=now, lease_s=lease_s)
        )
        return move.after

    async def expire(self, slot: str) -> Placement:
        """Record that the lease ran out (the coordinator, before placing again)."""
        return (
            await self._commit(slot, lambda cur, now: expire(_placed(cur, slot), now=now))
        ).after

    async def fail(self, slot: str) -> Placement:
        """Record that the holder's host died (the coordinator, before placing again)."""
        return (await self._commit(slot, lambda cur, now: fail(_placed(cur, slot)))).after

    async def release(self, slot: str, epoch: int) -> Placement:
        """The holder stops cleanly; raises :class:`FencedOut` for a stale epoch."""
        move = await self._commit(slot, lambda cur, now: release(cur, slot, epoch, now=now))
        return move.after

    async def fenced(
        self,
        slot: str,
        epoch: int,
        fn: Callable[[Tx], T],
        payloads: Sequence[Payload] = (),
    ) -> T:
        """Run ``fn`` (and store ``payloads``) only while ``epoch`` holds ``slot``'s live lease.

        The check and ``fn``'s writes are one transaction; a stale epoch raises
        :class:`~baton.cluster.placement.FencedOut` and nothing of ``fn`` is stored.
        """

        def guarded(tx: Tx) -> T:
            hold_placement(tx, self.project, slot)
            row = get_placement(tx, self.project, slot)
            check(placement_from_row(row), slot, epoch, now=self._clock())
            return fn(tx)

        return await self._journal.commit(payloads, guarded)

    async def under_epoch(self, slot: str, epoch: int, fn: Callable[[Tx, str | None], T]) -> T:
        """Run ``fn(tx, refusal)`` in the transaction that locks ``slot``'s row and reads
        it: ``refusal`` is None while the store names ``epoch`` as placed (its lease aside),
        else why not. A re-placement of the slot is ordered before or after it, never
        between (the acceptance of a relayed call: :mod:`baton.cluster.delivery`)."""

        def guarded(tx: Tx) -> T:
            hold_placement(tx, self.project, slot)
            row = get_placement(tx, self.project, slot)
            try:
                named(placement_from_row(row), slot, epoch)
            except FencedOut as exc:
                return fn(tx, str(exc))
            return fn(tx, None)

        return await self._journal.commit((), guarded)

    async def record(self, payload: Payload) -> None:
        """Store one event in this journal's run (a refusal decided elsewhere)."""
        await self._journal.commit([payload], lambda tx: None)


def _placed(current: Placement | None, slot: str) -> Placement:
    if current is None:
        raise StoreError(f"slot {slot!r} has never been placed")
    return current
