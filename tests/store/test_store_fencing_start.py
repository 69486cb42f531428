"""A holder's start through the store, on both backends: a lapsed but unmoved placement
is taken up (its actor was slow to start), an expired one is refused.

See ``tests/cluster/test_placement_start.py`` for the rule; here the coordinator and the
holder are two writers on one store, with the holder's clock past the lease.
"""

from __future__ import annotations

import time

import pytest

from baton.cluster.fencing import Placements
from baton.cluster.placement import FencedOut
from baton.events.sequencer import Sequencer
from baton.runner.emitter import EventEmitter
from baton.store.tx import Tx

from .conftest import StoreFactory, run_record

SLOT = "qa-1"
LEASE_S = 6.0


def _writer(open_cluster_store: StoreFactory, name: str, clock: float) -> tuple[object, Placements]:
    store = open_cluster_store()
    store.create_run(run_record(f"run-{name}"))  # type: ignore[attr-defined]
    journal = EventEmitter(Sequencer(f"run-{name}"), store)  # type: ignore[arg-type]
    return store, Placements(store, journal, clock=lambda: clock)  # type: ignore[arg-type]


def _nothing(tx: Tx) -> None:
    return None


async def test_a_slow_start_takes_up_its_placement_and_may_act(
    open_cluster_store: StoreFactory,
) -> None:
    now = time.time()
    c_store, coordinator = _writer(open_cluster_store, "coordinator", now)
    h_store, holder = _writer(open_cluster_store, "holder", now + LEASE_S + 5)  # started late
    try:
        placed = await coordinator.place(SLOT, "w1", lease_s=LEASE_S)
        with pytest.raises(FencedOut, match="ran out"):
            await holder.renew(SLOT, placed.epoch, lease_s=LEASE_S)
        taken = await holder.confirm(SLOT, placed.epoch, lease_s=LEASE_S)
        assert taken.lease_expires_at == now + LEASE_S + 5 + LEASE_S
        await holder.fenced(SLOT, placed.epoch, _nothing)  # acts under the fresh lease
        assert (await coordinator.current(SLOT)) == taken
    finally:
        c_store.close()  # type: ignore[attr-defined]
        h_store.close()  # type: ignore[attr-defined]


async def test_a_start_after_the_coordinator_expired_it_is_refused(
    open_cluster_store: StoreFactory,
) -> None:
    now = time.time()
    c_store, coordinator = _writer(open_cluster_store, "coordinator", now)
    l_store, later = _writer(open_cluster_store, "coordinator-later", now + LEASE_S + 1)
    h_store, holder = _writer(open_cluster_store, "holder", now + LEASE_S + 5)
    try:
        placed = await coordinator.place(SLOT, "w1", lease_s=LEASE_S)
        await later.expire(SLOT)  # the coordinator saw the lease run out first
        with pytest.raises(FencedOut, match="expired"):
            await holder.confirm(SLOT, placed.epoch, lease_s=LEASE_S)
    finally:
        for store in (c_store, l_store, h_store):
            store.close()  # type: ignore[attr-defined]
