"""Where a role slot runs and who may act for it: placements, epochs, leases. No I/O.

A role slot in cluster mode is *placed* on one worker host under an **epoch**, a
number the store bumps on every placement. The holder (the actor running the
slot's agent on that host) may act only while the store still names its epoch and
its lease has not run out; every side effect it records goes through
:func:`check` inside the same transaction (:mod:`baton.cluster.fencing`), so a
copy that was placed *before* the current one (a partitioned host that came back,
Ray's ~20 s of two copies) is refused, never merely warned.

The lifecycle of a slot's placement, as a table (illegal moves raise
:class:`IllegalPlacement`)::

    (none) ─place→ placed ─renew→ placed
    placed ─expire→ expired      the lease ran out (the coordinator's clock)
    placed ─fail→   expired      the host is known dead before that (Ray's node death)
    placed ─release→ released    the holder stopped cleanly
    expired / released ─place→ placed   (epoch + 1)

A live placement is never re-placed directly: the coordinator first expires it
(lease lost) or fails it (host dead), both with their own event, so the record
says why a slot moved. The coordinator's step is :func:`placement_step` (facts in, one
decision out); the holder's own safety net is :func:`watchdog` (kill the agent
once the lease may have run out without a confirmed renewal).

Time: leases are wall-clock seconds (``now`` is passed in, the writer's clock);
the holder's watchdog uses its *monotonic* clock since its last confirmed renewal,
so skew between hosts shortens a holder's lease but never lengthens it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from baton.errors import BatonError, UsageError
from baton.events.model import ClusterPlacementChanged
from baton.statetable import StateTable

__all__ = [
    "PLACEMENT",
    "Decision",
    "Expire",
    "FencedOut",
    "HostDead",
    "HostFacts",
    "IllegalPlacement",
    "Keep",
    "LeaseLapsed",
    "Move",
    "NoHost",
    "Place",
    "Placement",
    "PlacementEvent",
    "PlacementState",
    "Watchdog",
    "check",
    "choose_host",
    "confirm",
    "expire",
    "fail",
    "named",
    "place",
    "placement_step",
    "release",
    "renew",
    "watchdog",
]


class IllegalPlacement(UsageError):
    """A placement move the lifecycle table does not allow (a bug in the caller)."""


class FencedOut(BatonError):
    """A holder acted for a slot under an epoch the store no longer names (or a lapsed lease).

    Expected in a cluster (a partitioned or slow copy): the holder must stop its
    agent, never retry the side effect.
    """


class LeaseLapsed(FencedOut):
    """The store still names the epoch, but its lease ran out: it must be taken up again
    (:func:`confirm`) before anything acts under it."""


class PlacementState(StrEnum):
    PLACED = "placed"
    EXPIRED = "expired"
    RELEASED = "released"


class PlacementEvent(StrEnum):
    PLACE = "place"
    RENEW = "renew"
    EXPIRE = "expire"
    FAIL = "fail"
    RELEASE = "release"


def _illegal(message: str, state: str | None, event: str) -> Exception:
    return IllegalPlacement(message)


_S = PlacementState
_E = PlacementEvent
PLACEMENT: Final = StateTable(
    "placement",
    PlacementState,
    PlacementEvent,
    {
        (None, _E.PLACE): _S.PLACED,
        (_S.PLACED, _E.RENEW): _S.PLACED,
        (_S.PLACED, _E.EXPIRE): _S.EXPIRED,
        (_S.PLACED, _E.FAIL): _S.EXPIRED,
        (_S.PLACED, _E.RELEASE): _S.RELEASED,
        (_S.EXPIRED, _E.PLACE): _S.PLACED,
        (_S.RELEASED, _E.PLACE): _S.PLACED,
    },
    illegal=_illegal,
)


@dataclass(frozen=True, slots=True)
class Placement:
    """One slot's row: where it runs, under which epoch, until when."""

    slot: str
    host: str
    epoch: int
    state: PlacementState
    lease_expires_at: float

    def __post_init__(self) -> None:
        if self.epoch < 1:
            raise ValueError(f"epoch must be at least 1, got {self.epoch}")

    def lease_lost(self, now: float) -> bool:
        return self.state is PlacementState.PLACED and now >= self.lease_expires_at


@dataclass(frozen=True, slots=True)
class Move:
    """A placement change: the row to write (compare-and-set on ``before``) and its event."""

    before: Placement | None
    after: Placement
    event: ClusterPlacementChanged


def _move(
    slot: str,
    before: Placement | None,
    event: PlacementEvent,
    *,
    host: str,
    epoch: int,
    lease: float,
) -> Move:
    state = PLACEMENT.next(before.state if before is not None else None, event)
    after = Placement(slot, host, epoch, state, lease)
    return Move(
        before,
        after,
        ClusterPlacementChanged(
            slot=slot,
            host=host,
            epoch=epoch,
            from_state=before.state.value if before is not None else None,
            to_state=state.value,
            event=event.value,
            from_host=before.host if before is not None else None,
            lease_expires_at=lease,
        ),
    )


def place(before: Placement | None, slot: str, host: str, *, now: float, lease_s: float) -> Move:
    """Place ``slot`` on ``host`` under the next epoch (raises for a live placement)."""
    if lease_s <= 0:
        raise ValueError("lease_s must be positive")
    if before is not None and before.slot != slot:
        raise ValueError(f"placement of {before.slot!r} given for slot {slot!r}")
    epoch = (before.epoch if before is not None else 0) + 1
    return _move(slot, before, PlacementEvent.PLACE, host=host, epoch=epoch, lease=now + lease_s)


def check(current: Placement | None, slot: str, epoch: int, *, now: float) -> Placement:
    """The placement a holder of ``epoch`` may act under, or raise :class:`FencedOut`."""
    held = named(current, slot, epoch)
    if held.lease_lost(now):
        raise LeaseLapsed(f"slot {slot!r}: the lease of epoch {epoch} ran out; renew first")
    return held


def named(current: Placement | None, slot: str, epoch: int) -> Placement:
    """The placement, if the store names ``epoch`` as placed (its lease aside)."""
    if current is None:
        raise FencedOut(f"slot {slot!r} is not placed: epoch {epoch} may not act")
    if current.epoch != epoch:
        raise FencedOut(
            f"slot {slot!r}: epoch {epoch} is stale (the store names epoch {current.epoch}"
            f" on {current.host!r})"
        )
    if current.state is not PlacementState.PLACED:
        raise FencedOut(f"slot {slot!r}: epoch {epoch} is {current.state.value}")
    return current


def renew(current: Placement | None, slot: str, epoch: int, *, now: float, lease_s: float) -> Move:
    """Extend the lease of the holder of ``epoch`` (refused like any fenced act)."""
    held = check(current, slot, epoch, now=now)
    return _move(slot, held, PlacementEvent.RENEW, host=held.host, epoch=epoch, lease=now + lease_s)


def confirm(
    current: Placement | None, slot: str, epoch: int, *, now: float, lease_s: float
) -> Move:
    """The holder's first act: take up its placement, even if the lease lapsed meanwhile.

    Starting an actor (a worker process, its imports, the store) can take longer than
    the lease on a loaded host; nothing has acted under the epoch yet, so a lapse alone
    is no reason to refuse it. The store must still name the epoch as placed: once the
    coordinator expired or moved it, the copy is fenced out as always.
    """
    held = named(current, slot, epoch)
    return _move(slot, held, PlacementEvent.RENEW, host=held.host, epoch=epoch, lease=now + lease_s)


def expire(current: Placement, *, now: float) -> Move:
    """The coordinator's move once the lease ran out (raises while it is still live)."""
    if not current.lease_lost(now):
        PLACEMENT.next(current.state, PlacementEvent.EXPIRE)  # illegal states raise first
        raise IllegalPlacement(f"slot {current.slot!r}: the lease of epoch {current.epoch} is live")
    return _ended(current, PlacementEvent.EXPIRE)


def fail(current: Placement) -> Move:
    """The coordinator's move when the holder's host is known dead (before the lease ends)."""
    return _ended(current, PlacementEvent.FAIL)


def _ended(current: Placement, event: PlacementEvent) -> Move:
    """The coordinator ends the current epoch: host, epoch and lease stay as recorded."""
    return _move(
        current.slot,
        current,
        event,
        host=current.host,
        epoch=current.epoch,
        lease=current.lease_expires_at,
    )


def release(current: Placement | None, slot: str, epoch: int, *, now: float) -> Move:
    """The holder stops cleanly (only the current holder may release)."""
    held = check(current, slot, epoch, now=now)
    return _move(slot, held, PlacementEvent.RELEASE, host=held.host, epoch=epoch, lease=now)


# ------------------------------------------------------------------ the coordinator


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What the coordinator knows of a worker host (from Ray's node table and the config)."""

    name: str
    alive: bool
    slots: frozenset[str]
    """The role slots whose checkout this host holds (its custom resource per slot)."""


@dataclass(frozen=True, slots=True)
class Keep:
    """The placement stands."""


@dataclass(frozen=True, slots=True)
class NoHost:
    reason: str


@dataclass(frozen=True, slots=True)
class Place:
    host: str


@dataclass(frozen=True, slots=True)
class Expire:
    """The lease ran out: record it, then place again."""


@dataclass(frozen=True, slots=True)
class HostDead:
    """The host is dead: record it, then place again."""


Decision = Keep | NoHost | Place | Expire | HostDead


def choose_host(
    slot: str,
    hosts: Sequence[HostFacts],
    *,
    load: Mapping[str, int],
    previous: str | None = None,
) -> str | None:
    """The host for ``slot``: alive and holding its checkout; the previous one if it still
    qualifies (the agent's session files are there), else the least loaded, by name."""
    eligible = [h for h in hosts if h.alive and slot in h.slots]
    if previous is not None and any(h.name == previous for h in eligible):
        return previous
    if not eligible:
        return None
    return min(eligible, key=lambda h: (load.get(h.name, 0), h.name)).name


def placement_step(
    slot: str,
    current: Placement | None,
    hosts: Sequence[HostFacts],
    *,
    now: float,
    load: Mapping[str, int],
) -> Decision:
    """The coordinator's one step for a slot, from facts only."""
    if current is None or current.state is not PlacementState.PLACED:
        previous = current.host if current is not None else None
        host = choose_host(slot, hosts, load=load, previous=previous)
        if host is None:
            return NoHost(f"no live host holds the checkout of {slot!r}")
        return Place(host)
    by_name = {h.name: h for h in hosts}
    holder = by_name.get(current.host)
    if holder is None or not holder.alive:
        return HostDead()
    if current.lease_lost(now):
        return Expire()
    return Keep()


# ---------------------------------------------------------------------- the holder


class Watchdog(StrEnum):
    ACT = "act"
    RENEW = "renew"
    PAUSE = "pause"
    """Freeze the agent: no renewal was confirmed for about the lease (the store is out,
    or this host is cut off from it); it goes on if the store confirms the epoch again."""
    KILL = "kill"
    """The store refused the epoch: stop the agent for good."""


def watchdog(*, lease_s: float, since_renewal: float, margin_s: float = 1.0) -> Watchdog:
    """The holder's verdict, from its monotonic time since the last *confirmed* renewal.

    ``since_renewal`` counts from when the confirmed renewal was *sent* (the store
    granted the lease no earlier), so the holder's view of its lease is never longer
    than the store's. Pause the agent ``margin_s`` before the lease may have run out:
    by then the coordinator may have placed a new copy, and a frozen agent does nothing.
    """
    if lease_s <= margin_s:
        raise ValueError("the lease must be longer than the watchdog's margin")
    if since_renewal >= lease_s - margin_s:
        return Watchdog.PAUSE
    if since_renewal >= lease_s / 3:  # renew early: two more tries before the pause
        return Watchdog.RENEW
    return Watchdog.ACT
