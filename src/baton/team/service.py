"""``baton up`` put together: the team loop over real role sessions, with its death watch.

The one function the CLI (and later ``baton.app``) calls; everything it needs is
an argument (the project context, the config, an open store, ledger and
emitter), so tests and benches build the same thing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Literal

from baton import crashpoints
from baton.config import BatonConfig
from baton.fcop_port.project import CoordinationContext
from baton.lifeline import process_start_ticks
from baton.requests.ledger import Ledger
from baton.requests.notify import Notifier
from baton.role_tools.hub import RoleHub
from baton.runner.budget_plan import BudgetPlan, credential_for
from baton.runner.emitter import EventEmitter
from baton.store.store import Store
from baton.team.budgets import TeamBudgets
from baton.team.contract import RoleSessionFactory
from baton.team.loop import RunSummary, TeamLoop
from baton.team.reaper import Reaper
from baton.team.reconcile import HolderLookup
from baton.team.role_sessions import forget_tree_roots, role_session_factory
from baton.team_config import TeamConfig

__all__ = ["run_team"]


async def run_team(
    ctx: CoordinationContext,
    config: BatonConfig,
    *,
    store: Store,
    ledger: Ledger,
    emitter: EventEmitter,
    until_idle: bool,
    on_loop: Callable[[TeamLoop], None] | None = None,
    decorate: Callable[[RoleSessionFactory], RoleSessionFactory] | None = None,
    role_mcp: Literal["hub", "server"] = "hub",
    factory_for: Callable[[RoleHub | None], RoleSessionFactory] | None = None,
    holders: HolderLookup | None = None,
    notifier: Notifier | None = None,
    budget: BudgetPlan | None = None,
) -> RunSummary:
    """Run the team until idle (or until ``loop.stop()``); the reaper and the hub end with it.

    ``role_mcp``: ``hub`` serves every slot's role tools from this process
    (:class:`RoleHub`); ``server`` starts the per-slot role MCP server of before
    (kept to measure against, ``benches/slots.py``). ``factory_for`` builds the
    role-session factory from the hub instead (cluster mode: role actors on workers), and
    ``holders`` says which of their holders outlived a previous coordinator. ``notifier``
    announces every new request for the human (``[notify]``); each agent request waits
    ``[team] answer_timeout`` seconds, then is refused so the turn goes on. ``budget``:
    the sessions' budgets and usage ledger (the team parks TASKs at their limits).
    """
    if crashpoints.install_from_env():
        os.environ.setdefault("BATON_CRASH_DAEMON", str(os.getpid()))
    hub = None
    if role_mcp == "hub" and not ctx.team.fcop_mcp.enabled:
        hub = await RoleHub.start(store, ctx.state_dir)
    reaper = await Reaper.start(store.path, hub.socket_path if hub is not None else None)
    try:
        factory = (
            factory_for(hub)
            if factory_for is not None
            else role_session_factory(
                config,
                workspace=ctx.project_dir,
                store=store,
                ledger=ledger,
                emitter=emitter,
                fcop_mcp=ctx.team.fcop_mcp,
                mcp_env={
                    **{k: v for k, v in os.environ.items() if k in crashpoints.ENV},
                    "BATON_DAEMON_PID": str(os.getpid()),
                    "BATON_DAEMON_START": str(process_start_ticks(os.getpid()) or ""),
                },
                hub=hub,
                wait_timeout=ctx.team.answer_timeout,
                notifier=notifier,
                budget=budget,
            )
        )
        loop = TeamLoop(
            port=ctx.port,
            team=ctx.team,
            factory=decorate(factory) if decorate is not None else factory,
            store=store,
            journal=emitter,
            run_id=emitter.run_id,
            ledger=ledger,
            state_dir=ctx.state_dir,
            watch_group=reaper.watch,
            holders=holders,
            notifier=notifier,
            budgets=team_budgets(config, ctx.team, emitter.run_id, budget),
        )
        if factory_for is None:  # role sessions here: their private roots go with a tree
            loop.workspaces.on_removed = partial(
                forget_tree_roots, store, config.state_dir, ctx.project_dir
            )
        if on_loop is not None:
            on_loop(loop)
        return await loop.run(until_idle=until_idle)
    finally:
        if hub is not None:
            await hub.aclose()
        await reaper.close()


def team_budgets(
    config: BatonConfig, team: TeamConfig, run_id: str, plan: BudgetPlan | None
) -> TeamBudgets:
    """The team's budgets: ``plan``'s limits (or ``[budget]``), each role's window key."""
    budget = plan.config if plan is not None else config.budget
    credentials = {}
    for name, spec in team.roles.items():
        if spec.agent in config.profiles:  # an unknown one fails its slot, with its message
            profile = config.profile(spec.agent)
            credentials[name] = credential_for(profile, os.environ, config.secrets_file)
    return TeamBudgets(budget, run_id, credentials)
