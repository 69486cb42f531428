"""The coordinator as a Ray driver: places each role slot's actor, supervises, re-places.

:class:`ClusterDriver` is the I/O edge of :func:`baton.cluster.placement.placement_step`:
the facts are the store's placement row and Ray's node table (each worker's
``baton-host-<name>`` resource, see ``baton worker``), the moves are committed
through :class:`~baton.cluster.fencing.Placements` (each placement bumps the
slot's epoch) and only then is the actor created, pinned to its host by that
resource. Ray's state is a cache of the store's decisions: the actor's name is
derived from the stored epoch, so a new driver (the coordinator restarted)
re-attaches by name from the store alone. An actor that dies while it starts (its node
died, and Ray may not say so yet) fails its placement, and the slot is placed again,
on another host when there is one.

:class:`RemoteRoleSession` is the team loop's :class:`~baton.team.contract.RoleSession`
over a role actor. When the actor dies under a turn (its host was killed, or cut
off and declared dead), the session records the host's failure, re-places the
slot on another eligible host under the next epoch and runs the turn again in a
fresh session with the task's context (:func:`resume_text`): the old copy, should
it come back, is fenced out.

Length: the driver and the remote session over it share the holder table and the
handling of an actor's death; together they are the coordinator's edge to Ray.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from baton.cluster.actor import HolderSpec, role_actor_class
from baton.cluster.delivery import TurnCalls
from baton.cluster.fencing import Placements
from baton.cluster.names import (
    CHECKOUT_PREFIX,
    HOST_PREFIX,
    NAMESPACE,
    actor_name,
    checkout_resource,
    host_resource,
)
from baton.cluster.placement import (
    Expire,
    FencedOut,
    HostDead,
    HostFacts,
    Keep,
    NoHost,
    Place,
    Placement,
    PlacementState,
    placement_step,
)
from baton.errors import AgentExited, BatonError
from baton.requests.ledger import Ledger
from baton.store.journal import Journal
from baton.store.store import Store
from baton.team.contract import TurnResult
from baton.team.reconcile import prompt_digest

__all__ = [
    "ClusterDriver",
    "Holder",
    "NoEligibleHost",
    "RemoteRoleSession",
    "hosts_from_nodes",
    "resume_text",
]

log = logging.getLogger(__name__)

RESUME_ATTEMPTS: Final = 2


class NoEligibleHost(BatonError):
    """No live worker host holds the slot's checkout."""


def hosts_from_nodes(  # Any: ray.nodes()'s untyped rows, read defensively here
    nodes: Sequence[Mapping[str, Any]], slots: Sequence[str]
) -> list[HostFacts]:
    """Ray's node table (``ray.nodes()``) as the hosts :func:`placement_step` chooses from.

    A node is host ``NAME`` when it declares ``baton-host-NAME``; it holds the checkouts
    of the slots it declares as ``baton-checkout-SLOT``, or of every slot when it
    declares none (a host that checks out per task). Nodes without a host resource
    (the head, unless it joined as a worker) run no role.
    """
    facts: dict[str, HostFacts] = {}
    for node in nodes:
        resources = node.get("Resources") or {}
        names = [k.removeprefix(HOST_PREFIX) for k in resources if k.startswith(HOST_PREFIX)]
        if not names:
            continue
        any_slot = not any(k.startswith(CHECKOUT_PREFIX) for k in resources)
        held = frozenset(s for s in slots if any_slot or checkout_resource(s) in resources)
        alive = bool(node.get("Alive"))
        for name in names:
            known = facts.get(name)
            if known is None or (alive and not known.alive):  # a restarted host: its live node
                facts[name] = HostFacts(name, alive, held)
    return sorted(facts.values(), key=lambda h: h.name)


def resume_text(prompt: str, *, epoch: int, reason: str) -> str:
    """The turn again, in a fresh session on another host (the agent could not load)."""
    return (
        f"[baton] This task's previous session stopped before its turn ended ({reason}); "
        f"you are its new session (placement epoch {epoch}). Files it wrote may be in the "
        "workspace already: check before redoing work. The task, as it was given:\n\n"
        f"{prompt}"
    )


@dataclass
class Holder:
    """A live role actor the driver knows: its placement and its Ray handle."""

    placement: Placement
    handle: Any
    info: dict[str, Any] = field(default_factory=dict)

    project: str = ""

    @property
    def name(self) -> str:
        return actor_name(self.placement.slot, self.placement.epoch, self.project)


class ClusterDriver:
    """Places role actors on worker hosts; one per coordinator (``ray.init`` done by it)."""

    def __init__(
        self,
        placements: Placements,
        *,
        lease_s: float = 15.0,
        ledger: Ledger | None = None,
        journal: Journal | None = None,
        nodes: Callable[[], Sequence[Mapping[str, Any]]] | None = None,  # Any: ray.nodes()'s rows
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.placements = placements
        self.lease_s = lease_s
        self.ledger = ledger
        self.journal = journal
        self._nodes = nodes
        self._clock = clock
        self.holders: dict[str, Holder] = {}

    @property
    def project(self) -> str:
        return self.placements.project

    @classmethod
    def connect(
        cls,
        address: str,
        store: Store,
        journal: Journal,
        *,
        lease_s: float = 15.0,
        ledger: Ledger | None = None,
        project: str = "",
    ) -> ClusterDriver:
        """Join the Ray cluster at ``address`` as its driver (imports Ray).

        ``project``: the team's FCoP workspace id, the key of its placement rows and part
        of its actors' names (two teams may share a cluster and its store)."""
        import ray

        if not ray.is_initialized():
            ray.init(
                address=address,
                namespace=NAMESPACE,
                logging_level=logging.ERROR,
                log_to_driver=False,
            )
        placements = Placements(store, journal, project=project)
        return cls(placements, lease_s=lease_s, ledger=ledger, journal=journal)

    def nodes(self) -> Sequence[Mapping[str, Any]]:  # Any: ray.nodes()'s untyped rows
        if self._nodes is not None:
            return self._nodes()
        import ray

        table: Any = ray.nodes  # untyped in Ray; Any also where Ray is not installed (CI)
        return list(table())

    def hosts(self, slots: Sequence[str]) -> list[HostFacts]:
        return hosts_from_nodes(self.nodes(), slots)

    def _load(self) -> dict[str, int]:
        load: dict[str, int] = {}
        for holder in self.holders.values():
            load[holder.placement.host] = load.get(holder.placement.host, 0) + 1
        return load

    async def ensure(self, spec: HolderSpec, *, avoid: str | None = None) -> Holder:
        """The slot's live holder: kept, re-attached by name, or placed (a new epoch).

        ``avoid``: a host whose holder just died; Ray may not have declared it dead yet,
        so it is taken only when no other host holds the slot's checkout.
        """
        slot = spec.slot
        for _ in range(4):
            current = await self.placements.current(slot)
            hosts = await asyncio.to_thread(self.hosts, [slot])
            if avoid is not None and any(
                h.alive and h.name != avoid and slot in h.slots for h in hosts
            ):
                hosts = [replace(h, alive=False) if h.name == avoid else h for h in hosts]
            decision = placement_step(slot, current, hosts, now=self._clock(), load=self._load())
            if isinstance(decision, Keep):
                assert current is not None
                held = self.holders.get(slot)
                if held is not None and held.placement.epoch == current.epoch:
                    return held
                attached = await self.attach(slot)
                if attached is not None:
                    return attached
                await self.placements.fail(slot)  # stored as placed, but no actor: lost
            elif isinstance(decision, HostDead):
                await self.placements.fail(slot)
            elif isinstance(decision, Expire):
                await self.placements.expire(slot)
            elif isinstance(decision, NoHost):
                raise NoEligibleHost(decision.reason)
            elif isinstance(decision, Place):
                try:
                    placed = await self._place(spec, decision.host)
                except Exception as exc:  # Ray's actor errors are untyped: only a death is handled
                    if not _is_actor_death(exc):
                        raise
                    log.warning("slot %s: died starting on %s; placing again", slot, decision.host)
                    await self.placements.fail(slot)  # its node died (Ray may not say so yet)
                    avoid = decision.host
                    continue
                if placed is not None:
                    return placed
        raise NoEligibleHost(f"slot {slot!r}: its placement kept moving")

    async def _place(self, spec: HolderSpec, host: str) -> Holder | None:
        """Place and start the actor; None when the placement moved while it started."""
        placement = await self.placements.place(spec.slot, host, lease_s=self.lease_s)
        actor_cls = role_actor_class()
        handle = actor_cls.options(
            name=actor_name(spec.slot, placement.epoch, self.project),
            namespace=NAMESPACE,
            lifetime="detached",
            resources={host_resource(host): 0.01},
        ).remote(
            replace(
                spec, epoch=placement.epoch, host=host, lease_s=self.lease_s, project=self.project
            )
        )
        holder = Holder(placement, handle, project=self.project)
        self.holders[spec.slot] = holder
        try:
            holder.info = await handle.start.remote()
        except FencedOut:  # Ray's task error is also the actor's exception type
            log.warning("slot %s: placement moved while its actor started", spec.slot)
            self.holders.pop(spec.slot, None)
            await self._kill(holder)
            return None
        except BaseException:
            self.holders.pop(spec.slot, None)
            await self._kill(holder)
            raise
        return holder

    async def attach(self, slot: str) -> Holder | None:
        """Re-attach to the slot's actor by the name the store's epoch gives (a new driver)."""
        import ray

        current = await self.placements.current(slot)
        if current is None or current.state is not PlacementState.PLACED:
            return None
        try:
            name = actor_name(slot, current.epoch, self.project)
            handle = ray.get_actor(name, namespace=NAMESPACE)
            # start() is idempotent: it waits for a start the previous coordinator began
            # (it may have died while its roles were starting), or begins one it never did
            info = await handle.start.remote()
        except ValueError:  # no such actor: it died with its host, or was never created
            return None
        except Exception as exc:  # it died, or its start failed (a moved epoch, its agent)
            log.warning("slot %s: its holder of epoch %d is lost: %s", slot, current.epoch, exc)
            await self._kill(Holder(current, handle, project=self.project))
            return None
        holder = Holder(current, handle, info, project=self.project)
        self.holders[slot] = holder
        return holder

    async def replace_after_death(self, spec: HolderSpec, reason: str) -> Holder:
        """The holder died: record the host's failure (if still placed there), place again."""
        held = self.holders.pop(spec.slot, None)
        current = await self.placements.current(spec.slot)
        if (
            current is not None
            and current.state is PlacementState.PLACED
            and held is not None
            and current.epoch == held.placement.epoch
        ):
            await self.placements.fail(spec.slot)
        if held is not None:
            await self._cancel_requests(held, reason)
        log.warning("slot %s: holder lost (%s); placing it again", spec.slot, reason)
        return await self.ensure(spec, avoid=held.placement.host if held is not None else None)

    async def _cancel_requests(self, held: Holder, reason: str) -> None:
        """The dead holder's open requests leave the inbox (nobody can answer its agent)."""
        run_id = held.info.get("run_id")
        if self.ledger is None or not isinstance(run_id, str):
            return
        for record in await self.ledger.pending(run_id=run_id):
            try:
                await self.ledger.cancel(
                    record.request_id, f"the role's holder was lost: {reason}", journal=self.journal
                )
            except BatonError:
                log.info("request %s moved meanwhile", record.request_id)

    async def release(self, slot: str) -> None:
        """Close the slot's actor cleanly (it releases its placement) and end it."""
        holder = self.holders.pop(slot, None)
        if holder is None:
            return
        try:
            await holder.handle.close.remote()
        except Exception:  # best effort: the actor is killed next in any case
            log.exception("closing %s failed", holder.name)
        await self._kill(holder)

    async def release_unheld(self) -> list[str]:
        """Release every placed slot of the project this driver holds no session for: the
        holders a previous coordinator left (one killed while its roles were starting, say)
        that this one never needed. A clean stop leaves no role actor or agent behind."""
        released = []
        for placement in await self.placements.all():
            if placement.state is not PlacementState.PLACED or placement.slot in self.holders:
                continue
            if await self.attach(placement.slot) is not None:
                await self.release(placement.slot)
                released.append(placement.slot)
        return released

    async def _kill(self, holder: Holder) -> None:
        import ray

        try:
            ray.kill(holder.handle, no_restart=True)
        except Exception:  # Ray's error for an actor already gone is untyped
            log.debug("killing %s: already gone", holder.name)


def _is_actor_death(exc: BaseException) -> bool:
    import ray

    return isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.ActorUnavailableError)


@dataclass
class RemoteRoleSession:
    """A :class:`RoleSession` whose agent runs in a role actor on a worker host."""

    driver: ClusterDriver
    spec: HolderSpec
    holder: Holder
    on_replaced: Callable[[Holder], None] | None = None
    release: Callable[[], Awaitable[None]] | None = None
    """Called once the session is closed (the hub retires the session's credential)."""
    respec: Callable[[HolderSpec], Awaitable[HolderSpec]] | None = None
    """The spec of the next placement (a fresh role-tools credential: the old copy's is revoked)."""
    calls: TurnCalls | None = None
    """The outbox of relayed role tool calls: read before a turn is taken to have ended
    without a report, and to adopt a lost holder's accepted report instead of re-running."""
    replacements: list[Holder] = field(default_factory=list)
    charge: tuple[str, str | None] | None = None
    """The TASK and task tree the next turns are charged to (the holder's meter)."""
    losses: list[tuple[float, str]] = field(default_factory=list)
    """(monotonic time the driver saw the holder lost, why): the detection, measured."""

    @property
    def session_id(self) -> str | None:
        value = self.holder.info.get("session_id")
        return value if isinstance(value, str) else None

    @property
    def process_group(self) -> int | None:
        return None  # the agent runs on another host; its actor watches it

    def charge_to(self, task_id: str, tree: str | None) -> None:
        self.charge = (task_id, tree)

    async def prompt(self, text: str) -> TurnResult:
        prompt = text
        for attempt in range(RESUME_ATTEMPTS + 1):
            epoch = self.holder.placement.epoch
            try:
                result: TurnResult = await self.holder.handle.prompt.remote(
                    prompt, self.spec.parent_run, self.charge
                )
            except Exception as exc:  # Ray's actor errors are untyped: only a death is retried
                if not _is_actor_death(exc) or attempt == RESUME_ATTEMPTS:
                    if _is_actor_death(exc):
                        raise AgentExited(f"role actor lost: {exc}", returncode=None) from exc
                    raise
                reason = f"{type(exc).__name__} on host {self.holder.placement.host}"
                self.losses.append((time.monotonic(), reason))
                await self._settle(epoch)  # its last calls, accepted while epoch N holds
                if self.respec is not None:
                    self.spec = await self.respec(self.spec)
                self.holder = await self.driver.replace_after_death(self.spec, reason)
                self.replacements.append(self.holder)
                if self.on_replaced is not None:
                    self.on_replaced(self.holder)
                adopted = await self._adopted(epoch, prompt_digest(prompt), reason)
                if adopted is not None:
                    return adopted  # its report was accepted: the turn is not run again
                prompt = resume_text(text, epoch=self.holder.placement.epoch, reason=reason)
                continue
            await self._settle(epoch)
            return result
        raise AssertionError("unreachable")

    async def adopt(self, prompt_sha256: str) -> TurnResult | None:
        """The holder's result of the turn whose prompt has this digest, if it has that turn
        (a restarted coordinator's open turn: :mod:`baton.team.reconcile`); ``None`` when it
        has not, or when the holder is gone and no report of the turn was accepted (the
        turn is then interrupted as before). What the turn's agent recorded while no hub
        could take it is delivered first (the outbox is read before anything is decided)."""
        epoch = self.holder.placement.epoch
        try:
            result: TurnResult | None = await self.holder.handle.adopt.remote(
                prompt_sha256, self.spec.parent_run
            )
        except Exception as exc:  # Ray's actor errors are untyped: only a death is handled
            if not _is_actor_death(exc):
                raise
            log.warning("slot %s: holder lost before its turn was adopted: %s", self.spec.slot, exc)
            result = None
        await self._settle(epoch)
        if result is None:
            return await self._adopted(epoch, prompt_sha256, "its holder is gone")
        return result

    async def _settle(self, epoch: int) -> None:
        """Deliver what the slot's holder of ``epoch`` recorded and no hub took yet."""
        if self.calls is not None:
            await self.calls.settle(self.spec.slot, epoch)

    async def _adopted(self, epoch: int, turn: str, reason: str) -> TurnResult | None:
        """The lost turn's result when its report was accepted under ``epoch`` (the rule of
        :mod:`.delivery`: acceptance before the re-placement closes the turn), else None."""
        if self.calls is None:
            return None
        calls = await self.calls.filed_report(self.spec.slot, epoch, turn)
        if not calls:
            return None
        log.info(
            "slot %s: the report of epoch %d's turn was accepted before %s; adopted, not re-run",
            self.spec.slot,
            epoch,
            reason,
        )
        return TurnResult("completed", stop_reason="end_turn", tool_calls=len(calls))

    async def cancel(self, reason: str) -> None:
        await self.holder.handle.cancel.remote(reason)

    async def close(self) -> None:
        try:
            await self.driver.release(self.spec.slot)
        finally:
            if self.release is not None:
                await self.release()
