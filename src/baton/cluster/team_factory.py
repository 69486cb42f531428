"""``baton up`` on a cluster: the team loop's role sessions as role actors on workers.

With a ``[cluster]`` section (:mod:`.config`) the composition root opens the
PostgreSQL store and hands :func:`cluster_factory_for` to the team loop in place of
the local role-session factory: the coordinator joins the Ray cluster as a driver
(on the first session), and each role slot's session is a :class:`RemoteRoleSession`
over a role actor placed by :class:`ClusterDriver`. The role tools reach the agent
through the coordinator's hub, with a credential issued for that session (revoked
when it closes; a re-placement issues a new one, so a stale copy's role tools are
refused by the hub as its other acts are by the epoch). The hub serves its unix socket and loopback HTTP only today, so
role tools reach agents on the coordinator's own machine; a worker on another host
needs the hub's HTTP front on a cluster address (see ``docs/cluster.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from baton.cluster.actor import HolderSpec
from baton.cluster.config import ClusterConfig
from baton.cluster.driver import ClusterDriver, RemoteRoleSession
from baton.config import BatonConfig
from baton.coordination.binding import Binding
from baton.coordination.hub_auth import SlotCredential
from baton.coordination.mcp_hub import RoleHub
from baton.coordination.team import RoleSpec
from baton.requests.ledger import Ledger
from baton.runner.emitter import EventEmitter
from baton.team.contract import RoleSession, RoleSessionFactory

__all__ = ["cluster_factory_for"]


def cluster_factory_for(
    cluster: ClusterConfig,
    config: BatonConfig,
    *,
    store: Any,
    ledger: Ledger,
    emitter: EventEmitter,
    workspace: Path,
) -> Callable[[RoleHub | None], RoleSessionFactory]:
    """What ``team.service.run_team`` calls with its hub to get the role-session factory."""

    def with_hub(hub: RoleHub | None) -> RoleSessionFactory:
        drivers: list[ClusterDriver] = []

        def driver() -> ClusterDriver:
            if not drivers:
                drivers.append(
                    ClusterDriver.connect(
                        cluster.address, store, emitter, lease_s=cluster.lease_s, ledger=ledger
                    )
                )
            return drivers[0]

        async def factory(spec: RoleSpec, binding: Binding) -> RoleSession:
            slot = binding.session_name
            issued: list[SlotCredential] = []

            def role_tools() -> list[dict[str, Any]]:
                """A fresh credential (the previous one of the slot stops working)."""
                if hub is None:
                    return []
                issued.append(hub.issue(slot))
                return [hub.stdio_entry(issued[-1])]

            def release() -> None:
                if hub is not None and issued:
                    hub.revoke(issued[-1])

            holder_spec = HolderSpec(
                dsn=cluster.store,
                slot=slot,
                epoch=0,
                host="",
                lease_s=cluster.lease_s,
                parent_run=emitter.run_id,
                profile=config.profile(spec.agent),
                workspace=str(workspace),
                state_dir=str(config.state_dir),
                permissions=spec.permissions,
                mcp_servers=role_tools(),
                extra={"role": spec.name},
            )
            try:
                holder = await driver().ensure(holder_spec)
            except BaseException:
                release()
                raise
            return RemoteRoleSession(
                driver(),
                holder_spec,
                holder,
                release=release,
                respec=lambda old: replace(old, mcp_servers=role_tools()),
            )

        return factory

    return with_hub
