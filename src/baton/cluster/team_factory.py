"""``baton up`` on a cluster: the team loop's role sessions as role actors on workers.

With a ``[cluster]`` section (:mod:`.config`) the composition root opens the
PostgreSQL store and hands :func:`cluster_factory_for` to the team loop in place of
the local role-session factory: the coordinator joins the Ray cluster as a driver
(on the first session), and each role slot's session is a :class:`RemoteRoleSession`
over a role actor placed by :class:`ClusterDriver`. The role tools reach the agent
through the coordinator's hub, with a credential issued for that session (revoked
when it closes; a re-placement issues a new one, so a stale copy's role tools are
refused by the hub as its other acts are by the epoch). With ``[cluster] hub_address``
the hub also serves HTTP on that address and the actor hands the agent the ``http``
entry when it advertises ``mcpCapabilities.http`` (a worker on another machine);
otherwise, or for an agent without HTTP MCP, the stdio entry (the hub's unix socket:
workers that share the coordinator's filesystem only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from baton.agents.builtin.config import MCP_HTTP_ENV
from baton.cluster.actor import HolderSpec
from baton.cluster.config import ClusterConfig
from baton.cluster.driver import ClusterDriver, RemoteRoleSession
from baton.config import BatonConfig
from baton.coordination.binding import Binding
from baton.coordination.hub_auth import SlotCredential
from baton.coordination.mcp_hub import RoleHub
from baton.coordination.team import RoleSpec
from baton.providers.profile import AgentProfile
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

            def role_tools() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
                """A fresh credential (the previous one of the slot stops working), as the
                stdio entry and, with a hub address, the http entry."""
                if hub is None:
                    return [], []
                issued.append(hub.issue(slot))
                http = [hub.http_entry(issued[-1])] if cluster.hub_host is not None else []
                return [hub.stdio_entry(issued[-1])], http

            def release() -> None:
                if hub is not None and issued:
                    hub.revoke(issued[-1])

            def respec(old: HolderSpec) -> HolderSpec:
                stdio, http = role_tools()
                return replace(old, mcp_servers=stdio, mcp_http=http)

            if hub is not None and cluster.hub_host is not None:
                await hub.start_http(cluster.hub_host, cluster.hub_port)
            stdio, http = role_tools()
            holder_spec = HolderSpec(
                dsn=cluster.store,
                slot=slot,
                epoch=0,
                host="",
                lease_s=cluster.lease_s,
                parent_run=emitter.run_id,
                profile=_remote_profile(config.profile(spec.agent), cluster),
                workspace=str(workspace),
                state_dir=str(config.state_dir),
                permissions=spec.permissions,
                mcp_servers=stdio,
                mcp_http=http,
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
                respec=respec,
            )

        return factory

    return with_hub


def _remote_profile(profile: AgentProfile, cluster: ClusterConfig) -> AgentProfile:
    """The built-in agent speaks HTTP MCP only when told; told here when the hub serves
    HTTP on a cluster address (its role tools are then reachable from any worker)."""
    if profile.family != "builtin" or cluster.hub_host is None:
        return profile
    return replace(profile, env=MappingProxyType({**profile.env, MCP_HTTP_ENV: "1"}))
