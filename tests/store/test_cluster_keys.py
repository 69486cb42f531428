"""What a restarted coordinator and a second team find in a shared cluster store, on both
backends: placement rows keyed by (project, slot), and the hub's slot credentials kept as
digests so a new hub accepts a live holder's credential and still refuses a retired one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from baton.cluster.fencing import Placements
from baton.cluster.placement import FencedOut
from baton.events.model import TurnSubmitted
from baton.events.sequencer import Sequencer
from baton.role_tools.credentials import Refusal, SlotGrant
from baton.role_tools.hub import RoleHub
from baton.runner.emitter import EventEmitter
from baton.store.schema import CLUSTER_MIGRATIONS, STORE_MIGRATIONS
from baton.store.sqlite import SqliteStore, apply_migrations
from baton.team.reconcile import HolderTurn

from .conftest import StoreFactory, run_record

LEASE_S = 600.0


@pytest.fixture
async def stores(open_cluster_store: StoreFactory) -> AsyncIterator[list[Any]]:
    """Three writers on one store (two coordinators of two teams, or one restarted)."""
    opened: list[Any] = []
    try:
        for i in range(3):
            store = open_cluster_store()
            store.create_run(run_record(f"run-{i}"))
            opened.append(store)
        yield opened
    finally:
        for store in opened:
            store.close()


def _placements(store: Any, project: str, run: str) -> Placements:
    return Placements(store, EventEmitter(Sequencer(run), store), project=project)


def _nothing(tx: object) -> str:
    return "acted"


async def test_two_teams_slots_of_one_name_have_their_own_rows(stores: list[Any]) -> None:
    a = _placements(stores[0], "ws-a", "run-0")
    b = _placements(stores[1], "ws-b", "run-1")
    first = await a.place("dev", "w1", lease_s=LEASE_S)
    other = await b.place("dev", "w2", lease_s=LEASE_S)  # old key: refused as a live row
    assert (first.epoch, first.host, other.epoch, other.host) == (1, "w1", 1, "w2")
    await b.fail("dev")
    await b.place("dev", "w3", lease_s=LEASE_S)
    # Team B's moves never fence team A's holder, and A reads its own row only.
    assert await a.fenced("dev", 1, _nothing) == "acted"
    assert [(p.slot, p.host, p.epoch) for p in await a.all()] == [("dev", "w1", 1)]
    assert [(p.host, p.epoch) for p in await b.all()] == [("w3", 2)]
    with pytest.raises(FencedOut):
        await b.fenced("dev", 1, _nothing)


def test_placement_rows_of_before_are_kept_under_no_project(tmp_path: Path) -> None:
    """A store placed by the baton before: its rows carry project '' (the default)."""
    path = tmp_path / "baton.db"
    later = {"cluster.0002_placements_by_project", "cluster.0003_credentials"}
    conn = sqlite3.connect(path, isolation_level=None)
    steps = (*STORE_MIGRATIONS, *CLUSTER_MIGRATIONS)
    apply_migrations(conn, [m for m in steps if m.name not in later])
    conn.execute("INSERT INTO cluster_placements VALUES ('dev', 'w1', 3, 'placed', 1e12, 'then')")
    conn.close()
    store = SqliteStore.open(path, extra_migrations=CLUSTER_MIGRATIONS)
    try:
        rows = store.read_tx(
            lambda tx: tx.all("SELECT project, slot, host, epoch FROM cluster_placements")
        )
        assert [tuple(r) for r in rows] == [("", "dev", "w1", 3)]
    finally:
        store.close()


def _hub(store: Any, tmp: Path, project: str) -> RoleHub:
    hub = RoleHub(store, tmp)  # not listening: the credential table is what is tested
    hub.keep_credentials(project)
    return hub


async def test_a_new_hub_accepts_the_live_credential_and_refuses_a_retired_one(
    stores: list[Any], tmp_path: Path
) -> None:
    old = _hub(stores[0], tmp_path, "ws-a")
    replaced = await old.issue_kept("QA")
    live = await old.issue_kept("QA")  # the slot's session was re-placed
    dev = await old.issue_kept("DEV")
    # The coordinator is gone (nothing closed); its successor opens the store anew.
    new = _hub(stores[1], tmp_path, "ws-a")
    assert new.credentials.check("QA", live.token) == SlotGrant("QA", live.generation)
    assert new.credentials.check("DEV", dev.token) == SlotGrant("DEV", dev.generation)
    refused = new.credentials.check("QA", replaced.token)
    assert isinstance(refused, Refusal) and refused.code == "CREDENTIAL_REPLACED"
    wrong = new.credentials.check("DEV", live.token)
    assert isinstance(wrong, Refusal) and wrong.code == "CREDENTIAL_REFUSED"
    # Another team on the same store knows none of them.
    other = _hub(stores[2], tmp_path, "ws-b")
    unknown = other.credentials.check("QA", live.token)
    assert isinstance(unknown, Refusal) and unknown.code == "UNKNOWN_SLOT"
    # The holder's session ends under the new hub: revoked, and refused after yet another.
    assert new.live("QA") == SlotGrant("QA", live.generation)
    await new.revoke_kept(live)
    third = _hub(stores[2], tmp_path, "ws-a")
    after = third.credentials.check("QA", live.token)
    assert isinstance(after, Refusal) and after.code == "CREDENTIAL_REPLACED"
    assert third.live("QA") is None
    fresh = await third.issue_kept("QA")
    assert fresh.generation > dev.generation, "generations go on across coordinators"


async def test_only_digests_are_stored(stores: list[Any], tmp_path: Path) -> None:
    hub = _hub(stores[0], tmp_path, "ws-a")
    credential = await hub.issue_kept("QA")
    rows = stores[0].read_tx(lambda tx: tx.all("SELECT * FROM cluster_credentials"))
    text = repr([tuple(r) for r in rows])
    assert credential.token not in text and credential.token[5:] not in text
    assert len(rows) == 1


async def test_a_restarted_coordinator_is_told_its_holders_turns(stores: list[Any]) -> None:
    """``Placements.holder_turns`` (the team loop's ``HolderLookup``): per slot, the live
    holder's last prompt digest, whether that turn ended, and whether its lease is live;
    a slot of another team, or without a running holder, is absent."""
    store = stores[0]
    now = [1_000.0]
    team = Placements(
        store, EventEmitter(Sequencer("run-0"), store), project="ws-a", clock=lambda: now[0]
    )
    placed = await team.place("dev", "w1", lease_s=30.0)
    await team.place("qa", "w1", lease_s=30.0)  # placed, but no holder run ever started
    holder = f"run-0.dev.e{placed.epoch}"
    meta = {"slot": "dev", "epoch": placed.epoch, "project": "ws-a"}
    store.create_run(run_record(holder, kind="role-holder", meta=meta))
    submitted = TurnSubmitted(prompt_preview="go", prompt_bytes=2, prompt_sha256="d1")
    await store.write(
        lambda tx: None,
        events=[Sequencer(holder).stamp(submitted, session_id="s", turn_id="t1")],
    )
    assert await team.holder_turns(["dev", "qa", "ops"]) == {
        "dev": HolderTurn("d1", ended=False, lease_live=True)
    }
    other = Placements(store, EventEmitter(Sequencer("run-1"), stores[1]), project="ws-b")
    assert await other.holder_turns(["dev"]) == {}
    now[0] += 31.0  # the holder stopped renewing: its lease ran out
    assert await team.holder_turns(["dev"]) == {
        "dev": HolderTurn("d1", ended=False, lease_live=False)
    }
    store.finish_run(holder, "completed", "later")
    assert await team.holder_turns(["dev"]) == {}
