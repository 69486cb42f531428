"""Subscriptions see committed events only, in order, and survive falling behind."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from baton.errors import StoreError
from baton.events.model import CanonicalEvent
from baton.store import Store, Subscription
from baton.store.sqlite import SqliteStore

from .conftest import event, run_record


async def take(subscription: Subscription, count: int) -> list[CanonicalEvent]:
    got: list[CanonicalEvent] = []
    async for e in subscription:
        got.append(e)
        if len(got) == count:
            break
    return got


async def test_only_committed_events_in_order(store: Store) -> None:
    subscription = store.subscribe("run-1")
    committed_at_delivery: list[bool] = []

    async def consume() -> list[CanonicalEvent]:
        got: list[CanonicalEvent] = []
        async for e in subscription:
            # An independent read must already see it: delivery follows COMMIT.
            committed_at_delivery.append(store.last_seq("run-1") >= e.seq)
            got.append(e)
            if len(got) == 300:
                break
        return got

    consumer = asyncio.create_task(consume())
    for seq in range(1, 301):
        await store.append_async(event(seq))
        if seq % 50 == 0:
            await asyncio.sleep(0)  # let the consumer interleave
    got = await consumer
    assert [e.seq for e in got] == list(range(1, 301))
    assert all(committed_at_delivery)
    subscription.close()


@pytest.mark.sqlite_only("holds the writer with execute_write")
async def test_nothing_is_delivered_before_commit(store: Store) -> None:
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait()

    subscription = store.subscribe("run-1")
    held = store.execute_write(hold)
    entered.wait()
    store.append(event(1))
    assert subscription.backlog == 0  # queued, not committed: not visible
    release.set()
    await asyncio.wrap_future(held)
    await store.flush()
    assert [e.seq for e in await take(subscription, 1)] == [1]


async def test_run_filter_and_all_runs(store: Store) -> None:
    store.create_run(run_record("run-2"))
    mine = store.subscribe("run-2")
    everything = store.subscribe()
    store.append(event(1, "run-1"))
    store.append(event(1, "run-2"))
    store.append(event(2, "run-1"))
    store.append(event(2, "run-2"))
    await store.flush()
    assert [(e.run_id, e.seq) for e in await take(mine, 2)] == [("run-2", 1), ("run-2", 2)]
    assert [(e.run_id, e.seq) for e in await take(everything, 4)] == [
        ("run-1", 1),
        ("run-2", 1),
        ("run-1", 2),
        ("run-2", 2),
    ]


async def test_events_appended_before_subscribe_are_not_pushed(store: Store) -> None:
    store.append(event(1))
    subscription = store.subscribe("run-1")
    store.append(event(2))
    await store.flush()
    assert [e.seq for e in await take(subscription, 1)] == [2]


async def test_lagging_subscriber_is_marked_then_catches_up(store: Store) -> None:
    subscription = store.subscribe("run-1", max_backlog=10)
    for seq in range(1, 2501):
        store.append(event(seq))
    await store.flush()  # subscribers are handed each batch before flush returns
    assert subscription.lagged
    assert subscription.lag_count >= 1
    assert subscription.backlog <= 10
    got = await take(subscription, 2500)
    assert [e.seq for e in got] == list(range(1, 2501))
    assert not subscription.lagged
    # Live again after catching up.
    store.append(event(2501))
    await store.flush()
    assert [e.seq for e in await take(subscription, 1)] == [2501]


async def test_lag_across_runs_while_the_writer_keeps_going(store: Store) -> None:
    store.create_run(run_record("run-2"))
    subscription = store.subscribe(max_backlog=5)
    expected = {"run-1": list(range(1, 801)), "run-2": list(range(1, 801))}

    async def produce() -> None:
        for seq in range(1, 801):
            await store.append_async(event(seq, "run-1"))
            await store.append_async(event(seq, "run-2"))
            if seq % 100 == 0:
                await store.flush()

    producer = asyncio.create_task(produce())
    got = await take(subscription, 1600)
    await producer
    by_run: dict[str, list[int]] = {"run-1": [], "run-2": []}
    for e in got:
        by_run[e.run_id].append(e.seq)
    assert by_run == expected  # per run: no gap, no duplicate, in order
    assert subscription.lag_count >= 1


async def test_resume_after_seq_replays_then_goes_live(store: Store) -> None:
    for seq in range(1, 51):
        store.append(event(seq))
    await store.flush()
    subscription = store.subscribe("run-1", after_seq=20)
    for seq in range(51, 61):
        store.append(event(seq))  # neither flushed nor pushed before the replay
    got = await take(subscription, 40)
    assert [e.seq for e in got] == list(range(21, 61))


async def test_resume_covers_events_queued_before_subscribe(store: Store) -> None:
    for seq in range(1, 31):
        store.append(event(seq))  # not flushed: still queued when we subscribe
    subscription = store.subscribe("run-1", after_seq=0)
    got = await take(subscription, 30)
    assert [e.seq for e in got] == list(range(1, 31))


async def test_iteration_ends_when_the_store_closes(db_path: Path) -> None:
    store = SqliteStore.open(db_path)
    store.create_run(run_record())
    subscription = store.subscribe("run-1")

    async def consume() -> list[int]:
        return [e.seq async for e in subscription]

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0)
    store.append(event(1))
    store.append(event(2))
    await store.aclose()
    assert await consumer == [1, 2]
    with pytest.raises(StoreError, match="closed"):
        store.subscribe()


async def test_subscription_close_ends_iteration(store: Store) -> None:
    async with store.subscribe("run-1") as subscription:
        consumer = asyncio.create_task(take(subscription, 5))
        await asyncio.sleep(0)
    assert await consumer == []
    store.append(event(1))
    await store.flush()
    assert subscription.backlog == 0


@pytest.mark.sqlite_only("breaks the SQLite file")
async def test_a_failed_store_fails_its_subscribers(store: Store, db_path: Path) -> None:
    subscription = store.subscribe("run-1")
    store.append(event(1))
    await store.flush()
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("INSERT INTO events VALUES ('run-1', 2, 'x', NULL, NULL, 'ts', '{}')")
    conn.close()
    store.append(event(2))
    with pytest.raises(StoreError):
        await store.flush()
    assert [e.seq for e in await take(subscription, 1)] == [1]
    with pytest.raises(StoreError, match="store failed"):
        await take(subscription, 1)


def test_subscriptions_validate_arguments(store: Store) -> None:
    with pytest.raises(ValueError, match="after_seq needs a run_id"):
        store.subscribe(after_seq=3)
    with pytest.raises(ValueError, match="max_backlog"):
        store.subscribe("run-1", max_backlog=0)
