"""``baton up`` on a cluster: the team loop's role sessions as role actors on workers.

With a ``[cluster]`` section (:mod:`.config`) the composition root opens the
PostgreSQL store and hands :func:`cluster_factory_for` to the team loop in place of
the local role-session factory: the coordinator joins the Ray cluster as a driver
(on the first session), and each role slot's session is a :class:`RemoteRoleSession`
over a role actor placed by :class:`ClusterDriver`. The role tools reach the agent
through its holder's relay (:mod:`.tool_relay`: served on the worker, each writing call
recorded in the store and delivered once to the coordinator's hub, which always serves
HTTP: on ``[cluster] hub_address``, else on loopback), with a hub credential issued for
that session (revoked when it closes; a re-placement issues a new one, so a stale copy's
calls are refused by the hub as its other acts are by the epoch). The hub accepts a call
only while the store names the call's epoch (:mod:`.delivery`), keeps its credential
table in the store under the team's project id (:func:`project_id`), and announces where
it listens (``cluster_hubs``), so a restarted coordinator re-attaches to a live role actor,
keeps accepting its agent's credential and receives the calls it recorded meanwhile; the
project id also keys the placement rows and the actors' names, so two teams can share one
cluster and its store. Each holder opens its host's composition root with the
``holder_root`` the coordinator's root hands in (the same wiring on every host:
:func:`baton.app.root.open_holder_root`).

With ``[team] isolation = "worktree"`` the factory's ``cwd`` is a task tree's working folder
as the coordinator names it; the holder gets the tree instead (:class:`.tree_copy.TreeSpec`:
its branch, head, place in the project and ``[cluster] git_remote``) and makes its own copy
of it on its host, at the same place in the project's checkout there.

:func:`holder_lookup` is what the team loop asks at start, in cluster mode: which of its
slots' holders outlived the previous coordinator (their turns are adopted, not re-run).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Final

from baton.agent_profile import AgentProfile
from baton.agents.builtin.config import MCP_HTTP_ENV
from baton.budgets.limits import Limits
from baton.cluster.actor import HolderSpec, OpenHolderRoot
from baton.cluster.config import ClusterConfig
from baton.cluster.delivery import EpochAcceptance, TurnCalls
from baton.cluster.driver import ClusterDriver, Holder, RemoteRoleSession
from baton.cluster.fencing import Placements
from baton.cluster.placement import PlacementState
from baton.cluster.tree_copy import TreeSpec
from baton.config import BatonConfig
from baton.errors import BatonError
from baton.events.sequencer import utc_now
from baton.fcop_port.workspace import inspect_workspace_kind
from baton.requests.ledger import Ledger
from baton.role_tools.binding import Binding
from baton.role_tools.credentials import SlotCredential, SlotGrant
from baton.role_tools.hub import RoleHub
from baton.runner.emitter import EventEmitter
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tool_call_sql import put_hub
from baton.team.contract import RoleSession, RoleSessionFactory
from baton.team.reconcile import HolderLookup
from baton.team_config import RoleSpec
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.repo import Repository
from baton.worktrees.states import WorktreeState

__all__ = ["ClusterSessions", "cluster_factory_for", "holder_lookup", "project_id"]

log = logging.getLogger(__name__)

LOOPBACK: Final = "127.0.0.1"
"""Where the hub listens without ``[cluster] hub_address`` (role actors on this host only)."""


class ClusterSessions:
    """What ``team.service.run_team`` calls with its hub to get the role-session factory
    (:func:`cluster_factory_for`), and what ends them when ``baton up`` stops cleanly."""

    def __init__(
        self,
        with_hub: Callable[[RoleHub | None], RoleSessionFactory],
        drivers: list[ClusterDriver],
        connect: Callable[[], ClusterDriver],
        placements: Placements,
    ) -> None:
        self._with_hub = with_hub
        self._drivers = drivers
        self._connect = connect
        self._placements = placements

    def __call__(self, hub: RoleHub | None) -> RoleSessionFactory:
        return self._with_hub(hub)

    async def aclose(self) -> None:
        """Release the holders this run never used (a previous coordinator's leftovers)."""
        placed = [p for p in await self._placements.all() if p.state is PlacementState.PLACED]
        if not placed:
            return
        driver = self._drivers[0] if self._drivers else self._connect()
        released = await driver.release_unheld()
        if released:
            log.info("released the holders no session used: %s", ", ".join(released))


def cluster_factory_for(
    cluster: ClusterConfig,
    config: BatonConfig,
    *,
    store: Store,
    ledger: Ledger,
    emitter: EventEmitter,
    workspace: Path,
    holder_root: OpenHolderRoot,
) -> ClusterSessions:
    """The role-session factory of ``baton up`` on a cluster (see the module docstring)."""

    project = project_id(workspace)
    drivers: list[ClusterDriver] = []

    def driver() -> ClusterDriver:
        if not drivers:
            drivers.append(
                ClusterDriver.connect(
                    cluster.address,
                    store,
                    emitter,
                    lease_s=cluster.lease_s,
                    ledger=ledger,
                    project=project,
                )
            )
        return drivers[0]

    def with_hub(hub: RoleHub | None) -> RoleSessionFactory:
        calls: TurnCalls | None = None
        if hub is not None:
            hub.keep_credentials(project)  # before the loop starts: no agent is served yet
            acceptance = EpochAcceptance(Placements(store, emitter, project=project))
            calls = TurnCalls(store, project, hub.serve_calls(acceptance))

        async def factory(spec: RoleSpec, binding: Binding, cwd: Path | None) -> RoleSession:
            slot = binding.session_name
            held: list[SlotCredential | SlotGrant] = []

            async def role_tools(spec: HolderSpec) -> HolderSpec:
                """``spec`` with a fresh credential (the slot's previous one stops working):
                the holder relays its agent's role tools to the hub with it."""
                if hub is None:
                    return spec
                credential = await hub.issue_kept(slot)
                held.append(credential)
                return replace(spec, hub_url=hub_url, hub_token=credential.token)

            async def release() -> None:
                if hub is not None and held:
                    await hub.revoke_kept(held[-1])

            hub_url = None
            if hub is not None:
                hub_url = await hub.start_http(cluster.hub_host or LOOPBACK, cluster.hub_port)
                await _announce(store, project, hub_url, emitter.run_id)
            tree = None if cwd is None else await _tree_spec(store, workspace, cwd, cluster)
            holder_spec = HolderSpec(
                dsn=cluster.store,
                slot=slot,
                epoch=0,
                host="",
                lease_s=cluster.lease_s,
                parent_run=emitter.run_id,
                profile=_remote_profile(config.profile(spec.agent), cluster),
                workspace=str(workspace),
                tree=tree,
                state_dir=str(config.state_dir),
                permissions=spec.permissions,
                extra={"role": spec.name},
                project=project,
                budget=replace(config.budget, per_run=Limits()),
                root=holder_root,
                delivery_wait_s=cluster.delivery_wait_s,
            )
            holder = await _reattach(driver(), hub, slot, held)
            if holder is None:
                holder_spec = await role_tools(holder_spec)
                try:
                    holder = await driver().ensure(holder_spec)
                except BaseException:
                    await release()
                    raise
            return RemoteRoleSession(
                driver(),
                holder_spec,
                holder,
                release=release,
                respec=role_tools,
                calls=calls,
            )

        return factory

    return ClusterSessions(with_hub, drivers, driver, Placements(store, emitter, project=project))


async def _tree_spec(store: Store, workspace: Path, cwd: Path, cluster: ClusterConfig) -> TreeSpec:
    """The live task tree whose working folder ``cwd`` is, as a holder on a worker needs it."""
    rows = await store.aread(lambda tx: team_sql.WORKTREES.where(tx, "", ()))
    project = workspace.resolve()
    for record in map(WorktreeRecord.from_row, rows):
        if record.state is not WorktreeState.LIVE or not cwd.is_relative_to(record.worktree):
            continue
        repo = await asyncio.to_thread(Repository.find, project)
        if repo is None or not record.worktree.is_relative_to(project):
            break
        return TreeSpec(
            task=record.root_task,
            branch=record.branch,
            head=record.head_commit or record.base_commit,
            path=record.worktree.relative_to(project).as_posix(),
            remote=cluster.git_remote or str(repo.root),
        )
    raise BatonError(f"no live task tree works in {cwd}: its role cannot be placed there")


async def _announce(store: Store, project: str, url: str, run_id: str) -> None:
    """Where this coordinator's hub listens, for holders that outlived the previous one."""
    now = utc_now()
    await store.write(lambda tx: put_hub(tx, project, url, run_id, updated_at=now))


def holder_lookup(store: Store, journal: Journal, workspace: Path) -> HolderLookup:
    """The team loop's question at start: the live holders of its slots (this team's rows)."""
    return Placements(store, journal, project=project_id(workspace)).holder_turns


def project_id(workspace: Path) -> str:
    """The team's identity on a shared cluster: its FCoP workspace id (``fcop/fcop.json``).

    Chosen over the project's path because it stays the same when the checkout moves or
    is reached under another path on the coordinator's host, and two checkouts of one
    repository are two teams only when they are two FCoP workspaces (the workspace's
    clone check refuses a copied one). :func:`held_turns_for` finds the holders by it after
    a restart.
    """
    return inspect_workspace_kind(workspace).workspace_id or ""


async def _reattach(
    driver: ClusterDriver, hub: RoleHub | None, slot: str, held: list[SlotCredential | SlotGrant]
) -> Holder | None:
    """The slot's live holder from before a restart, kept with its session and credential.

    Only when the hub still knows the slot's live credential (kept in the store): the
    holder's agent holds that one, and a new one would lock its role tools out."""
    grant = hub.live(slot) if hub is not None else None
    if hub is not None and grant is None:
        return None
    holder = await driver.attach(slot)
    if holder is not None and grant is not None:
        held.append(grant)
        log.info("slot %s: re-attached to its holder (epoch %d)", slot, holder.placement.epoch)
    return holder


def _remote_profile(profile: AgentProfile, cluster: ClusterConfig) -> AgentProfile:
    """The built-in agent speaks HTTP MCP only when told; told here (its holder's relay
    serves the role tools on the worker's loopback)."""
    if profile.family != "builtin":
        return profile
    return replace(profile, env=MappingProxyType({**profile.env, MCP_HTTP_ENV: "1"}))
