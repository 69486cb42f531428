"""The role actor: one role slot's holder, a Ray detached named actor on a worker host.

The actor *is* the slot's session in cluster mode. It runs baton's runner over
the subprocess transport (the real agent process lives in the actor, on the
host that holds the slot's checkout), appends its canonical events to the
PostgreSQL store in a run of its own (``<parent>.<slot>.e<epoch>``: every copy
has its own sequence, so two copies never race for a seq), and answers the
agent's requests through a broker on the store's ledger: a permission or a
question answered on any surface (``baton answer``, the web) is a ledger row,
and the broker waiting inside the actor hears it (LISTEN/NOTIFY) and answers
the live connection.

Fencing (:mod:`.fence_guard`, :mod:`.lease`): the actor acts only under its
epoch. The agent's requests and the client's answers pass an epoch check in a
store transaction first; the turn's report to the driver too; the lease is
renewed every third of its length and a watchdog stops the agent when the store
has not confirmed a renewal for about the lease. The agent's own ``git push`` asks
the same check through a ``pre-push`` hook (:mod:`.push_gate`). Once refused, the
actor records ``cluster.fenced_out``, stops its agent and acts no more.

With a task tree (``spec.tree``: ``[team] isolation = "worktree"`` on a cluster) the agent
works in the holder's own copy of the tree on this host, and every turn ends with the copy
committed and pushed to the tree's branch under the epoch (:mod:`.tree_copy`).

The holder wires nothing itself: its host's root (:class:`HolderRoot`, ``spec.root``:
:func:`baton.app.root.open_holder_root`) opens the store, its run, broker and session.

The agent's role tools go through the holder's relay (:mod:`.tool_relay`): each writing
call recorded in the store and delivered once to the coordinator's hub, also when that
coordinator is away while the agent files its report.

Ray is imported only by :func:`role_actor_class` (cluster mode): this module's
:class:`RoleHolder` is plain Python, so it is tested without a cluster too.

Length: the holder's start (root, lease, relay, push gate, agent), its acts (a turn, its
adoption by a restarted coordinator) and its stop share the one set of resources an
epoch holds, and release them in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import copyreg
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from baton.acp.transport import AgentTransport, TransportFactory
from baton.agent_profile import AgentProfile
from baton.budgets.limits import BudgetConfig
from baton.cluster.fence_guard import EpochGuard, fenced_transport
from baton.cluster.fencing import Placements
from baton.cluster.lease import LeaseKeeper
from baton.cluster.names import holder_run_id
from baton.cluster.placement import FencedOut, LeaseLapsed
from baton.cluster.push_gate import PushGate
from baton.cluster.tool_relay import DELIVERY_WAIT_S, Relay
from baton.cluster.tree_copy import TreeCopy, TreeSpec
from baton.events.model import ClusterFencedOut
from baton.fcop_errors import CoordinationError
from baton.procgroup import group_alive, signal_group
from baton.requests.policy import Policy
from baton.role_tools.binding import CurrentTask, SlotAccess
from baton.runner.emitter import EventEmitter
from baton.runner.launch import transport_for
from baton.runner.requests_broker import RequestBroker
from baton.runner.session import AgentSession
from baton.store.records import RunStatus
from baton.store.store import Store
from baton.team.contract import TurnResult
from baton.team.reconcile import prompt_digest
from baton.team.role_sessions import AcpRoleSession, offer_http, role_policy
from baton.worktrees.git import GitError

if TYPE_CHECKING:
    from baton.acp.messages import InitializeAnswer
    from baton.store.tx import Tx

__all__ = [
    "HolderRoot",
    "HolderSpec",
    "OpenHolderRoot",
    "RoleHolder",
    "holder_meta",
    "role_actor_class",
]

log = logging.getLogger(__name__)

# The driver ships an AgentProfile (read-only mappings inside) to the actor by pickle.
copyreg.pickle(MappingProxyType, lambda m: (MappingProxyType, (dict(m),)))


class HolderRoot(Protocol):
    """What a holder needs from its host's composition root (``baton.app`` opens it),
    wired as the coordinator's root wires its own."""

    @property
    def store(self) -> Store: ...

    @property
    def emitter(self) -> EventEmitter:
        """The journal of the holder's run (its events, its fenced records)."""
        ...

    def broker(self, policy: Policy, *, wait_timeout: float | None) -> RequestBroker: ...

    async def open_session(
        self, profile: AgentProfile, *, requests: RequestBroker, workspace: Path, **options: Any
    ) -> AgentSession:  # Any: AgentSession.open's keyword options, passed through
        """The agent's session in the holder's run (``options``: ``AgentSession.open``'s)."""
        ...

    def finish(self, status: RunStatus) -> None:
        """How the holder's run ends when the root closes (``failed`` until said)."""
        ...


OpenHolderRoot = Callable[
    ["HolderSpec", str, Mapping[str, Any]], AbstractAsyncContextManager[HolderRoot]
]
"""``(spec, run id, run meta) -> the root``, entered for the holder's life (the meta is the
run's JSON column, :func:`holder_meta`)."""


@dataclass(frozen=True)
class HolderSpec:
    """Everything a holder needs, shipped from the driver (plain, picklable data)."""

    dsn: str
    slot: str
    epoch: int
    host: str
    lease_s: float
    parent_run: str
    profile: AgentProfile
    workspace: str
    state_dir: str
    permissions: str = "ask"
    wait_timeout: float | None = None
    environ: Mapping[str, str] | None = None
    mcp_servers: Sequence[Mapping[str, Any]] = ()
    mcp_http: Sequence[Mapping[str, Any]] = ()
    """Used instead of ``mcp_servers`` when the agent advertises ``mcpCapabilities.http``
    (the role tools over the coordinator's HTTP front, reachable from other hosts)."""
    resume_session_id: str | None = None
    hub_url: str | None = None
    """The coordinator's hub (``http://HOST:PORT``), as the factory started it; the store's
    ``cluster_hubs`` row wins once a restarted coordinator listens elsewhere."""
    hub_token: str | None = None
    """This session's credential at the hub. Given, the holder relays its agent's role
    tools (:mod:`.tool_relay`: recorded, delivered once) instead of handing it the hub's
    entries (``mcp_servers``/``mcp_http``) directly."""
    delivery_wait_s: float = DELIVERY_WAIT_S
    """How long an agent's role tool call waits for an absent hub (then: pending delivery)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Free-form notes stored in the holder's run meta (the task it resumes, say)."""
    project: str = ""
    """The team's FCoP workspace id: the key of its placement rows (:class:`Placements`)."""
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """The project's ``[budget]`` without ``per_run`` (the coordinator's run is the team's
    run; it checks that one): the holder's meter checks its turns' task tree, role and
    credential window in the cluster's store, the same rows every host charges."""
    tree: TreeSpec | None = None
    """The task tree the agent works on (its copy on this host, pushed after every turn);
    None: the agent works in ``workspace`` itself."""
    root: OpenHolderRoot = field(kw_only=True)
    """How the holder's host opens its composition root: a module-level function, shipped
    by reference (``baton.app.root.open_holder_root``; the coordinator's root sets it)."""


def holder_meta(spec: HolderSpec) -> dict[str, Any]:  # Any: the run's JSON meta column
    """The holder run's meta: what :func:`baton.store.placement_sql.placed_holder` finds it by
    (``slot``, ``epoch``, ``project``), where it runs and for whom."""
    return {
        "slot": spec.slot,
        "epoch": spec.epoch,
        "host": spec.host,
        "parent_run": spec.parent_run,
        "project": spec.project,
        **spec.extra,
    }


def _nothing(tx: Tx) -> None:
    """A fenced act's record: the check itself (the act happens outside the store)."""


class RoleHolder:
    """One slot's session under one epoch. Ray makes it an actor (:func:`role_actor_class`)."""

    def __init__(self, spec: HolderSpec, *, transport: TransportFactory | None = None) -> None:
        self.spec = spec
        self._transport = transport
        """The agent's transport (a test's fault injection); None: the profile's own, as
        on one machine (:func:`~baton.runner.launch.transport_for`: ACP over stdio, or
        the ``cursor-sdk`` bridge)."""
        self._raw: list[AgentTransport] = []
        self._stack = AsyncExitStack()
        self._root: HolderRoot | None = None
        self._placements: Placements | None = None
        self._session: AcpRoleSession | None = None
        self._guard: EpochGuard | None = None
        self._keeper: LeaseKeeper | None = None
        self._lease_task: asyncio.Task[None] | None = None
        self._push_gate: PushGate | None = None
        self._relay: Relay | None = None
        self._tree: TreeCopy | None = None
        self._entries: tuple[list[dict[str, Any]], list[dict[str, Any]]] = (
            [dict(e) for e in spec.mcp_servers],
            [dict(e) for e in spec.mcp_http],
        )
        """The agent's role tools: (stdio, http) entries, the relay's once it serves."""
        self.stopped: str | None = None
        self._starting: asyncio.Future[None] | None = None
        self._turn: asyncio.Task[TurnResult] | None = None
        self._turn_sha256: str | None = None
        self._turn_asker: str | None = None
        self.role_tools = "stdio" if spec.mcp_servers else "none"
        """How the agent reaches the role tools: ``http``, ``stdio`` or ``none``."""
        self.run_id = holder_run_id(spec.parent_run, spec.slot, spec.epoch)

    # ------------------------------------------------------------------ start

    async def start(self) -> dict[str, Any]:  # Any: a plain dict Ray pickles back
        """Open the host's root, confirm the epoch (a renewal), start the agent and the lease;
        then who it is. Idempotent: a second call (a new coordinator re-attaching, its
        predecessor having died while this holder started) waits for the one start and
        answers as it did (its error, when it failed)."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start_once())
        await asyncio.shield(self._starting)
        return await self.info()

    async def _start_once(self) -> None:
        spec = self.spec
        try:
            root = await self._stack.enter_async_context(
                spec.root(spec, self.run_id, holder_meta(spec))
            )
            self._root = root
            await self._start(root)
        except BaseException:
            # Nothing of it is released (a stale epoch is not its to release); its run fails.
            self.stopped = self.stopped or "its start failed"
            self._root = None
            await self.close()
            raise

    async def _start(self, root: HolderRoot) -> None:
        spec = self.spec
        placements = Placements(root.store, root.emitter, project=spec.project)
        self._placements = placements

        async def fence(act: str) -> None:
            try:
                await placements.fenced(spec.slot, spec.epoch, _nothing)
            except LeaseLapsed:
                # Asked before a store outage froze the agent, answered after it: the
                # epoch is taken up again first (refused if the slot moved meanwhile).
                await keeper.take_up()
                await placements.fenced(spec.slot, spec.epoch, _nothing)

        self._guard = EpochGuard(
            fence,
            slot=spec.slot,
            epoch=spec.epoch,
            record=self._record,
            on_refused=self._refused,
        )
        keeper = LeaseKeeper(
            lambda: placements.renew(spec.slot, spec.epoch, lease_s=spec.lease_s),
            lease_s=spec.lease_s,
            on_lost=self._lease_lost,
            on_pause=self._pause_agent,
            on_resume=self._resume_agent,
            resume=lambda: placements.confirm(spec.slot, spec.epoch, lease_s=spec.lease_s),
        )
        self._keeper = keeper
        sent = time.monotonic()
        await placements.confirm(spec.slot, spec.epoch, lease_s=spec.lease_s)  # FencedOut: stale
        keeper.confirmed(sent)
        self._lease_task = asyncio.create_task(keeper.run(), name=f"lease-{spec.slot}")
        broker = root.broker(role_policy(spec.permissions), wait_timeout=spec.wait_timeout)
        if spec.hub_token is not None:
            self._relay = Relay(
                root.store,
                spec.project,
                spec.slot,
                spec.epoch,
                spec.hub_token,
                url=spec.hub_url,
                wait_s=spec.delivery_wait_s,
            )
            self._entries = await self._relay.start()
        self.role_tools = "stdio" if self._entries[0] else "none"
        workspace = Path(spec.workspace)
        if spec.tree is not None:  # the agent works in this host's copy of its task tree
            self._tree = await asyncio.to_thread(
                TreeCopy.open, workspace, spec.tree, slot=spec.slot, epoch=spec.epoch
            )
            workspace = self._tree.cwd
        self._push_gate = PushGate(self._guard.check)
        gate = await self._push_gate.start(workspace)
        profile = replace(spec.profile, env=MappingProxyType(gate.env(spec.profile.env)))
        session = await root.open_session(
            profile,
            requests=broker,
            workspace=workspace,
            mcp_servers=self._choose_mcp if self._entries[1] else self._entries[0],
            resume_session_id=spec.resume_session_id,
            transport=fenced_transport(
                self._transport or transport_for(profile), self._guard, started=self._raw.append
            ),
            isolated=self._tree is not None,  # a tree's copy: its edits are the reviewed diff
        )
        self._session = AcpRoleSession(session, role=_role(spec))

    async def _choose_mcp(self, answer: InitializeAnswer) -> list[dict[str, Any]]:
        """The role tools over HTTP when the agent speaks it, else the stdio entries."""
        http = offer_http(answer)
        self.role_tools = "http" if http else "stdio"
        return self._entries[1] if http else self._entries[0]

    # ------------------------------------------------------------------ acts

    async def prompt(
        self, text: str, asker: str | None = None, charge: tuple[str, str | None] | None = None
    ) -> TurnResult:
        """One turn; its report reaches the driver only under the epoch (else FencedOut).

        The turn outlives the driver that asked for it (``asker``: its coordinator run).
        When another coordinator (a restart, re-attached by name) asks for the same
        prompt, it gets that turn's result: the turn ran once, its outcome is not lost and
        not run twice. A different prompt waits for the running turn to end first (one
        turn at a time on a session). ``charge``: the TASK and task tree the turn is
        charged to (:meth:`RemoteRoleSession.charge_to`)."""
        session = await self._started()
        turn = self._orphan(prompt_digest(text), asker)
        if turn is None:
            if self._turn is not None and not self._turn.done():
                await asyncio.wait([self._turn])
            if charge is not None:
                session.charge_to(*charge)
            if self._relay is not None:
                self._relay.begin_turn(prompt_digest(text), await asyncio.to_thread(self._pointer))
            turn = self._turn = asyncio.create_task(self._run_turn(session, text), name="role-turn")
            turn.add_done_callback(_retrieved)  # an orphan's failure is the next caller's
            self._turn_sha256 = prompt_digest(text)
        return await self._hand_over(turn, asker)

    async def _run_turn(self, session: AcpRoleSession, text: str) -> TurnResult:
        """The agent's turn, then (with a tree) its copy committed and pushed, fenced; also
        when the turn failed (the agent died mid-turn: what it wrote is kept on the branch)."""
        if self._tree is not None:
            try:
                await asyncio.to_thread(self._tree.refresh)
            except GitError as exc:  # the coordinator unreachable: the turn's push decides
                log.warning("slot %s epoch %d: no fresh head: %s", *self._who(), exc)
        try:
            result = await session.prompt(text)
        except Exception:  # re-raised: the turn failed, what its agent wrote is still pushed
            if self._tree is not None and self.stopped is None:
                with contextlib.suppress(Exception):  # the turn's own failure is what counts
                    await self._publish(TurnResult("failed"))
            raise
        if self._tree is None:
            return result
        return await self._publish(result)

    async def _publish(self, result: TurnResult) -> TurnResult:
        """Commit the copy; push it only under the epoch, as a compare-and-set of the branch.

        A refusal (the store names another epoch, or the branch moved past the head this
        copy started from) is a fenced-out outcome: the commit stays under the copy's
        stale ref on this host, the branch is not moved. A push that fails otherwise (the
        coordinator's host unreachable) fails the turn; the next turn pushes it again."""
        tree, guard = self._tree, self._guard
        assert tree is not None and guard is not None
        pointer = await asyncio.to_thread(self._pointer)
        message = (
            f"baton: {pointer.task_id or tree.tree.task} {_role(self.spec) or self.spec.slot} "
            f"turn (epoch {self.spec.epoch})\n\n"
            f"What the agent left in the worktree when its turn ended (slot {self.spec.slot}, "
            f"host {self.spec.host or 'local'})."
        )
        head = await asyncio.to_thread(tree.commit, message)
        if head == tree.pushed:
            return result
        act = f"git push {tree.tree.branch}"
        if not await guard.check(act):
            await asyncio.to_thread(tree.repo.save, tree.stale, head)
            raise FencedOut(str(guard.refused))
        try:
            pushed = await asyncio.to_thread(tree.push, head)
        except GitError as exc:
            return replace(result, status="failed", error=f"the turn's push failed: {exc}")
        if not pushed:
            reason = f"{tree.tree.branch} moved past {tree.pushed[:12]} (a newer copy pushed)"
            await self._record(
                ClusterFencedOut(slot=self.spec.slot, epoch=self.spec.epoch, act=act, reason=reason)
            )
            await self._stop_agent(f"fenced out: {reason}")
            raise FencedOut(f"slot {self.spec.slot!r} epoch {self.spec.epoch}: {reason}")
        return result

    def _pointer(self) -> CurrentTask:
        """The slot's pointer as the turn starts (the coordinator committed it before it
        prompted): the task and attempt the turn's role tool calls are made on."""
        assert self._root is not None
        try:
            return SlotAccess(self._root.store, self.spec.slot).pointer()
        except CoordinationError:  # no team slot row (a holder driven without a team loop)
            return CurrentTask(None, None)

    async def adopt(self, prompt_sha256: str, asker: str | None = None) -> TurnResult | None:
        """:meth:`prompt` for a coordinator that knows only the prompt's digest (a restarted
        one: :mod:`baton.team.reconcile`); ``None`` when that is not this holder's turn."""
        await self._started()
        turn = self._orphan(prompt_sha256, asker)
        return None if turn is None else await self._hand_over(turn, asker)

    def _orphan(self, prompt_sha256: str, asker: str | None) -> asyncio.Task[TurnResult] | None:
        """The last turn, when it ran this prompt for another (a lost) driver."""
        turn = self._turn
        if turn is None or prompt_sha256 != self._turn_sha256 or asker == self._turn_asker:
            return None
        log.info("slot %s epoch %d: handing a lost driver's turn over", *self._who())
        return turn

    async def _hand_over(self, turn: asyncio.Task[TurnResult], asker: str | None) -> TurnResult:
        self._turn_asker = asker
        result = await asyncio.shield(turn)  # a caller gone (its driver died) leaves it running
        assert self._guard is not None
        await self._guard.require("report")
        return result

    async def cancel(self, reason: str) -> None:
        await self._live().cancel(reason)

    async def info(self) -> dict[str, Any]:  # Any: a plain dict Ray pickles back
        """Who this holder is (re-attachment by name answers the same pids)."""
        pid = None
        if self._raw:
            raw_pid = getattr(self._raw[0], "pid", None)
            pid = raw_pid if isinstance(raw_pid, int) else None
        return {
            "slot": self.spec.slot,
            "epoch": self.spec.epoch,
            "host": self.spec.host,
            "run_id": self.run_id,
            "actor_pid": os.getpid(),
            "agent_pid": pid,
            "agent_alive": bool(self._raw) and self._raw[0].returncode is None,
            "session_id": self._session.session_id if self._session else None,
            "stopped": self.stopped,
            "role_tools": self.role_tools,
            "turn": None if self._turn is None else "done" if self._turn.done() else "running",
            "turn_sha256": self._turn_sha256,
            "fenced_checks": self._guard.checks if self._guard else 0,
            "renewals": self._keeper.renewals if self._keeper else 0,
            "paused": self._keeper.paused if self._keeper else None,
            "pauses": self._keeper.pauses if self._keeper else 0,
        }

    async def _started(self) -> AcpRoleSession:
        """The session once the start under way has ended (a turn asked for while the
        holder was still starting waits for it, never fails with "not started")."""
        if self._starting is not None:
            with contextlib.suppress(Exception):  # its failure stopped the holder: _live says
                await asyncio.shield(self._starting)
        return self._live()

    def _live(self) -> AcpRoleSession:
        if self.stopped is not None:
            raise FencedOut(f"slot {self.spec.slot!r} epoch {self.spec.epoch}: {self.stopped}")
        if self._session is None:
            raise RuntimeError("the holder has not started")
        return self._session

    # ------------------------------------------------------------------ stopping

    async def _record(self, event: ClusterFencedOut) -> None:
        if self._root is not None:
            try:
                await self._root.emitter.emit(event)
                await self._root.emitter.flush()
            except Exception:  # best effort: the refusal it records goes on regardless
                log.exception("recording %s failed", event.TYPE)

    async def _refused(self, reason: str) -> None:
        await self._stop_agent(f"fenced out: {reason}")

    async def _lease_lost(self, reason: str) -> None:
        # The refusal is recorded when the store can still take it (a renewal refused).
        if self._guard is not None and self._guard.refused is None:
            asyncio.get_running_loop().create_task(
                self._record(
                    ClusterFencedOut(
                        slot=self.spec.slot, epoch=self.spec.epoch, act="lease", reason=reason
                    )
                )
            )
        await self._stop_agent(reason)

    async def _pause_agent(self, reason: str) -> None:
        """Freeze the agent's process group: it acts no more until the store confirms the
        epoch again (a store outage ridden out) or refuses it (then it is stopped)."""
        log.warning("slot %s epoch %d: pausing its agent: %s", *self._who(), reason)
        self._signal_agent(signal.SIGSTOP)

    async def _resume_agent(self) -> None:
        log.warning("slot %s epoch %d: its agent goes on", *self._who())
        self._signal_agent(signal.SIGCONT)

    def _agent_alive(self) -> bool:
        """A process of the agent's group is left (a transport without a group: its
        process, if any, counts as alive)."""
        for raw in self._raw:
            pgid = getattr(raw, "pgid", None)
            if not isinstance(pgid, int) or group_alive(pgid):
                return True
        return False

    def _signal_agent(self, sig: signal.Signals) -> None:
        for raw in self._raw:
            pgid = getattr(raw, "pgid", None)
            if isinstance(pgid, int):
                signal_group(pgid, sig)

    async def _stop_agent(self, reason: str) -> None:
        """Kill the agent now (never wait for a turn: a stale copy must not act on)."""
        if self.stopped is None:
            self.stopped = reason
            log.warning("slot %s epoch %d: stopping its agent: %s", *self._who(), reason)
        self._signal_agent(signal.SIGCONT)  # a frozen group is killed as well, not left
        for raw in self._raw:
            with contextlib.suppress(Exception):
                await raw.kill()

    def _who(self) -> tuple[str, int]:
        return self.spec.slot, self.spec.epoch

    async def close(self, reason: str = "the driver released the role session") -> None:
        """Stop the agent, release the placement if still held, close the host's root
        (the session, the holder's run, the store); idempotent."""
        if self._turn is not None and not self._turn.done():
            self._turn.cancel()
        if self._lease_task is not None:
            self._lease_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._lease_task
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session.session.close(reason)
        if self._push_gate is not None:
            await self._push_gate.close()
            if not self._agent_alive():
                self._push_gate.remove()
        if self._relay is not None:
            with contextlib.suppress(Exception):
                await self._relay.close()
        if self._placements is not None and self.stopped is None:
            with contextlib.suppress(FencedOut, Exception):
                await self._placements.release(self.spec.slot, self.spec.epoch)
                if self._tree is not None:  # released: no newer copy of this slot exists
                    await asyncio.to_thread(self._tree.close)
        self.stopped = self.stopped or reason
        if self._root is not None:
            self._root.finish("completed")  # it served until released (or fenced out)
            self._root = None
        try:
            await self._stack.aclose()
        except Exception:  # a store gone with its host: the run stays for recovery to see
            log.exception("slot %s epoch %d: closing the holder's root failed", *self._who())


def _retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def role_actor_class() -> Any:  # Any: a Ray actor class (Ray is untyped, and optional)
    """:class:`RoleHolder` as a Ray actor class (imports Ray: cluster mode only).

    No restarts (``max_restarts=0``): a lost holder is re-placed by the driver under
    a new epoch, never silently restarted under the old one.
    """
    import ray

    remote: Any = ray.remote
    return remote(max_restarts=0, max_concurrency=64, num_cpus=0)(RoleHolder)


def _role(spec: HolderSpec) -> str | None:
    role = spec.extra.get("role")
    return role if isinstance(role, str) else None
