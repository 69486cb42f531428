"""The placement core, table-driven: lifecycle, fencing rule, coordinator decision, watchdog.

Pure code over plain data (no tier, no store): these run in every suite.
"""

from __future__ import annotations

import itertools

import pytest

from baton.cluster.placement import (
    PLACEMENT,
    Expire,
    FencedOut,
    HostDead,
    HostFacts,
    IllegalPlacement,
    Keep,
    NoHost,
    Place,
    Placement,
    PlacementEvent,
    PlacementState,
    Watchdog,
    check,
    choose_host,
    expire,
    fail,
    place,
    placement_step,
    release,
    renew,
    watchdog,
)

P, X, R = PlacementState.PLACED, PlacementState.EXPIRED, PlacementState.RELEASED
LEGAL = {
    (None, PlacementEvent.PLACE): P,
    (P, PlacementEvent.RENEW): P,
    (P, PlacementEvent.EXPIRE): X,
    (P, PlacementEvent.FAIL): X,
    (P, PlacementEvent.RELEASE): R,
    (X, PlacementEvent.PLACE): P,
    (R, PlacementEvent.PLACE): P,
}


@pytest.mark.parametrize(
    ("state", "event"), list(itertools.product([None, *PlacementState], PlacementEvent))
)
def test_the_table_allows_exactly_the_documented_moves(
    state: PlacementState | None, event: PlacementEvent
) -> None:
    if (state, event) in LEGAL:
        assert PLACEMENT.next(state, event) is LEGAL[(state, event)]
    else:
        with pytest.raises(IllegalPlacement, match=f"event {event.value!r}"):
            PLACEMENT.next(state, event)


def _at(state: PlacementState, epoch: int = 3, lease: float = 100.0) -> Placement:
    return Placement("dev-1", "w1", epoch, state, lease)


def test_every_placement_bumps_the_epoch_and_carries_its_event() -> None:
    first = place(None, "dev-1", "w1", now=10.0, lease_s=15.0)
    assert first.after == Placement("dev-1", "w1", 1, P, 25.0)
    assert (first.event.epoch, first.event.from_state, first.event.to_state) == (1, None, "placed")
    lost = expire(first.after, now=25.0)
    again = place(lost.after, "dev-1", "w2", now=26.0, lease_s=15.0)
    assert (again.after.epoch, again.after.host, again.event.from_host) == (2, "w2", "w1")
    assert again.event.event == "place" and again.before == lost.after


def test_a_live_placement_is_never_placed_over() -> None:
    with pytest.raises(IllegalPlacement):
        place(_at(P), "dev-1", "w2", now=0.0, lease_s=10.0)
    with pytest.raises(IllegalPlacement, match="is live"):
        expire(_at(P, lease=100.0), now=99.9)
    with pytest.raises(IllegalPlacement):
        fail(_at(R))


@pytest.mark.parametrize(
    ("current", "epoch", "now", "refused"),
    [
        (None, 1, 0.0, "not placed"),
        (_at(P, epoch=3), 2, 0.0, "epoch 2 is stale"),
        (_at(P, epoch=3), 4, 0.0, "epoch 4 is stale"),
        (_at(X, epoch=3), 3, 0.0, "is expired"),
        (_at(R, epoch=3), 3, 0.0, "is released"),
        (_at(P, epoch=3, lease=100.0), 3, 100.0, "ran out"),
        (_at(P, epoch=3, lease=100.0), 3, 99.0, None),
    ],
)
def test_check_admits_only_the_current_epoch_under_a_live_lease(
    current: Placement | None, epoch: int, now: float, refused: str | None
) -> None:
    if refused is None:
        assert check(current, "dev-1", epoch, now=now) == current
    else:
        with pytest.raises(FencedOut, match=refused):
            check(current, "dev-1", epoch, now=now)


def test_only_the_holder_renews_or_releases() -> None:
    held = _at(P, epoch=3, lease=100.0)
    renewed = renew(held, "dev-1", 3, now=95.0, lease_s=15.0)
    assert renewed.after.lease_expires_at == 110.0 and renewed.after.epoch == 3
    with pytest.raises(FencedOut):
        renew(held, "dev-1", 2, now=95.0, lease_s=15.0)
    with pytest.raises(FencedOut):
        release(held, "dev-1", 2, now=95.0)
    assert release(held, "dev-1", 3, now=95.0).after.state is R


W1 = HostFacts("w1", alive=True, slots=frozenset({"dev-1", "qa-1"}))
W2 = HostFacts("w2", alive=True, slots=frozenset({"dev-1"}))
W1_DEAD = HostFacts("w1", alive=False, slots=W1.slots)


@pytest.mark.parametrize(
    ("current", "hosts", "load", "now", "decision"),
    [
        (None, [W1, W2], {}, 0.0, Place("w1")),  # tie on load: by name
        (None, [W1, W2], {"w1": 2, "w2": 1}, 0.0, Place("w2")),  # least loaded
        (None, [W1_DEAD, W2], {}, 0.0, Place("w2")),  # dead hosts are not eligible
        (None, [W1_DEAD], {}, 0.0, NoHost("no live host holds the checkout of 'dev-1'")),
        (
            None,
            [HostFacts("w3", True, frozenset())],
            {},
            0.0,
            NoHost("no live host holds the checkout of 'dev-1'"),
        ),
        (_at(X), [W1, W2], {"w1": 9}, 0.0, Place("w1")),  # sticky: its session files are there
        (_at(R), [W1_DEAD, W2], {}, 0.0, Place("w2")),
        (_at(P, lease=100.0), [W1, W2], {}, 50.0, Keep()),
        (_at(P, lease=100.0), [W1, W2], {}, 100.0, Expire()),
        (_at(P, lease=100.0), [W1_DEAD, W2], {}, 50.0, HostDead()),
        (_at(P, lease=100.0), [W2], {}, 50.0, HostDead()),  # the host left the cluster
    ],
)
def test_the_coordinator_decides_from_facts(
    current: Placement | None,
    hosts: list[HostFacts],
    load: dict[str, int],
    now: float,
    decision: object,
) -> None:
    assert placement_step("dev-1", current, hosts, now=now, load=load) == decision


def test_choose_host_needs_the_checkout() -> None:
    assert choose_host("qa-1", [W2, W1], load={"w1": 5}) == "w1"
    assert choose_host("qa-1", [W2], load={}) is None


@pytest.mark.parametrize(
    ("since", "verdict"),
    [
        (0.0, Watchdog.ACT),
        (4.9, Watchdog.ACT),
        (5.0, Watchdog.RENEW),
        (13.9, Watchdog.RENEW),
        (14.0, Watchdog.PAUSE),
        (60.0, Watchdog.PAUSE),
    ],
)
def test_the_watchdog_pauses_before_the_lease_may_have_run_out(
    since: float, verdict: Watchdog
) -> None:
    assert watchdog(lease_s=15.0, since_renewal=since, margin_s=1.0) is verdict


def test_a_lease_shorter_than_the_margin_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than"):
        watchdog(lease_s=1.0, since_renewal=0.0, margin_s=1.0)
