"""The composition root: one project's store, ledger, recovery, brokers, runs and sessions.

``Baton.open(project)`` loads the project's configuration, opens its store with every
migration (:mod:`.recovery`), the requests ledger over it, and recovers what a crashed
baton left behind, before anything else may read or answer. Everything a surface does is
then built from the root, never wired by hand:

* :meth:`Baton.run` records a run (with its owner, for recovery) and yields its
  :class:`Run`: the run id and the emitter that stamps its events; the run is finished
  with the status the caller set, ``failed`` if it left with an error;
* :meth:`Baton.broker` is a request broker under a policy (with ``[notify]``);
* :meth:`Baton.open_session` starts an agent session in a run (the project's state dir,
  secrets file and environment filled in); sessions still open at close are closed;
* :meth:`Baton.run_team` runs the team loop (:mod:`baton.team`) in a run, its role
  sessions, reviews and questions on this root's store, ledger and emitter.

:meth:`Baton.on_store` is the same root over a store already open: a role holder's host
(a Ray actor on a worker, :class:`baton.cluster.actor.RoleHolder`) builds its root so,
:func:`open_holder_root` (its run, broker and agent session by :meth:`Baton.run`,
:meth:`Baton.broker`, :meth:`Baton.open_session`): one place wires sessions on every host.
The coordinator's root hands it to the cluster (``HolderSpec.root``); Ray ships it by
reference. The store is opened by :mod:`.recovery` (SQLite, or the cluster's PostgreSQL).

Closing the root (leaving the ``async with``) closes what it opened, in reverse order.

Length: the composition root; every part a surface uses is wired here, once.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.agent_profile import AgentProfile
from baton.app.configuration import check_config
from baton.app.recovery import (
    open_cluster_store,
    open_project_store,
    owner_meta,
    recover_interrupted,
)
from baton.budgets.limits import Limits
from baton.config import BatonConfig, load_config
from baton.errors import UsageError
from baton.events.model import CanonicalEvent, Payload
from baton.events.sequencer import Sequencer, format_ts
from baton.providers.catalog import BUILTIN_PROFILES
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.notify import Notifier, NotifyConfig, Report
from baton.requests.policy import Policy
from baton.runner.budget_plan import BudgetPlan, project_plan
from baton.runner.emitter import EventEmitter
from baton.runner.requests_broker import HumanChannel, RequestBroker
from baton.runner.session import AgentSession
from baton.store.records import RunRecord, RunStatus
from baton.store.store import Store

if TYPE_CHECKING:
    from baton.cluster.actor import HolderRoot, HolderSpec
    from baton.cluster.config import ClusterConfig
    from baton.fcop_port.project import CoordinationContext
    from baton.team.contract import RoleSessionFactory
    from baton.team.loop import RunSummary, TeamLoop

__all__ = ["Baton", "Run", "new_run_id", "open_holder_root", "standalone_config"]


def new_run_id() -> str:
    return f"run-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"


def _cluster(config: BatonConfig, environ: Mapping[str, str]) -> ClusterConfig | None:
    """``[cluster]`` when baton.toml has it (cluster mode is imported only then)."""
    if "cluster" not in config.raw:
        return None
    from baton.cluster.config import cluster_config

    return cluster_config(config.raw, environ)


def standalone_config(state_dir: Path) -> BatonConfig:
    """A configuration without a project: the built-in profiles, everything in ``state_dir``."""
    return BatonConfig(project_dir=None, state_dir=state_dir, profiles=BUILTIN_PROFILES)


@dataclass(eq=False)
class Run:
    """One recorded run: its id, its emitter, and the status it will be finished with."""

    run_id: str
    emitter: EventEmitter
    status: RunStatus = "failed"
    """Set by the caller when it knows how the run went; ``failed`` until then."""

    def listen(
        self,
        listener: Callable[[CanonicalEvent], None],
        *,
        batch_end: Callable[[], None] | None = None,
    ) -> None:
        """Show the run's events as they come (in sequence order; see the emitter);
        ``batch_end`` is called after each read from the agent (a view writes its batch)."""
        self.emitter.listeners.append(listener)
        if batch_end is not None:
            self.emitter.batch_listeners.append(batch_end)

    async def emit(self, payload: Payload) -> None:
        await self.emitter.emit(payload)


@dataclass(eq=False)
class Baton:
    """A project's baton; build one with :meth:`open`."""

    config: BatonConfig
    store: Store
    ledger: Ledger
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    recovered: list[RequestRecord] = field(default_factory=list)
    """Requests that recovery expired when this root opened."""
    cluster: ClusterConfig | None = None
    """``[cluster]`` of baton.toml: the store is PostgreSQL, role sessions are Ray actors."""
    _sessions: list[AgentSession] = field(default_factory=list)
    _closed: bool = False

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        project: str | os.PathLike[str] = ".",
        *,
        config: BatonConfig | None = None,
        state_dir: Path | None = None,
        db_path: Path | None = None,
        environ: Mapping[str, str] | None = None,
        recover: bool = True,
    ) -> AsyncIterator[Baton]:
        """The root of the project at (or above) ``project``; closed when the block ends.

        Without ``config``, ``baton.toml`` is loaded, unless ``state_dir`` (or ``db_path``)
        says where a root of its own lives: then it runs on the built-in profiles alone,
        its store and agents' roots in that directory (tests, benches, and
        ``baton inbox --db PATH``). ``db_path`` names the store file in either case.
        """
        env = os.environ if environ is None else environ
        if config is not None:
            cfg = config
        elif state_dir is not None:
            cfg = standalone_config(state_dir)
        elif db_path is not None:
            cfg = standalone_config(db_path.parent)
        else:
            cfg = check_config(load_config(Path(project), environ=env), env)
        cluster = _cluster(cfg, env) if db_path is None else None
        store = open_project_store(cfg, cluster, db_path)
        async with cls.on_store(store, cfg, environ=env, cluster=cluster, recover=recover) as self:
            yield self

    @classmethod
    @asynccontextmanager
    async def on_store(
        cls,
        store: Store,
        config: BatonConfig,
        *,
        environ: Mapping[str, str] | None = None,
        cluster: ClusterConfig | None = None,
        recover: bool = True,
    ) -> AsyncIterator[Baton]:
        """The root over ``store``, already open (closed with the root): the ledger over it,
        recovery (``recover``), and everything :meth:`open` gives."""
        env = os.environ if environ is None else environ
        self = cls(config, store, Ledger(store), environ=env, cluster=cluster)
        try:
            if recover:
                self.recovered = await recover_interrupted(store, self.ledger)
            yield self
        finally:
            await self.aclose()

    @classmethod
    @contextmanager
    def reading(
        cls, project: str | os.PathLike[str] = ".", *, config: BatonConfig | None = None
    ) -> Iterator[Store]:
        """Only the project's store, for surfaces that read (``runs``, ``log``): no ledger,
        no recovery, nothing that writes beyond the store's own migrations."""
        cfg = config if config is not None else check_config(load_config(Path(project)))
        store = open_project_store(cfg, _cluster(cfg, os.environ), None)
        try:
            yield store
        finally:
            store.close()

    async def aclose(self) -> None:
        """Close the sessions still open, then the ledger, then the store; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for session in reversed(self._sessions):
                await session.close("baton is closing")
        finally:
            await self.ledger.aclose()
            await self.store.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("this Baton is closed")

    # --------------------------------------------------------------------- runs

    @asynccontextmanager
    async def run(
        self,
        *,
        kind: str,
        agent: str,
        cwd: Path,
        run_id: str | None = None,
        meta: Mapping[str, Any] | None = None,  # Any: the run's JSON meta column
    ) -> AsyncIterator[Run]:
        """Record a run, yield it, and finish it with ``run.status`` (``failed`` on error)."""
        self._check_open()
        run_id = run_id or new_run_id()
        self.store.create_run(
            RunRecord(
                run_id=run_id,
                kind=kind,
                agent=agent,
                cwd=str(cwd),
                status="running",
                created_at=format_ts(time.time()),
                meta={**owner_meta(), **(meta or {})},
            )
        )
        run = Run(run_id, EventEmitter(Sequencer(run_id), self.store))
        try:
            yield run
        except BaseException:
            run.status = "failed" if run.status == "completed" else run.status
            raise
        finally:
            await run.emitter.flush()
            self.store.finish_run(run_id, run.status, format_ts(time.time()))

    # ------------------------------------------------------------------ brokers

    @property
    def notify(self) -> NotifyConfig:
        """``[notify]`` from baton.toml: who to tell when a human is needed."""
        return NotifyConfig.from_table(self.config.raw.get("notify", {}))

    def notifier(self, *, report: Report | None = None) -> Notifier:
        """The one notification service of this project (``report``: where failures go)."""
        project = self.config.project_dir.name if self.config.project_dir else ""
        return Notifier(self.notify, store=self.store, project=project, report=report)

    def broker(
        self,
        policy: Policy | str,
        *,
        terminal: HumanChannel | None = None,
        wait_timeout: float | None = None,
        notify: bool = True,
    ) -> RequestBroker:
        """Requests under ``policy`` (a preset name or a :class:`Policy`) into the ledger."""
        return RequestBroker(
            self.ledger,
            Policy.preset(policy) if isinstance(policy, str) else policy,
            terminal=terminal,
            wait_timeout=wait_timeout,
            notifier=self.notifier() if notify else Notifier(NotifyConfig()),
        )

    # ------------------------------------------------------------------ budgets

    def budget_plan(self, run: Limits | None = None) -> BudgetPlan:
        """Sessions' budgets: ``[budget]`` (``run``: ``--budget`` over ``per_run``),
        ``[pricing]``, ``[notify]`` told of thresholds and limits reached."""
        config, project = self.config, str(self.config.project_dir or "")
        return project_plan(config.budget, config.pricing, self.notify, project=project, run=run)

    # ----------------------------------------------------------------- sessions

    def profile(self, name: str) -> AgentProfile:
        return self.config.profile(name)

    async def open_session(
        self,
        profile: AgentProfile | str,
        *,
        run: Run,
        requests: RequestBroker,
        workspace: Path | None = None,
        **options: Any,  # Any: AgentSession.open's keyword options, passed through
    ) -> AgentSession:
        """Start an agent in ``run`` (see :meth:`AgentSession.open` for ``options``)."""
        self._check_open()
        resolved = self.profile(profile) if isinstance(profile, str) else profile
        if requests.family is None:
            requests.family = resolved.family  # the firewall knows the agent's habits
        if requests.notifier.report is None:
            requests.notifier.report = run.emitter.emit  # a failed notification is an event
        where = workspace if workspace is not None else self.config.project_dir or Path.cwd()
        options.setdefault("state_dir", self.config.state_dir)
        options.setdefault("secrets_file", self.config.secrets_file)
        options.setdefault("environ", self.environ)
        options.setdefault("budget", self.budget_plan())
        session = await AgentSession.open(
            resolved, workspace=where, emitter=run.emitter, requests=requests, **options
        )
        self._sessions.append(session)
        return session

    # ------------------------------------------------------------------ the team

    async def run_team(
        self,
        run: Run,
        ctx: CoordinationContext,
        *,
        until_idle: bool,
        on_loop: Callable[[TeamLoop], None] | None = None,
        decorate: Callable[[RoleSessionFactory], RoleSessionFactory] | None = None,
    ) -> RunSummary:
        """Run the team of ``ctx`` in ``run`` until idle (or until ``loop.stop()``).

        ``on_loop`` receives the loop once built (to stop it from a signal handler);
        ``decorate`` wraps the role-session factory (a progress line while starting).
        """
        self._check_open()
        from baton.team.service import run_team

        factory_for = holders = None
        if self.cluster is not None:
            from baton.cluster.team_factory import cluster_factory_for, holder_lookup

            factory_for = cluster_factory_for(
                self.cluster,
                self.config,
                store=self.store,
                ledger=self.ledger,
                emitter=run.emitter,
                workspace=ctx.project_dir,
                holder_root=open_holder_root,
            )
            holders = holder_lookup(self.store, run.emitter, ctx.project_dir)
        try:
            return await run_team(
                ctx,
                self.config,
                store=self.store,
                ledger=self.ledger,
                emitter=run.emitter,
                notifier=self.notifier(report=run.emitter.emit),
                until_idle=until_idle,
                on_loop=on_loop,
                decorate=decorate,
                factory_for=factory_for,
                holders=holders,
                budget=self.budget_plan(),
            )
        finally:
            if factory_for is not None:  # a clean stop leaves no role actor behind
                await factory_for.aclose()


@dataclass(eq=False)
class _HolderOnHost:
    """:class:`~baton.cluster.actor.HolderRoot` as the host's root and the holder's run."""

    baton: Baton
    run: Run

    @property
    def store(self) -> Store:
        return self.baton.store

    @property
    def emitter(self) -> EventEmitter:
        return self.run.emitter

    def broker(self, policy: Policy, *, wait_timeout: float | None) -> RequestBroker:
        return self.baton.broker(policy, wait_timeout=wait_timeout, notify=False)

    async def open_session(
        self, profile: AgentProfile, *, requests: RequestBroker, workspace: Path, **options: Any
    ) -> AgentSession:
        return await self.baton.open_session(
            profile, run=self.run, requests=requests, workspace=workspace, **options
        )

    def finish(self, status: RunStatus) -> None:
        self.run.status = status


@asynccontextmanager
async def open_holder_root(
    spec: HolderSpec,
    run_id: str,
    meta: Mapping[str, Any],  # Any: the run's JSON meta column
) -> AsyncIterator[HolderRoot]:
    """A role holder's root for its life (see the module): the cluster store, the holder's
    run ``run_id`` (kind ``role-holder``, ``meta``), its agents' state in
    ``spec.state_dir``. No recovery runs on a holder's host: a holder judges no other run."""
    store = await asyncio.to_thread(open_cluster_store, spec.dsn)
    config = replace(standalone_config(Path(spec.state_dir)), budget=spec.budget)
    async with (
        Baton.on_store(store, config, environ=spec.environ, recover=False) as baton,
        baton.run(
            kind="role-holder",
            agent=spec.profile.name,
            cwd=Path(spec.workspace),
            run_id=run_id,
            meta=meta,
        ) as run,
    ):
        yield _HolderOnHost(baton, run)
