"""Answer round trip: a human's answer committed → the reply on the agent's stdin.

The ledger holds 1,000 other pending requests. The answering side is a separate
``Ledger`` on its own SQLite connection (as ``baton answer`` in another process
is), so the wake-up crosses the FIFO doorbell. The agent timestamps each reply
with the system-wide monotonic clock the moment it reads it.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benches.common import print_table

PENDING = 1000
AGENT = Path(__file__).with_name("permission_agent.py")


async def _round_trips(count: int) -> list[float]:
    from baton.agent_profile import AgentProfile
    from baton.app import Baton
    from baton.events.model import CanonicalEvent
    from baton.request_model.documents import PermissionAnswer, parse_document
    from baton.requests.ledger import Ledger
    from baton.store.records import RunRecord

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        async with Baton.open(state_dir=root / "state") as baton:
            store, ledger = baton.store, baton.ledger
            store.create_run(
                RunRecord(
                    run_id="other",
                    kind="bench",
                    agent="bench",
                    cwd=tmp,
                    status="running",
                    created_at="2026-01-01T00:00:00.000Z",
                )
            )
            doc = parse_document(
                {
                    "kind": "permission",
                    "tool_call": {"tool_call_id": "x", "title": "other", "kind": "execute"},
                    "options": [{"option_id": "a", "name": "A", "kind": "allow_once"}],
                }
            )
            for n in range(PENDING):
                await ledger.create(
                    doc,
                    run_id="other",
                    connection_id="elsewhere",
                    jsonrpc_id=n,
                    session_id="s",
                    turn_id="t",
                )
            answerer = Ledger.open(baton.config.db_path)
            sent: dict[int, int] = {}
            order: list[str] = []
            pending_answers: set[asyncio.Task[Any]] = set()

            async def answer(request_id: str, index: int) -> None:
                sent[index] = time.monotonic_ns()
                await answerer.answer(
                    request_id, PermissionAnswer(decision="allow"), decided_by="human"
                )

            def on_event(event: CanonicalEvent) -> None:
                if event.type == "request.created":
                    order.append(event.payload.request_id)  # type: ignore[attr-defined]
                    task = asyncio.create_task(answer(order[-1], len(order) - 1))
                    pending_answers.add(task)
                    task.add_done_callback(pending_answers.discard)

            (root / "ws").mkdir()
            profile = AgentProfile(
                name="bench",
                title="bench",
                family="generic",
                command=(sys.executable, str(AGENT), "--count", str(count)),
            )
            async with baton.run(kind="bench", agent="bench", cwd=root, run_id="bench") as run:
                run.listen(on_event)
                session = await baton.open_session(
                    profile,
                    run=run,
                    requests=baton.broker("reads", wait_timeout=60, notify=False),
                    workspace=root / "ws",
                )
                await session.prompt("go")
                assert session.transport is not None
                stderr = session.transport.stderr.tail(1 << 16)
                await session.close()
                run.status = "completed"
            await answerer.aclose()
    received = {
        int(p[1]): int(p[2])
        for p in (line.split() for line in stderr.splitlines())
        if len(p) == 3 and p[0] == "reply"
    }
    return [(received[i] - sent[i]) / 1e6 for i in sorted(received) if i in sent]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(count: int, repeats: int) -> None:
    samples: list[float] = []
    for _ in range(repeats):
        samples += asyncio.run(_round_trips(count))
    rows = [
        [
            f"{len(samples)}",
            f"{statistics.median(samples):.2f}",
            f"{_pct(samples, 0.99):.2f}",
            f"{max(samples):.2f}",
            "50.00",
            "MET" if _pct(samples, 0.99) < 50 else "NOT MET",
        ]
    ]
    print_table(
        f"answer round trip with {PENDING:,} pending requests in the ledger (ms)",
        ["answers", "p50", "p99", "max", "target p99", "verdict"],
        rows,
    )
