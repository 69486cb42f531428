"""A holder takes up its placement even when starting took longer than the lease.

Seen in the multi-host tier under load: the coordinator placed a slot with a 6 s lease,
Ray took longer than that to start the actor's worker process, the actor's first renewal
was refused ("the lease of epoch 1 ran out") and the coordinator crashed. Nothing had
acted under the epoch yet, so a lapse alone must not refuse the start; a placement the
store no longer names still must. Pure code over plain data.
"""

from __future__ import annotations

import pytest

from baton.cluster.placement import (
    FencedOut,
    Placement,
    PlacementEvent,
    PlacementState,
    check,
    confirm,
    expire,
    place,
    renew,
)

LEASE_S = 6.0


def _placed(now: float = 100.0) -> Placement:
    return place(None, "qa", "w1", now=now, lease_s=LEASE_S).after


def test_a_start_after_the_lease_lapsed_takes_up_the_placement() -> None:
    lapsed_at = 100.0 + LEASE_S + 4.0
    with pytest.raises(FencedOut, match="ran out"):
        renew(_placed(), "qa", 1, now=lapsed_at, lease_s=LEASE_S)  # a later act: refused
    move = confirm(_placed(), "qa", 1, now=lapsed_at, lease_s=LEASE_S)
    assert move.event.event == PlacementEvent.RENEW.value
    assert (move.after.state, move.after.epoch, move.after.host) == (PlacementState.PLACED, 1, "w1")
    assert move.after.lease_expires_at == lapsed_at + LEASE_S
    assert check(move.after, "qa", 1, now=lapsed_at + 1) == move.after  # and it may act


def test_a_start_within_the_lease_is_a_renewal() -> None:
    assert confirm(_placed(), "qa", 1, now=101.0, lease_s=LEASE_S) == renew(
        _placed(), "qa", 1, now=101.0, lease_s=LEASE_S
    )


@pytest.mark.parametrize(
    ("current", "epoch", "why"),
    [
        (None, 1, "not placed"),
        (_placed(), 2, "not placed|stale"),  # a copy from the future: never
        (expire(_placed(), now=200.0).after, 1, "expired"),
        (
            place(expire(_placed(), now=200.0).after, "qa", "w2", now=201.0, lease_s=LEASE_S).after,
            1,
            "stale",
        ),
    ],
)
def test_a_start_the_store_no_longer_names_is_fenced_out(
    current: Placement | None, epoch: int, why: str
) -> None:
    with pytest.raises(FencedOut, match=why):
        confirm(current, "qa", epoch, now=300.0, lease_s=LEASE_S)
