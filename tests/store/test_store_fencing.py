"""Epoch fencing through the store, on both backends: placements move with their event,
and a holder's side effect commits only under the epoch the store names now.

Each ``open_cluster_store()`` is another writer (on PostgreSQL another host's connections, on
SQLite another writer on the file), so the coordinator and two holders are three stores.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from baton.cluster.fencing import Placements
from baton.cluster.placement import FencedOut, IllegalPlacement, Placement
from baton.events.model import ClusterPlacementChanged, FileWritten
from baton.events.sequencer import Sequencer
from baton.runner.emitter import EventEmitter
from baton.store import Migration
from baton.store.tx import Tx

from .conftest import StoreFactory, run_record

EFFECTS = Migration(
    "test.0001_effects",
    "CREATE TABLE effects (id INTEGER PRIMARY KEY, holder TEXT NOT NULL, epoch INTEGER NOT NULL)",
)
SLOT = "dev-1"
LEASE_S = 600.0


@dataclass
class Side:
    """One writer: its store, its run's journal and its view of the placements."""

    store: object
    run_id: str
    placements: Placements


@pytest.fixture
async def sides(open_cluster_store: StoreFactory) -> AsyncIterator[dict[str, Side]]:
    opened: dict[str, Side] = {}
    try:
        for name in ("coordinator", "w1", "w2"):
            store = open_cluster_store(extra_migrations=[EFFECTS])
            run_id = f"run-{name}"
            store.create_run(run_record(run_id))
            journal = EventEmitter(Sequencer(run_id), store)
            opened[name] = Side(store, run_id, Placements(store, journal))
        yield opened
    finally:
        for side in opened.values():
            side.store.close()  # type: ignore[attr-defined]


def _effect(holder: str, epoch: int):  # type: ignore[no-untyped-def]
    def write(tx: Tx) -> str:
        tx.execute("INSERT INTO effects (holder, epoch) VALUES (?, ?)", (holder, epoch))
        return holder

    return write


def _effects(side: Side) -> list[tuple[str, int]]:
    rows = side.store.read_tx(  # type: ignore[attr-defined]
        lambda tx: tx.all("SELECT holder, epoch FROM effects ORDER BY id")
    )
    return [(str(h), int(e)) for h, e in rows]


def _placement_events(side: Side) -> list[tuple[str, str, int]]:
    out = []
    for event in side.store.iter_events(side.run_id):  # type: ignore[attr-defined]
        if isinstance(event.payload, ClusterPlacementChanged):
            out.append((event.payload.event, event.payload.host, event.payload.epoch))
    return out


async def test_each_placement_bumps_the_epoch_with_its_event(sides: dict[str, Side]) -> None:
    coordinator = sides["coordinator"].placements
    first = await coordinator.place(SLOT, "w1", lease_s=LEASE_S)
    await coordinator.fail(SLOT)
    second = await coordinator.place(SLOT, "w2", lease_s=LEASE_S)
    assert (first.epoch, second.epoch) == (1, 2)
    assert await sides["w1"].placements.current(SLOT) == second  # every writer reads the row
    assert _placement_events(sides["coordinator"]) == [
        ("place", "w1", 1),
        ("fail", "w1", 1),
        ("place", "w2", 2),
    ]


async def test_a_stale_holder_s_side_effect_is_refused_and_stores_nothing(
    sides: dict[str, Side],
) -> None:
    coordinator = sides["coordinator"].placements
    old = await coordinator.place(SLOT, "w1", lease_s=LEASE_S)
    assert await sides["w1"].placements.fenced(SLOT, old.epoch, _effect("w1", old.epoch)) == "w1"
    await coordinator.fail(SLOT)  # w1 partitioned: Ray declared its node dead
    new = await coordinator.place(SLOT, "w2", lease_s=LEASE_S)
    done = FileWritten(path="a.txt", bytes=1, sha256="0" * 64)
    with pytest.raises(FencedOut, match="epoch 1 is stale"):
        await sides["w1"].placements.fenced(SLOT, old.epoch, _effect("w1", old.epoch), [done])
    with pytest.raises(FencedOut):
        await sides["w1"].placements.renew(SLOT, old.epoch, lease_s=LEASE_S)
    await sides["w2"].placements.fenced(SLOT, new.epoch, _effect("w2", new.epoch), [done])
    assert _effects(sides["coordinator"]) == [("w1", 1), ("w2", 2)]
    # the refused write's event was dropped with it; the accepted one's was stored
    assert [e.type for e in sides["w1"].store.iter_events("run-w1")] == []  # type: ignore[attr-defined]
    assert [e.type for e in sides["w2"].store.iter_events("run-w2")] == ["file.written"]  # type: ignore[attr-defined]


async def test_two_holders_write_at_once_and_only_the_current_epoch_lands(
    sides: dict[str, Side],
) -> None:
    """Each round moves the slot to the other host, then both copies act at the same moment."""
    coordinator = sides["coordinator"].placements
    epochs = {"w1": 0, "w2": 0}
    for round_ in range(6):
        host, stale = ("w1", "w2") if round_ % 2 == 0 else ("w2", "w1")
        if round_:
            await coordinator.fail(SLOT)
        epochs[host] = (await coordinator.place(SLOT, host, lease_s=LEASE_S)).epoch

        async def act(name: str) -> str | None:
            try:
                return await sides[name].placements.fenced(
                    SLOT, epochs[name], _effect(name, epochs[name])
                )
            except FencedOut:
                return None

        results = await asyncio.gather(act("w1"), act("w2"))
        assert dict(zip(("w1", "w2"), results, strict=True)) == {host: host, stale: None}
    assert _effects(sides["coordinator"]) == [(("w1", "w2")[i % 2], i + 1) for i in range(6)]


async def test_a_re_placement_waits_for_a_fenced_write_in_flight(sides: dict[str, Side]) -> None:
    """The check and the side effect are one transaction: a move cannot slip in between.

    The holder's clock is read by the check; this one pauses there until the move has
    been tried. Were the check outside the effect's transaction, the move would commit
    during the pause and the effect would then land after it, under a stale epoch.
    """
    coordinator = sides["coordinator"].placements
    old = await coordinator.place(SLOT, "w1", lease_s=LEASE_S)
    checking = threading.Event()
    moved = threading.Event()

    def clock() -> float:
        checking.set()
        moved.wait(0.5)  # the move must not be able to commit now; it waits for our commit
        return time.time()

    w1 = sides["w1"]
    holder = Placements(w1.store, EventEmitter(Sequencer("run-w1-holder"), w1.store), clock=clock)  # type: ignore[arg-type]
    w1.store.create_run(run_record("run-w1-holder"))  # type: ignore[attr-defined]

    def effect(tx: Tx) -> bool:
        tx.execute("INSERT INTO effects (holder, epoch) VALUES ('w1', ?)", (old.epoch,))
        return moved.is_set()

    acting = asyncio.ensure_future(holder.fenced(SLOT, old.epoch, effect))
    assert await asyncio.to_thread(checking.wait, 30)
    await coordinator.fail(SLOT)
    moved.set()
    new = await coordinator.place(SLOT, "w2", lease_s=LEASE_S)
    assert await acting is False  # the effect ran before the move could commit
    with pytest.raises(FencedOut):
        await sides["w1"].placements.fenced(SLOT, old.epoch, _effect("w1", old.epoch))
    assert new.epoch == old.epoch + 1
    assert _effects(sides["coordinator"]) == [("w1", 1)]


async def test_a_move_decided_from_a_stale_read_is_decided_again(sides: dict[str, Side]) -> None:
    """Two coordinators place one slot at once: one placement wins, the other is refused."""
    first = await sides["coordinator"].placements.place(SLOT, "w1", lease_s=LEASE_S)
    await sides["coordinator"].placements.fail(SLOT)
    results = await asyncio.gather(
        sides["coordinator"].placements.place(SLOT, "w2", lease_s=LEASE_S),
        sides["w1"].placements.place(SLOT, "w1", lease_s=LEASE_S),
        return_exceptions=True,
    )
    placed = [r for r in results if isinstance(r, Placement)]
    assert len(placed) == 1 and placed[0].epoch == first.epoch + 1
    # the loser re-read a live placement: placing over it is illegal, never a second copy
    assert [type(r) for r in results if not isinstance(r, Placement)] == [IllegalPlacement]
