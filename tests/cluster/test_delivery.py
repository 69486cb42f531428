"""Role tool calls of worker agents: recorded, accepted under their epoch, delivered once
(issue 30 items 1 and 2), against a real PostgreSQL store and a real FCoP workspace.

* the one transaction rule, in both orders: a report accepted before the slot's
  re-placement closes the turn (the re-placement adopts it); one arriving after epoch N+1
  was placed is refused as stale and recorded;
* a delivery asked again, or cut short between its acceptance and its record, files one
  report, never two;
* the coordinator's own side (:class:`~baton.cluster.driver.RemoteRoleSession`): a holder
  lost after its report was accepted is not run again, and one lost before is;
* a holder's relay with the real built-in agent: its report waits for a coordinator that
  is away, is delivered to the one that comes back, and past the bound answers "pending
  delivery" and is delivered by the next coordinator reading the outbox.

Ray is a stand-in module where a cluster would be needed: the rules are the driver's and
the store's, both real.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from baton.cluster import driver as driver_module
from baton.cluster.actor import RoleHolder
from baton.cluster.delivery import EpochAcceptance, TurnCalls
from baton.cluster.driver import ClusterDriver, Holder, RemoteRoleSession
from baton.cluster.fencing import Placements
from baton.cluster.names import host_resource
from baton.events.sequencer import utc_now
from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.port import FcopPort
from baton.fcop_port.workspace import init_workspace
from baton.providers.catalog import BUILTIN
from baton.role_tools.delivery import CallState, call_key
from baton.role_tools.hub import RoleHub
from baton.runner.emitter import EventEmitter
from baton.store.tool_call_sql import insert_call, put_hub
from baton.team.contract import TurnResult
from baton.team.reconcile import prompt_digest
from tests.cluster.support import coordinator_run, holder_spec, until
from tests.coordination.slots import open_slot, own_project, point
from tests.support.pg_fixtures import pg_databases, pg_dsn

__all__ = ["pg_databases", "pg_dsn"]

LEASE_S = 60.0
REPORT = {"result": "done", "body": "Ran the suite: 3 passed."}


@dataclass
class World:
    dsn: str
    root: Path
    store: Any
    emitter: EventEmitter
    placements: Placements
    port: FcopPort
    hub: RoleHub
    acceptance: EpochAcceptance
    calls: TurnCalls
    task_id: str
    attempt_id: str

    def reports(self) -> list[Path]:
        return sorted((self.root / "fcop" / "reports").glob("REPORT-*.md"))

    async def record(self, epoch: int, turn: str, seq: int = 1, **args: str) -> str:
        """What a holder's relay records for a call its agent made."""
        key = call_key(
            project="",
            slot="QA",
            task_id=self.task_id,
            attempt_id=self.attempt_id,
            epoch=epoch,
            turn=turn,
            seq=seq,
        )
        now = utc_now()
        row = {
            "call_key": key,
            "project": "",
            "slot": "QA",
            "epoch": epoch,
            "turn": turn,
            "seq": seq,
            "tool": "write_report",
            "arguments": json.dumps(args or REPORT),
            "task_id": self.task_id,
            "attempt_id": self.attempt_id,
            "state": "pending",
            "created_at": now,
            "updated_at": now,
        }
        await self.store.write(lambda tx: insert_call(tx, row))
        return key

    async def move_on(self) -> None:
        """The coordinator re-places the slot (epoch N+1)."""
        await self.placements.fail("QA")
        await self.placements.place("QA", "w2", lease_s=LEASE_S)

    def fenced(self) -> list[Any]:
        events = self.store.iter_events(self.emitter.run_id)
        return [e.payload for e in events if e.type == "cluster.fenced_out"]


@pytest.fixture
async def world(pg_dsn: str, tmp_path: Path) -> AsyncIterator[World]:
    from baton.store.pg import PgStore

    root = tmp_path / "project"
    root.mkdir()
    init_workspace(root, TrustedAuthority(bytes(range(32))))
    store = PgStore.open(pg_dsn)
    own_project(store)
    access = open_slot(store, root, "QA")
    port = FcopPort(root, human="ADMIN")
    task = port.create_task(sender="PM", recipient="QA", subject="smoke", body="run it")
    attempt = port.claim(task.task_id, actor="QA").attempt_id
    point(access, task.task_id, attempt)
    emitter = coordinator_run(store)
    placements = Placements(store, emitter)
    hub = await RoleHub.start(store, root / ".baton")
    acceptance = EpochAcceptance(placements)
    calls = TurnCalls(store, "", hub.serve_calls(acceptance))
    await placements.place("QA", "w1", lease_s=LEASE_S)
    try:
        yield World(
            pg_dsn, root, store, emitter, placements, port, hub, acceptance, calls,
            task.task_id, attempt,
        )  # fmt: skip
    finally:
        await hub.aclose()
        await store.aclose()


# ------------------------------------------------------------- the ordering rule


async def test_a_report_accepted_before_the_re_placement_closes_the_turn(world: World) -> None:
    key = await world.record(1, "t1")
    answer = await world.calls.delivery.deliver(key, slot="QA")
    assert "report_id" in answer["result"], answer
    await world.move_on()  # epoch 2, after the acceptance
    filed = await world.calls.filed_report("QA", 1, "t1")
    assert [c.state for c in filed] == [CallState.DELIVERED]
    assert len(world.reports()) == 1 and world.fenced() == []


async def test_a_report_arriving_after_the_re_placement_is_refused_and_recorded(
    world: World,
) -> None:
    key = await world.record(1, "t1")
    await world.move_on()  # epoch 2 placed before the report reached the hub
    answer = await world.calls.delivery.deliver(key, slot="QA")
    assert answer["error"]["code"] == "STALE_EPOCH" and "stale" in answer["error"]["message"]
    (call,) = await world.calls.of_turn("QA", 1, "t1")
    assert call.state is CallState.REFUSED and call.reason is not None
    assert await world.calls.filed_report("QA", 1, "t1") == ()
    assert world.reports() == [] and world.calls.delivery.runs == 0
    (fenced,) = world.fenced()
    assert (fenced.epoch, fenced.act) == (1, "role tool write_report")
    again = await world.calls.delivery.deliver(key, slot="QA")  # the same answer, kept
    assert again["error"]["code"] == "REFUSED"


async def test_a_delivery_asked_again_or_cut_short_files_one_report(world: World) -> None:
    key = await world.record(1, "t1")
    first, second = await asyncio.gather(
        world.calls.delivery.deliver(key, slot="QA"), world.calls.delivery.deliver(key, slot="QA")
    )
    assert first == second and world.calls.delivery.runs == 1
    assert (await world.calls.delivery.deliver(key, slot="OPS"))["error"]["code"] == (
        "NOT_YOUR_CALL"
    )
    # A coordinator killed after it accepted a call and wrote its report, before it
    # recorded the delivery: the next delivery runs it again and finds that report.
    other = await world.record(1, "t1", seq=2, result="done", body="A correction: 4 passed.")
    (call,) = [c for c in await world.calls.of_turn("QA", 1, "t1") if c.call_key == other]
    assert await world.acceptance.accept(call) is None
    tools = world.hub.pinned_tools("QA", None)
    written = await asyncio.to_thread(tools.call, "write_report", call.arguments)
    answer = await world.calls.delivery.deliver(other, slot="QA")
    assert answer["result"]["report_id"] == written["report_id"]
    assert len(world.reports()) == 2  # the first report and its one correction


# ------------------------------------------------------ the coordinator's side


class ActorDied(Exception):
    """Ray's ``ActorDiedError`` stand-in (a ``RayActorError``)."""


def _fake_ray() -> types.ModuleType:
    ray = types.ModuleType("ray")
    ray.exceptions = types.SimpleNamespace(  # type: ignore[attr-defined]
        RayActorError=ActorDied, ActorUnavailableError=type("Unavailable", (Exception,), {})
    )
    ray.kill = lambda handle, no_restart=True: None  # type: ignore[attr-defined]
    return ray


class Actors:
    """``role_actor_class()``: holders that record each prompt they are given."""

    def __init__(self) -> None:
        self.prompts: list[tuple[int, str]] = []

    def options(self, *, resources: dict[str, float], name: str, **_: Any) -> Actors:
        self.epoch = int(name.rsplit("-e", 1)[1])
        return self

    def remote(self, spec: Any) -> Any:
        return _handle(self, self.epoch)


def _handle(actors: Actors, epoch: int, *, dies: bool = False) -> Any:
    async def start() -> dict[str, Any]:
        return {"run_id": f"run-coordinator.QA.e{epoch}"}

    async def prompt(
        text: str, asker: str | None, charge: tuple[str, str | None] | None = None
    ) -> TurnResult:
        actors.prompts.append((epoch, text))
        if dies:
            raise ActorDied("the actor's node was declared dead")
        return TurnResult("completed", stop_reason="end_turn", tool_calls=2)

    async def close() -> None:
        return None

    def call(fn: Any) -> Any:
        return types.SimpleNamespace(remote=fn)

    return types.SimpleNamespace(start=call(start), prompt=call(prompt), close=call(close))


async def _session(
    world: World, monkeypatch: pytest.MonkeyPatch, actors: Actors
) -> RemoteRoleSession:
    monkeypatch.setitem(sys.modules, "ray", _fake_ray())
    monkeypatch.setattr(driver_module, "role_actor_class", lambda: actors)
    nodes = [{"Alive": True, "Resources": {host_resource(h): 1.0}} for h in ("w1", "w2")]
    driver = ClusterDriver(world.placements, lease_s=LEASE_S, nodes=lambda: nodes)
    spec = holder_spec(
        world.dsn, "QA", "ok", world.root, parent_run="run-coordinator", lease_s=LEASE_S
    )
    placed = await world.placements.current("QA")
    assert placed is not None
    holder = Holder(placed, _handle(actors, placed.epoch, dies=True))
    driver.holders["QA"] = holder
    return RemoteRoleSession(driver, spec, holder, calls=world.calls)


@pytest.mark.parametrize("reached_the_hub", [True, False])
async def test_a_holder_lost_after_its_report_was_accepted_is_not_run_again(
    world: World, monkeypatch: pytest.MonkeyPatch, reached_the_hub: bool
) -> None:
    """The split brain of issue 30 item 2: the holder filed its report, then the
    coordinator lost it (Ray cut off) and placed epoch 2. The report was recorded under
    epoch 1 (and delivered, or still pending: the coordinator delivers it before it moves
    the slot); the turn's result is adopted, epoch 2 never gets the prompt."""
    actors = Actors()
    session = await _session(world, monkeypatch, actors)
    key = await world.record(1, prompt_digest("run the suite"))
    if reached_the_hub:
        await world.calls.delivery.deliver(key, slot="QA")
    result = await session.prompt("run the suite")
    assert (result.status, result.stop_reason) == ("completed", "end_turn")
    assert actors.prompts == [(1, "run the suite")]  # never again under epoch 2
    current = await world.placements.current("QA")
    assert current is not None and current.epoch == 2  # the slot lives on, for what follows
    assert len(world.reports()) == 1


async def test_a_holder_lost_before_its_report_is_run_again_and_its_late_report_refused(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    actors = Actors()
    session = await _session(world, monkeypatch, actors)
    result = await session.prompt("run the suite")
    assert result.status == "completed"
    assert [epoch for epoch, _ in actors.prompts] == [1, 2]  # resumed under epoch 2
    assert "[baton] This task's previous session stopped" in actors.prompts[1][1]
    late = await world.record(1, prompt_digest("run the suite"))  # the stale copy files
    answer = await world.calls.delivery.deliver(late, slot="QA")
    assert answer["error"]["code"] == "STALE_EPOCH" and world.reports() == []


# ------------------------------------------------------ a holder's relay, for real


async def _relay_holder(world: World, *, wait_s: float, url: str) -> RoleHolder:
    credential = world.hub.issue("QA")
    spec = holder_spec(
        world.dsn, "QA", "ok", world.root, parent_run="run-coordinator", lease_s=LEASE_S
    )
    profile = replace(BUILTIN, env={**BUILTIN.env, "BATON_BUILTIN_MCP_HTTP": "1"})
    holder = RoleHolder(
        replace(
            spec,
            epoch=1,
            host="w1",
            profile=profile,
            permissions="all",
            hub_url=url,
            hub_token=credential.token,
            delivery_wait_s=wait_s,
        )
    )
    await holder.start()
    return holder


RUNBOOK = "```sh\necho smoke-ok >> ../counter.log\n```\n"


async def test_a_report_filed_while_the_coordinator_is_away_is_delivered_once_it_is_back(
    world: World,
) -> None:
    holder = await _relay_holder(world, wait_s=120, url="http://127.0.0.1:9")  # nobody there
    try:
        turn = asyncio.create_task(holder.prompt(RUNBOOK))
        pending = await until(
            lambda: world.calls.of_turn("QA", 1, prompt_digest(RUNBOOK)), what="the recorded call"
        )
        assert [c.state for c in pending] == [CallState.PENDING]  # the agent's call waits
        assert not turn.done() and world.reports() == []
        url = await world.hub.start_http("127.0.0.1")  # the next coordinator's hub
        await world.store.write(lambda tx: put_hub(tx, "", url, "run-2", updated_at=utc_now()))
        result = await asyncio.wait_for(turn, 120)
        assert result.status == "completed"
        (call,) = await world.calls.of_turn("QA", 1, prompt_digest(RUNBOOK))
        assert call.state is CallState.DELIVERED and "report_id" in (call.answer or {})["result"]
        assert len(world.reports()) == 1 and world.calls.delivery.runs == 1
        assert (world.root / "ws-QA" / ".." / "counter.log").read_text() == "smoke-ok\n"
    finally:
        await holder.close()


async def test_past_the_bound_the_call_is_pending_and_the_next_coordinator_delivers_it(
    world: World,
) -> None:
    holder = await _relay_holder(world, wait_s=1, url="http://127.0.0.1:9")
    try:
        result = await asyncio.wait_for(holder.prompt(RUNBOOK), 120)
        assert result.status == "completed"  # the agent was told: pending delivery
        (call,) = await world.calls.of_turn("QA", 1, prompt_digest(RUNBOOK))
        assert call.state is CallState.PENDING and world.reports() == []
        answers = await world.calls.settle("QA", 1)  # a coordinator reads the outbox
        assert ["report_id" in a["result"] for a in answers] == [True]
        assert len(world.reports()) == 1
        # The relay still delivers in the background: the hub answers from the record.
        url = await world.hub.start_http("127.0.0.1")
        await world.store.write(lambda tx: put_hub(tx, "", url, "run-2", updated_at=utc_now()))
        relay = holder._relay
        assert relay is not None
        await until(lambda: relay.delivered >= 1, what="the relay's own delivery")
        assert world.calls.delivery.runs == 1 and len(world.reports()) == 1
    finally:
        await holder.close()
