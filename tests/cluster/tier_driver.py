"""The coordinator of the fault tests, run on the tier's head host: a Ray driver over the
PostgreSQL store, driven by JSON commands on stdin, answering JSON lines on stdout.

``python tier_driver.py ADDRESS DSN ROOT``; commands (one JSON object a line):

* ``{"op": "place", "slot", "scenario", "lease_s"}`` → ``placed`` (host, epoch, holder info);
* ``{"op": "prompt", "slot", "text"}`` → starts the turn; later ``replaced`` for each
  re-placement (with when the loss was seen) and ``prompt_done`` (status, epochs);
* ``{"op": "wait_pending", "slot", "epoch"}`` → ``pending`` once the holder of that epoch
  has a request in the ledger;
* ``{"op": "answer", "request_id"}`` → ``answered``;
* ``{"op": "attach", "slot", "scenario"}`` → ``attached`` (a new coordinator re-attaches by
  name; ``prompt`` then goes to the re-attached holder);
* ``{"op": "wait_event", "run_id", "type"}`` → ``event`` once the run has one of that type;
* ``{"op": "report", "slot"}`` → ``report``: every holder run of the slot with its event
  types, its ``cluster.fenced_out`` payloads and its requests' states;
* ``{"op": "hosts", "slot"}`` → ``hosts``: the live hosts that may run the slot;
* ``{"op": "release", "slot"}``, ``{"op": "quit"}``.

Every line carries ``at``: CLOCK_MONOTONIC, one clock for all namespaces of the machine,
so the test subtracts its own fault times.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from baton.app.root import open_holder_root
from baton.cluster.actor import HolderSpec
from baton.cluster.driver import ClusterDriver, Holder, RemoteRoleSession
from baton.request_model.documents import PermissionAnswer
from baton.requests.ledger import Ledger
from baton.store.pg import PgStore
from tests.cluster.support import coordinator_run, fake_profile


def say(op: str, **fields: Any) -> None:
    print(json.dumps({"op": op, "at": time.monotonic(), **fields}, default=str), flush=True)


class Coordinator:
    def __init__(self, address: str, dsn: str, root: Path) -> None:
        self.address, self.dsn, self.root = address, dsn, root
        self.store = PgStore.open(dsn)
        self.ledger = Ledger(self.store)
        # A pid alone repeats: a restarted coordinator in the host's PID namespace may get
        # the pid an earlier driver had, and the runs table already holds that run.
        self.emitter = coordinator_run(self.store, f"run-tier-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        self.driver = ClusterDriver.connect(
            address, self.store, self.emitter, lease_s=6.0, ledger=self.ledger
        )
        self.sessions: dict[str, RemoteRoleSession] = {}
        self.runs: dict[str, list[str]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def spec(self, slot: str, scenario: str, lease_s: float) -> HolderSpec:
        workspace = self.root / f"ws-{slot}"
        workspace.mkdir(parents=True, exist_ok=True)
        return HolderSpec(
            dsn=self.dsn,
            slot=slot,
            epoch=0,
            host="",
            lease_s=lease_s,
            parent_run=self.emitter.run_id,
            profile=fake_profile(scenario),
            workspace=str(workspace),
            state_dir=str(self.root / "state"),
            permissions="ask",
            wait_timeout=600,
            environ={"PATH": os.environ["PATH"]},
            root=open_holder_root,
        )

    async def place(self, slot: str, scenario: str, lease_s: float) -> None:
        self.driver.lease_s = lease_s
        await _until(lambda: len([h for h in self.driver.hosts([slot]) if h.alive]) >= 2)
        spec = self.spec(slot, scenario, lease_s)
        holder = await self.driver.ensure(spec)
        self.runs.setdefault(slot, []).append(holder.info["run_id"])

        def replaced(new: Holder, slot: str = slot) -> None:
            self.runs[slot].append(new.info["run_id"])
            session = self.sessions[slot]
            seen_at, reason = session.losses[-1]
            say(
                "replaced",
                slot=slot,
                host=new.placement.host,
                epoch=new.placement.epoch,
                lost_seen_at=seen_at,
                reason=reason,
            )

        self.sessions[slot] = RemoteRoleSession(self.driver, spec, holder, on_replaced=replaced)
        say("placed", host=holder.placement.host, epoch=holder.placement.epoch, info=holder.info)

    async def prompt(self, slot: str, text: str) -> None:
        session = self.sessions[slot]
        try:
            result = await session.prompt(text)
            say("prompt_done", status=result.status, epoch=session.holder.placement.epoch)
        except Exception as exc:
            say("prompt_done", status="error", error=f"{type(exc).__name__}: {exc}")

    async def wait_pending(self, slot: str, epoch: int) -> None:
        run = f"{self.emitter.run_id}.{slot}.e{epoch}"
        pending = await _until(lambda: self.ledger.pending(run_id=run), timeout=180)
        say("pending", request_id=pending[0].request_id, run_id=run)

    async def attach(self, slot: str, scenario: str) -> None:
        """A new coordinator finds the slot's live holder from the store alone."""
        holder = await self.driver.attach(slot)
        if holder is None:
            say("attached", attached=False)
            return
        self.runs.setdefault(slot, []).append(holder.info["run_id"])
        spec = self.spec(slot, scenario, self.driver.lease_s)
        self.sessions[slot] = RemoteRoleSession(self.driver, spec, holder)
        say("attached", attached=True, epoch=holder.placement.epoch, info=holder.info)

    async def wait_event(self, run_id: str, event_type: str) -> None:
        def seen() -> bool:
            return any(e.type == event_type for e in self.store.iter_events(run_id))

        await _until(seen, timeout=180)
        say("event", run_id=run_id, type=event_type)

    async def report(self, slot: str) -> None:
        runs = []
        for run_id in self.runs.get(slot, []):
            events = list(self.store.iter_events(run_id))
            requests = await self.ledger.list_requests(run_id=run_id)
            runs.append(
                {
                    "run_id": run_id,
                    "types": [e.type for e in events],
                    "fenced": [
                        e.payload.model_dump() for e in events if e.type == "cluster.fenced_out"
                    ],
                    "requests": [r.state.value for r in requests],
                }
            )
        placements = [
            {"slot": p.slot, "host": p.host, "epoch": p.epoch, "state": p.state.value}
            for p in await self.driver.placements.all()
        ]
        say("report", runs=runs, placements=placements)

    async def handle(self, command: dict[str, Any]) -> bool:
        op = command["op"]
        if op == "place":
            await self.place(command["slot"], command["scenario"], float(command["lease_s"]))
        elif op == "prompt":
            task = asyncio.create_task(self.prompt(command["slot"], command["text"]))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif op == "wait_pending":
            await self.wait_pending(command["slot"], int(command["epoch"]))
        elif op == "answer":
            await self.ledger.answer(
                command["request_id"], PermissionAnswer(decision="allow"), decided_by="human"
            )
            say("answered", request_id=command["request_id"])
        elif op == "attach":
            await self.attach(command["slot"], command.get("scenario", "permission"))
        elif op == "wait_event":
            await self.wait_event(command["run_id"], command["type"])
        elif op == "report":
            await self.report(command["slot"])
        elif op == "hosts":
            hosts = await asyncio.to_thread(self.driver.hosts, [command["slot"]])
            say(
                "hosts",
                alive=sorted(h.name for h in hosts if h.alive and command["slot"] in h.slots),
            )
        elif op == "release":
            await self.driver.release(command["slot"])
            say("released", slot=command["slot"])
        elif op == "quit":
            return False
        return True

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await self.ledger.aclose()
        await self.store.aclose()


async def _until(check: Any, *, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.2)  # another process makes it true


async def main(address: str, dsn: str, root: str) -> None:
    coordinator = Coordinator(address, dsn, Path(root))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    say("ready")
    try:
        while line := await reader.readline():
            if not await coordinator.handle(json.loads(line)):
                break
    finally:
        await coordinator.close()
        import ray

        ray.shutdown()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
