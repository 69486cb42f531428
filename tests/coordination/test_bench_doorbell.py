"""Doorbell latency with 10 / 1,000 (/ 10,000) TASKs already in the workspace. Reported, not asserted.

Run: ``BATON_BENCH=1 pytest tests/coordination/test_bench_doorbell.py -s`` (add
``BATON_BENCH_10K=1`` for 10,000; ``BATON_BENCH_OUT=file.json`` to keep numbers).
Skipped otherwise: at 1,000 tasks each probe waits for Core's O(n) ``create_task``
(seconds), so the module takes about ten minutes.

Three figures per size:

* ``publish->arrived``: the inbox file's link time (``st_ctime``) to the
  consumer holding ``TaskArrived`` (kernel event, Core read, routing, queue);
* ``return->arrived``: ``create_task`` returning to the same point (negative
  when the doorbell is faster than Core's own post-publish fsyncs);
* ``publish->prompt``: through the whole daemon (route, claim T2, binding,
  header) to the moment ``session.prompt`` is called on a fake session
  (``TaskArrived.published_ns`` is the inbox file's link time); each probe waits
  until the previous one settled, so no probe queues behind another's T3.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from baton.coordination.authority import TrustedAuthority
from baton.coordination.daemon import Daemon, RecordingHumanSink
from baton.coordination.doorbell import Doorbell, DoorbellEvent, TaskArrived
from baton.coordination.fcop_port import FcopPort
from baton.coordination.team import default_team
from tests.coordination.bench_fixtures import add_receipts, build_inbox_fixture, check_fixture
from tests.coordination.conftest import KEY
from tests.coordination.fakes import FakeFactory

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("BATON_BENCH"), reason="benchmark: set BATON_BENCH=1"),
]
PROBES = int(os.environ.get("BATON_BENCH_PROBES", "30"))
RESULTS: dict[str, Any] = {}


def sizes() -> list[int]:
    return [10, 1000] + ([10_000] if os.environ.get("BATON_BENCH_10K") else [])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def stats(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(values), 2),
        "p99_ms": round(pct(values, 0.99), 2),
        "max_ms": round(max(values), 2),
    }


def record(name: str, value: Any) -> None:
    RESULTS[name] = value
    print(f"\n{name}: {json.dumps(value)}")
    out = os.environ.get("BATON_BENCH_OUT")
    if out:
        Path(out).write_text(json.dumps(RESULTS, indent=2, sort_keys=True))


@pytest.mark.parametrize("n", sizes())
async def test_doorbell_latency(tmp_path: Path, n: int) -> None:
    authority = TrustedAuthority(KEY)
    root = tmp_path / f"ws{n}"
    root.mkdir()
    t0 = time.perf_counter()
    await asyncio.to_thread(build_inbox_fixture, root, authority, n, "QA")
    built = time.perf_counter() - t0
    port = FcopPort(root, authority=authority)
    await asyncio.to_thread(check_fixture, port, n, full=n <= 10)

    queue: asyncio.Queue[DoorbellEvent] = asyncio.Queue()
    bell = Doorbell(port, lambda r: r if r in {"QA", "DEV"} else None, queue)
    stop = asyncio.Event()
    start = time.perf_counter()
    runner = asyncio.create_task(bell.run(stop))
    for _ in range(n):
        await asyncio.wait_for(queue.get(), 600)
    drained = time.perf_counter() - start

    publish, returned, create = [], [], []
    for i in range(PROBES):
        before = time.time_ns()
        created = await asyncio.to_thread(
            port.create_task, sender="ADMIN", recipient="DEV", subject=f"probe {i}", body="b"
        )
        after = time.time_ns()
        event = await asyncio.wait_for(queue.get(), 60)
        got = time.time_ns()
        assert isinstance(event, TaskArrived) and event.task_id == created.task_id
        linked = os.stat(created.path).st_ctime_ns
        publish.append((got - linked) / 1e6)
        returned.append((got - after) / 1e6)
        create.append((after - before) / 1e6)
    stop.set()
    await asyncio.wait_for(runner, 30)
    record(
        f"doorbell n={n}",
        {
            "fixture_build_s": round(built, 2),
            "drain_s": round(drained, 3),
            "publish->arrived": stats(publish),
            "return->arrived": stats(returned),
            "create_task_ms": stats(create),
        },
    )


@pytest.mark.parametrize("n", [10, 1000])
async def test_publish_to_prompt_through_the_daemon(tmp_path: Path, n: int) -> None:
    authority = TrustedAuthority(KEY)
    root = tmp_path / f"ws{n}"
    root.mkdir()
    # Fixture tasks wait for the human, so the daemon routes but never dispatches them.
    await asyncio.to_thread(build_inbox_fixture, root, authority, n, "ADMIN")
    port = FcopPort(root, authority=authority)
    prompted: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    sink = RecordingHumanSink()
    daemon = Daemon(
        port=port,
        team=default_team(),
        factory=FakeFactory(),
        state_dir=root / ".baton",
        human_sink=sink,
    )
    daemon.prompt_started = lambda slot, task, _: prompted.put_nowait((task, time.time_ns()))
    published: dict[str, int] = {}
    on_event = daemon._on_event

    async def spy(event: DoorbellEvent) -> None:
        if isinstance(event, TaskArrived):
            published[event.task_id] = event.published_ns
        await on_event(event)

    daemon._on_event = spy  # type: ignore[method-assign]
    running = asyncio.create_task(daemon.run())
    await asyncio.wait_for(daemon.doorbell.ready.wait(), 120)
    latencies: list[float] = []
    for i in range(PROBES):
        created = await asyncio.to_thread(
            port.create_task, sender="ADMIN", recipient="DEV", subject=f"probe {i}", body="b"
        )
        task_id, at = await asyncio.wait_for(prompted.get(), 60)
        assert task_id == created.task_id
        while created.task_id not in {r.task_id for r in sink.reviews}:  # settled (T3)
            sink.changed.clear()
            await asyncio.wait_for(sink.changed.wait(), 60)
        latencies.append((at - published[task_id]) / 1e6)
    daemon.stop()
    await asyncio.wait_for(running, 60)
    record(f"publish->prompt n={n}", stats(latencies))


@pytest.mark.parametrize("receipts", [0, 3000, 30_000])
def test_core_claim_cost_grows_with_receipts(tmp_path: Path, receipts: int) -> None:
    authority = TrustedAuthority(KEY)
    root = tmp_path / "ws"
    root.mkdir()
    build_inbox_fixture(root, authority, 0, "QA")
    port = FcopPort(root, authority=authority)
    add_receipts(port, receipts)
    times = []
    for i in range(5):
        task = port.create_task(sender="ADMIN", recipient="QA", subject=f"c{i}", body="b")
        start = time.perf_counter()
        port.claim(task.task_id, actor="QA")
        times.append((time.perf_counter() - start) * 1000)
    record(f"core T2 claim, {receipts} receipts", stats(times))
