"""The role actor's logic without Ray: a :class:`RoleHolder` over PostgreSQL and the
real fake agent process (runs wherever PostgreSQL does, CI included).

The holder is what Ray hosts; everything it decides is here: the permission
request filed in the ledger and answered from the store's side, the epoch checked
before the agent's requests and the client's answers, the refusal recorded and
the agent stopped, the report refused to a stale holder, the lease renewed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from baton.cluster.actor import RoleHolder
from baton.cluster.fencing import Placements
from baton.cluster.placement import FencedOut
from baton.request_model.documents import PermissionAnswer
from baton.requests.ledger import Ledger
from baton.runner.emitter import EventEmitter
from baton.team.reconcile import HolderTurn
from tests.cluster.support import coordinator_run, holder_spec, until
from tests.support.pg_fixtures import pg_databases, pg_dsn

__all__ = ["pg_databases", "pg_dsn"]

LEASE_S = 30.0


class World:
    def __init__(self, dsn: str, root: Path) -> None:
        from baton.store.pg import PgStore

        self.dsn, self.root = dsn, root
        self.store = PgStore.open(dsn)
        self.ledger = Ledger(self.store)
        self.emitter: EventEmitter = coordinator_run(self.store)
        self.placements = Placements(self.store, self.emitter)
        self.holders: list[RoleHolder] = []

    async def holder(self, slot: str, scenario: str, *, lease_s: float = LEASE_S) -> RoleHolder:
        placed = await self.placements.place(slot, "local", lease_s=lease_s)
        spec = holder_spec(
            self.dsn, slot, scenario, self.root, parent_run=self.emitter.run_id, lease_s=lease_s
        )
        holder = RoleHolder(replace(spec, epoch=placed.epoch, host="local"))
        self.holders.append(holder)
        await holder.start()
        return holder

    async def move_on(self, slot: str) -> None:
        """A coordinator's decision the holder does not know of: the slot moves on."""
        await self.placements.fail(slot)
        await self.placements.place(slot, "elsewhere", lease_s=LEASE_S)

    def events(self, run_id: str) -> list[Any]:
        return list(self.store.iter_events(run_id))

    def agent_told(self, run_id: str) -> bool:
        """The agent reported the option it was given (a tool update naming it)."""
        return any(
            e.type.startswith("tool.") and "allow-once" in json.dumps(e.payload.model_dump())
            for e in self.events(run_id)
        )


@pytest.fixture
async def world(pg_dsn: str, tmp_path: Path) -> AsyncIterator[World]:
    w = World(pg_dsn, tmp_path)
    try:
        yield w
    finally:
        for holder in w.holders:
            await holder.close()
        await w.ledger.aclose()
        await w.store.aclose()


async def test_a_permission_answered_in_the_store_reaches_the_agent(world: World) -> None:
    holder = await world.holder("dev", "permission")
    turn = asyncio.create_task(holder.prompt("go"))
    pending = await until(lambda: world.ledger.pending(run_id=holder.run_id), timeout=60)
    await world.ledger.answer(
        pending[0].request_id, PermissionAnswer(decision="allow"), decided_by="human"
    )
    result = await asyncio.wait_for(turn, 60)
    assert result.status == "completed"
    assert world.agent_told(holder.run_id)
    info = await holder.info()
    assert info["fenced_checks"] >= 2  # the agent's ask and the client's answer, at least
    assert info["renewals"] == 0 and info["stopped"] is None


async def test_a_stale_holder_is_refused_its_agents_request(world: World) -> None:
    holder = await world.holder("dev", "permission")
    await world.move_on("dev")
    with pytest.raises(FencedOut):
        await asyncio.wait_for(holder.prompt("go"), 60)
    fenced = [e.payload for e in world.events(holder.run_id) if e.type == "cluster.fenced_out"]
    assert [(f.epoch, f.act) for f in fenced] == [(1, "request session/request_permission")]
    assert "stale" in fenced[0].reason
    assert await world.ledger.list_requests(run_id=holder.run_id) == []
    info = await holder.info()
    assert info["agent_alive"] is False and info["stopped"].startswith("fenced out")


async def test_a_stale_holder_writes_no_file(world: World) -> None:
    holder = await world.holder("ops", "fs")
    await world.move_on("ops")
    with pytest.raises(FencedOut):
        await asyncio.wait_for(holder.prompt("write it"), 60)
    assert not (Path(holder.spec.workspace) / "fake-fs.txt").exists()


async def test_an_answer_is_refused_once_the_slot_moved_during_the_ask(world: World) -> None:
    holder = await world.holder("dev", "permission")
    turn = asyncio.create_task(holder.prompt("go"))
    pending = await until(lambda: world.ledger.pending(run_id=holder.run_id), timeout=60)
    await world.move_on("dev")  # while a human is being asked
    await world.ledger.answer(
        pending[0].request_id, PermissionAnswer(decision="allow"), decided_by="human"
    )
    with pytest.raises(FencedOut):
        await asyncio.wait_for(turn, 60)
    fenced = [e.payload for e in world.events(holder.run_id) if e.type == "cluster.fenced_out"]
    assert [f.act.split()[0] for f in fenced] == ["answer"], fenced
    assert not world.agent_told(holder.run_id), "the answer never reached the agent"


async def test_the_report_of_a_turn_is_refused_to_a_stale_holder(world: World) -> None:
    holder = await world.holder("dev", "ok")  # a turn without any request
    first = await holder.prompt("one")
    assert first.status == "completed"
    await world.move_on("dev")
    with pytest.raises(FencedOut, match="stale"):
        await holder.prompt("two")
    fenced = [e.payload for e in world.events(holder.run_id) if e.type == "cluster.fenced_out"]
    assert [f.act for f in fenced] == ["report"]


async def test_the_holder_renews_its_lease(world: World) -> None:
    holder = await world.holder("dev", "ok", lease_s=1.5)
    before = await world.placements.current("dev")
    assert before is not None
    await until(lambda: holder._keeper is not None and holder._keeper.renewals >= 2, timeout=30)
    after = await world.placements.current("dev")
    assert after is not None and after.epoch == before.epoch
    assert after.lease_expires_at > before.lease_expires_at
    assert (await holder.info())["stopped"] is None


async def test_a_turn_whose_driver_died_is_handed_to_the_next_driver_once(world: World) -> None:
    """The coordinator dies while a turn waits on a human; the turn goes on in the holder.
    A new coordinator asking for the same prompt gets that turn's result: it ran once."""
    holder = await world.holder("dev", "permission")
    lost = asyncio.create_task(holder.prompt("go", "run-first"))
    pending = await until(lambda: world.ledger.pending(run_id=holder.run_id), timeout=60)
    lost.cancel()  # the driver's call is gone with its driver
    again = asyncio.create_task(holder.prompt("go", "run-second"))  # the new one re-dispatches
    await world.ledger.answer(
        pending[0].request_id, PermissionAnswer(decision="allow"), decided_by="human"
    )
    result = await asyncio.wait_for(again, 60)
    assert result.status == "completed"
    types = [e.type for e in world.events(holder.run_id)]
    assert types.count("turn.completed") == 1, types
    assert types.count("request.created") == 1, "the agent was asked once, not twice"
    assert (await holder.info())["turn"] == "done"


async def test_a_restarted_driver_adopts_the_turn_by_its_prompts_digest(world: World) -> None:
    """A new coordinator knows only the digest its turn row kept; the store tells it the
    holder has that turn (its own events), and the holder hands the result over once."""
    from baton.store.placement_sql import placed_holder
    from baton.team.reconcile import prompt_digest

    holder = await world.holder("dev", "permission")
    lost = asyncio.create_task(holder.prompt("go", "run-first"))
    pending = await until(lambda: world.ledger.pending(run_id=holder.run_id), timeout=60)
    lost.cancel()
    marks = await until(
        lambda: world.store.read_tx(lambda tx: placed_holder(tx, "", "dev")), timeout=30
    )
    assert marks is not None
    assert (marks.run_id, marks.prompt_sha256, marks.ended) == (
        holder.run_id,
        prompt_digest("go"),
        False,
    )
    assert world.store.read_tx(lambda tx: placed_holder(tx, "another-team", "dev")) is None
    # What a restarted coordinator's team loop is told (its HolderLookup), slot by slot.
    assert await world.placements.holder_turns(["dev", "qa"]) == {
        "dev": HolderTurn(prompt_digest("go"), ended=False, lease_live=True)
    }
    assert await holder.adopt(prompt_digest("another prompt"), "run-second") is None
    adopted = asyncio.create_task(holder.adopt(prompt_digest("go"), "run-second"))
    await world.ledger.answer(
        pending[0].request_id, PermissionAnswer(decision="allow"), decided_by="human"
    )
    result = await asyncio.wait_for(adopted, 60)
    assert result is not None and result.status == "completed"
    assert await holder.adopt(prompt_digest("go"), "run-second") is None, "taken once"
    types = [e.type for e in world.events(holder.run_id)]
    assert types.count("turn.submitted") == 1 and types.count("turn.completed") == 1, types
    await holder.close()
    assert world.store.read_tx(lambda tx: placed_holder(tx, "", "dev")) is None
    assert await world.placements.holder_turns(["dev"]) == {}
    finished = world.store.get_run(holder.run_id)
    assert finished is not None and finished.status == "completed"


async def test_a_holder_refused_at_start_fails_its_run_and_keeps_nothing_open(
    world: World,
) -> None:
    """Its epoch is stale before it starts (the slot moved on): its host's root closes
    again, its run ends ``failed`` and nothing of the slot is released by it."""
    placed = await world.placements.place("qa", "local", lease_s=LEASE_S)
    await world.move_on("qa")
    spec = holder_spec(
        world.dsn, "qa", "permission", world.root, parent_run=world.emitter.run_id, lease_s=LEASE_S
    )
    holder = RoleHolder(replace(spec, epoch=placed.epoch, host="local"))
    with pytest.raises(FencedOut):
        await holder.start()
    run = world.store.get_run(holder.run_id)
    assert run is not None and (run.status, run.meta["slot"], run.meta["epoch"]) == (
        "failed",
        "qa",
        placed.epoch,
    )
    current = await world.placements.current("qa")
    assert current is not None and (current.host, current.epoch) == ("elsewhere", placed.epoch + 1)
    assert (await holder.info())["stopped"] == "its start failed"
    await holder.close()  # idempotent


async def test_a_turn_asked_while_the_holder_starts_waits_for_the_start(world: World) -> None:
    """Issue 30 item 5: a coordinator killed while its roles were starting; the next one
    re-attached and prompted a holder still starting, and the turn failed ("the holder has
    not started"). Now a second start() waits for the first, and a turn waits for both."""
    placed = await world.placements.place("dev", "local", lease_s=LEASE_S)
    spec = holder_spec(
        world.dsn, "dev", "ok", world.root, parent_run=world.emitter.run_id, lease_s=LEASE_S
    )
    holder = RoleHolder(replace(spec, epoch=placed.epoch, host="local"))
    world.holders.append(holder)
    first = asyncio.create_task(holder.start())  # the coordinator that died
    turn = asyncio.create_task(holder.prompt("go", "run-second"))  # the next one's prompt
    again = await asyncio.wait_for(holder.start(), 120)  # the next one's re-attachment
    assert again["agent_alive"] is True and (await first)["agent_pid"] == again["agent_pid"]
    result = await asyncio.wait_for(turn, 60)
    assert result.status == "completed"
    types = [e.type for e in world.events(holder.run_id)]
    assert types.count("session.started") == 1 and types.count("turn.completed") == 1, types


async def test_a_closed_holder_leaves_no_folder_of_its_own(world: World) -> None:
    """Issue 30 item 5: role actors left baton-gate-* folders in the temp dir (138)."""
    holder = await world.holder("dev", "ok")
    assert holder._push_gate is not None and holder._push_gate.gate is not None
    folder = holder._push_gate.gate.directory
    assert folder.is_dir()
    await holder.close()
    assert not folder.exists()
