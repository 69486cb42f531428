"""An actor that dies while it starts is placed again, on another host (no Ray needed).

Seen in the multi-host tier under load: the coordinator placed a slot on w1, w1's node
was declared dead (missed heartbeats) before the actor ran, ``start`` raised
``ActorDiedError`` and the coordinator crashed. Now the placement fails and the slot is
placed again, avoiding the host it died on. Ray is replaced by a stand-in module: the
driver's decisions and the store (PostgreSQL) are real.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from baton.cluster import driver as driver_module
from baton.cluster.driver import ClusterDriver
from baton.cluster.fencing import Placements
from baton.cluster.names import host_resource
from baton.cluster.placement import PlacementState
from tests.cluster.support import coordinator_run, holder_spec
from tests.support.pg_fixtures import pg_databases, pg_dsn

__all__ = ["pg_databases", "pg_dsn"]


class ActorDied(Exception):
    """Ray's ``ActorDiedError`` stand-in (a ``RayActorError``)."""


def _fake_ray() -> types.ModuleType:
    ray = types.ModuleType("ray")
    ray.exceptions = types.SimpleNamespace(  # type: ignore[attr-defined]
        RayActorError=ActorDied, ActorUnavailableError=type("Unavailable", (Exception,), {})
    )
    ray.kill = lambda handle, no_restart=True: None  # type: ignore[attr-defined]
    return ray


class FakeActorClass:
    """``role_actor_class()``: the first actor dies as it starts, later ones start."""

    def __init__(self) -> None:
        self.started_on: list[str] = []

    def options(self, *, resources: dict[str, float], **_: Any) -> FakeActorClass:
        [self.host] = [h for h in ("w1", "w2") if host_resource(h) in resources]
        return self

    def remote(self, spec: Any) -> Any:
        host = self.host

        async def start() -> dict[str, str]:
            self.started_on.append(host)
            if len(self.started_on) == 1:
                raise ActorDied("the actor's node was terminated unexpectedly")
            return {"host": host}

        return types.SimpleNamespace(start=types.SimpleNamespace(remote=start))


async def test_an_actor_dying_as_it_starts_is_placed_again_elsewhere(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton.store.pg import PgStore

    store = PgStore.open(pg_dsn)
    try:
        placements = Placements(store, coordinator_run(store))
        alive = {"Alive": True}
        nodes = [{**alive, "Resources": {host_resource(h): 1.0}} for h in ("w1", "w2")]
        actors = FakeActorClass()
        monkeypatch.setitem(sys.modules, "ray", _fake_ray())
        monkeypatch.setattr(driver_module, "role_actor_class", lambda: actors)
        cluster = ClusterDriver(placements, lease_s=30.0, nodes=lambda: nodes)
        spec = holder_spec(pg_dsn, "qa", "ok", tmp_path, parent_run="run-coordinator", lease_s=30)
        holder = await cluster.ensure(spec)
        died_on, started_on = actors.started_on
        assert started_on != died_on, "placed again, on the other host"
        assert holder.placement.host == started_on and holder.info == {"host": started_on}
        current = await placements.current("qa")
        assert current is not None and current.state is PlacementState.PLACED
        assert current.host == started_on and current.epoch == 2
        assert cluster.holders == {"qa": holder}
    finally:
        store.close()
