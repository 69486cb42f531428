"""A role actor on a real Ray cluster on this machine (issue 16 item 2).

A head and one ``baton worker`` (each its own PID namespace, torn down by the
test), PostgreSQL as the store, the repository's fake ACP agent as the role's
agent inside the actor. One flow, in order:

* the driver places slot ``dev`` on worker ``w1`` (epoch 1) and dispatches a
  turn; the agent asks permission; the request is answered *from the store's
  side* (a ledger in this process) and reaches the agent through the actor; the
  turn completes and its events are in PostgreSQL, in the holder's own run;
* a new driver (another process) re-attaches by name: same actor, same agent;
* the store moves ``dev`` on (epoch 2) behind the holder's back: the stale
  holder's next side effect (the agent's permission request) is refused,
  recorded as ``cluster.fenced_out``, never reaches the ledger, and the agent is
  stopped; slot ``ops`` (the ``fs`` scenario) fenced the same way writes no file.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.local_ray import LocalRay
from tests.cluster.support import coordinator_run, holder_spec, until
from tests.support.pg_fixtures import pg_databases, pg_dsn

__all__ = ["pg_databases", "pg_dsn"]

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

LEASE_S = 20.0
REATTACH = Path(__file__).with_name("reattach.py")


def _types(store: object, run_id: str) -> list[str]:
    return [e.type for e in store.iter_events(run_id)]  # type: ignore[attr-defined]


async def test_a_role_actor_serves_answers_reattaches_and_is_fenced(
    local_cluster: LocalRay, pg_dsn: str, tmp_path: Path
) -> None:
    import ray

    from baton.cluster.driver import ClusterDriver, RemoteRoleSession
    from baton.cluster.placement import FencedOut
    from baton.request_model.documents import PermissionAnswer
    from baton.requests.ledger import Ledger
    from baton.store.pg import PgStore

    store = PgStore.open(pg_dsn)
    ledger = Ledger(store)  # type: ignore[arg-type]  # the Store face, on PostgreSQL
    try:
        emitter = coordinator_run(store)
        driver = ClusterDriver.connect(local_cluster.address, store, emitter, lease_s=LEASE_S)
        await until(
            lambda: any(h.name == "w1" and h.alive for h in driver.hosts(["dev"])),
            what="worker w1 joined",
        )
        spec = holder_spec(
            pg_dsn, "dev", "permission", tmp_path, parent_run=emitter.run_id, lease_s=LEASE_S
        )
        holder = await driver.ensure(spec)
        assert (holder.placement.host, holder.placement.epoch) == ("w1", 1)
        run_id = holder.info["run_id"]
        session = RemoteRoleSession(driver, spec, holder)

        # 1. A turn; the permission is answered from the store's side.
        turn = asyncio.create_task(session.prompt("run the tests"))
        pending = await until(lambda: ledger.pending(run_id=run_id), what="the agent's request")
        assert [r.kind for r in pending] == ["permission"]
        await ledger.answer(
            pending[0].request_id, PermissionAnswer(decision="allow"), decided_by="human"
        )
        result = await asyncio.wait_for(turn, 120)
        assert result.status == "completed", result
        types = _types(store, run_id)
        for wanted in ("session.started", "request.created", "request.answered", "turn.completed"):
            assert wanted in types, (wanted, types)
        tool_updates = [
            e.payload
            for e in store.iter_events(run_id)
            if e.type.startswith("tool.") and "allow-once" in json.dumps(e.payload.model_dump())
        ]
        assert tool_updates, "the agent must have received the answer (it reports the option)"

        # 2. A new driver re-attaches by name: the same actor and agent.
        done = subprocess.run(
            [sys.executable, str(REATTACH), local_cluster.address, pg_dsn, "dev"],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        assert done.returncode == 0 and lines, done.stderr[-3000:]
        again = json.loads(lines[-1])
        assert again["attached"] is True
        assert (again["actor_pid"], again["agent_pid"], again["epoch"]) == (
            holder.info["actor_pid"],
            holder.info["agent_pid"],
            1,
        )
        assert again["agent_alive"] is True

        # 3. The slot moves on behind the holder: its next side effect is refused.
        await driver.placements.fail("dev")
        newer = await driver.placements.place("dev", "w1", lease_s=LEASE_S)
        assert newer.epoch == 2
        with pytest.raises(ray.exceptions.RayTaskError) as refused:
            await asyncio.wait_for(holder.handle.prompt.remote("run them again"), 120)
        assert isinstance(refused.value.as_instanceof_cause(), FencedOut) or "FencedOut" in str(
            refused.value
        )
        fenced = [e.payload for e in store.iter_events(run_id) if e.type == "cluster.fenced_out"]
        assert [(f.epoch, f.act) for f in fenced] == [(1, "request session/request_permission")]
        assert len(await ledger.list_requests(run_id=run_id)) == 1, "the refused ask never filed"
        info = await holder.handle.info.remote()
        assert info["agent_alive"] is False and info["stopped"].startswith("fenced out")

        # 4. An fs write by a stale holder: refused before the client writes anything.
        ops_spec = holder_spec(
            pg_dsn, "ops", "fs", tmp_path, parent_run=emitter.run_id, lease_s=LEASE_S
        )
        ops = await driver.ensure(ops_spec)
        await driver.placements.fail("ops")
        await driver.placements.place("ops", "w1", lease_s=LEASE_S)
        with pytest.raises(ray.exceptions.RayTaskError):
            await asyncio.wait_for(ops.handle.prompt.remote("write it"), 120)
        assert not (Path(ops_spec.workspace) / "fake-fs.txt").exists()
        ops_fenced = [
            e.payload
            for e in store.iter_events(ops.info["run_id"])
            if e.type == "cluster.fenced_out"
        ]
        assert [f.act for f in ops_fenced] == ["request fs/write_text_file"]
        for slot in ("dev", "ops"):
            await driver.release(slot)
    finally:
        ray.shutdown()
        await ledger.aclose()
        await store.aclose()
