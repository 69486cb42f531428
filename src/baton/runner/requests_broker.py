"""Where an agent's request for a decision goes: policy, then the durable ledger.

:class:`RequestBroker` is the runner's single path for ``session/request_permission``,
``cursor/ask_question``, ``cursor/create_plan`` and ``elicitation/create``:

1. the firewall says what the request really is and the policy decides (allow / deny /
   escalate, with the rule that made it); a real tool call the policy escalates is
   answered by a human's live grant when one covers it (``rule = "grant:<id>"``, its use
   counted in the answer's transaction), always with the agent's ``allow_once``;
2. the request is persisted in the ledger **before** anything shows it, in one
   transaction with its ``request.created`` event (the turn's journal);
3. an automatic decision is recorded as an answer (with its ``request.answered``,
   atomically); an escalated one waits for a human: the terminal (when there is one)
   or any other process through the ledger (``baton answer``, the dashboard, whose
   own run records the answer), bounded by ``wait_timeout``;
4. the agent's reply is built from the validated answer; the request becomes
   ``delivered`` only once that reply was written to the agent's pipe.

Steps 1–3 up to the wait are :meth:`RequestBroker.admit`, run inline by the reader in
arrival order (a request's ``request.created`` precedes the events of the frames after
it); the wait and the reply are :meth:`RequestBroker.settle`, which may take a human's
time while the update stream goes on.

When a turn ends, its open requests are cancelled in the ledger, which wakes the
waiters; they answer the agent ``cancelled`` (ACP §1.7).

A request nobody answers by its deadline (``wait_timeout``) is ``expired`` under
``baton run``; in the team loop (``on_deadline="refuse"``) it becomes a recorded
refusal instead (``decided_by="headless"``, ``rule="deadline"``): the agent hears
"denied" (or skipped, rejected, declined) and its turn goes on or ends as it decides,
and :attr:`RequestBroker.refusals` tells the team loop why, for the task and the leader.

Length: one path from an agent's request to its reply (admit, then settle), kept whole so
the order of persist → show → answer → deliver reads in one place.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from baton.acp.jsonrpc import JsonRpcId
from baton.aiotasks import cancel_and_wait
from baton.errors import RequestError
from baton.events.model import Payload
from baton.jsontypes import JsonValue
from baton.request_model.documents import (
    Answer,
    GrantContext,
    PermissionRequest,
    RequestDocument,
    RequestKind,
    canonical_json,
)
from baton.request_model.errors import InvalidAnswer, InvalidDocument, NotPending, PayloadTooLarge
from baton.requests import payloads, replies
from baton.requests.grant_book import GrantBook
from baton.requests.grants import Grant, Subject, request_subject
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.ledger_changes import GrantSpent
from baton.requests.notify import Notifier, NotifyConfig
from baton.requests.policy import Decision, Policy, tool_call_paths
from baton.requests.states import State

if TYPE_CHECKING:
    from baton.store.tx import Tx

T = TypeVar("T")


class Emit(Protocol):
    """The turn's events: emit one (a view of what happened), or commit a change with its
    events in one transaction (a state change of this process)."""

    async def __call__(self, payload: Payload) -> None: ...

    async def commit(self, payloads: Sequence[Payload], fn: Callable[[Tx], T]) -> T: ...


TERMINAL_RULE = "terminal"
"""The ``rule`` of an answer given at the terminal running ``baton run`` (cf. ``cli``, ``web``)."""

DEADLINE_RULE = "deadline"
"""The ``rule`` of a refusal recorded because nobody answered by the request's deadline."""

OnDeadline = Literal["expire", "refuse"]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asked: bound from the connection and the active turn, never guessed."""

    run_id: str
    connection_id: str
    jsonrpc_id: JsonRpcId
    session_id: str | None
    turn_id: str | None
    workspace: str


class HumanChannel(Protocol):
    """A surface that can answer right now (the terminal running ``baton run``)."""

    async def ask(self, record: RequestRecord) -> Answer | None:
        """The human's answer, or ``None`` if they declined to answer here."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """The reply to send and the record it came from (``None`` for a refusal)."""

    reply: dict[str, Any]
    record: RequestRecord | None


@dataclass(frozen=True, slots=True)
class Admission:
    """A request decided and recorded (:meth:`RequestBroker.admit`), its reply not yet built."""

    document: RequestDocument
    record: RequestRecord
    decision: Decision

    @property
    def waits(self) -> bool:
        """Whether :meth:`RequestBroker.settle` waits for a human."""
        return self.decision.needs_human


class RequestBroker:
    """Policy + ledger + human channels for one run."""

    def __init__(
        self,
        ledger: Ledger,
        policy: Policy,
        *,
        terminal: HumanChannel | None = None,
        wait_timeout: float | None = None,
        notify: NotifyConfig | None = None,
        notifier: Notifier | None = None,
        family: str | None = None,
        role: str | None = None,
        grants: GrantBook | None = None,
        on_deadline: OnDeadline = "expire",
    ) -> None:
        self.ledger = ledger
        self.policy = policy
        self.terminal = terminal
        self.wait_timeout = wait_timeout
        """Seconds to wait in the ledger for another process; 0 = nobody to ask."""
        self.notifier = notifier or Notifier(notify or NotifyConfig(), store=ledger.store)
        self.family = family
        """The agent family, for the firewall's knowledge of its habits."""
        self.role = role
        """The team role this session works for (None outside ``baton up``)."""
        self.task: str | None = None
        """The task tree the session works on now (set by the team loop before each turn)."""
        self.grants = grants or GrantBook(ledger.store, clock=ledger.clock)
        self.on_deadline: OnDeadline = on_deadline
        self.refusals: list[tuple[str | None, str]] = []
        """``(turn id, why)`` of each request refused at its deadline (``on_deadline="refuse"``)."""
        self._cancelled_turns: set[str] = set()
        """Turns :meth:`cancel_turn` cancels here: their requests' ``request.cancelled`` goes
        with that change, so their waiters must not announce it again. Marked before the
        ledger write, which wakes the waiters before it returns."""
        self._human_watchers: list[Callable[[str | None, bool], None]] = []

    def refusals_of(self, turn_id: str | None) -> list[str]:
        """Why requests of ``turn_id`` were refused at their deadline (and forget them)."""
        mine = [why for turn, why in self.refusals if turn == turn_id]
        self.refusals = [(turn, why) for turn, why in self.refusals if turn != turn_id]
        return mine

    def watch_humans(self, watcher: Callable[[str | None, bool], None]) -> Callable[[], None]:
        """Call ``watcher(turn_id, True)`` when a request starts waiting for a human and
        ``(turn_id, False)`` when it stops (a turn's silence meanwhile is baton's, not the
        agent's: :mod:`baton.runner.stall_watch`). Returns the unsubscribe."""
        self._human_watchers.append(watcher)
        return lambda: self._human_watchers.remove(watcher)

    def _human_wait(self, turn_id: str | None, waiting: bool) -> None:
        for watcher in list(self._human_watchers):
            watcher(turn_id, waiting)

    @property
    def human_available(self) -> bool:
        return self.terminal is not None or self.wait_timeout is None or self.wait_timeout > 0

    def _in_context(self, document: RequestDocument, ctx: RequestContext) -> RequestDocument:
        """A permission request carries where it was asked (the scopes a grant may take)."""
        if not isinstance(document, PermissionRequest):
            return document
        context = GrantContext(task=self.task, role=self.role, workspace=ctx.workspace)
        return document.model_copy(update={"context": context})

    @staticmethod
    def _subject(document: PermissionRequest, workspace: str) -> Subject:
        """The call's normalized subject, its paths resolved (a symlink out is outside)."""
        root = os.path.realpath(workspace)
        paths = [
            os.path.realpath(p if os.path.isabs(p) else os.path.join(root, p))
            for p in tool_call_paths(document)
        ]
        return request_subject(document, root, paths)

    async def _grant_for(
        self, document: RequestDocument, decision: Decision, ctx: RequestContext, skip: list[str]
    ) -> Grant | None:
        """A live grant that answers a real tool call the policy escalated (None: none)."""
        if (
            not isinstance(document, PermissionRequest)
            or decision.outcome != "escalate"
            or decision.request_class != "tool_call"
            or decision.rule.endswith(":outside-workspace")
        ):
            return None
        return await self.grants.matching(
            self._subject(document, ctx.workspace),
            run_id=ctx.run_id,
            turn_id=ctx.turn_id,
            task=self.task,
            role=self.role,
            skip=skip,
        )

    async def admit(self, document: RequestDocument, ctx: RequestContext, emit: Emit) -> Admission:
        """Decide and persist now (in arrival order); an automatic decision is recorded too.

        Raises :class:`PayloadTooLarge` (refused visibly first) for an oversize document.
        """
        document = self._in_context(document, ctx)
        decision = self.policy.decision_for(
            document,
            workspace=ctx.workspace,
            human_available=self.human_available,
            family=self.family,
        )
        spent: list[str] = []
        grant = await self._grant_for(document, decision, ctx, spent)
        waits = (
            grant is None
            and decision.needs_human
            and self.wait_timeout is not None
            and self.wait_timeout > 0
        )
        try:
            record = await self.ledger.create(
                document,
                run_id=ctx.run_id,
                connection_id=ctx.connection_id,
                jsonrpc_id=ctx.jsonrpc_id,
                session_id=ctx.session_id,
                turn_id=ctx.turn_id,
                rule=f"grant:{grant.grant_id}" if grant is not None else decision.rule,
                # The waiter's deadline belongs to the request (surfaces show a countdown).
                expires_at=self.ledger.now(after=self.wait_timeout or 0) if waits else None,
                journal=emit,
            )
        except PayloadTooLarge as exc:
            await self.refuse(document.kind, str(exc), ctx, emit, document=document, oversize=exc)
            raise
        while grant is not None:
            by_grant = Decision(
                "allow",
                f"grant:{grant.grant_id}",
                f"granted: {grant.describe()}",
                request_class=decision.request_class,
                grant=grant.grant_id,
            )
            try:
                result = await self.ledger.answer(
                    record.request_id,
                    by_grant.answer(document),
                    decided_by="policy",
                    rule=by_grant.rule,
                    reason=by_grant.reason,
                    grant_use=grant.grant_id,
                    journal=emit,
                )
            except GrantSpent:  # revoked, expired or used up since it was read
                spent.append(grant.grant_id)
                grant = await self._grant_for(document, decision, ctx, spent)
                continue
            except NotPending:
                record = await self.ledger.get(record.request_id)
                await self._show(record, emit)
                return Admission(document, record, by_grant)
            return Admission(document, result.record, by_grant)
        if not decision.needs_human:
            try:
                result = await self.ledger.answer(
                    record.request_id,
                    decision.answer(document),
                    decided_by=decision.decided_by,
                    rule=decision.rule,
                    reason=decision.reason,
                    journal=emit,
                )
                record = result.record
            except NotPending:
                record = await self.ledger.get(record.request_id)
                await self._show(record, emit)
            except InvalidAnswer as exc:  # e.g. a denial, but the agent offers no reject option
                record = await self.ledger.cancel(
                    record.request_id, f"{decision.rule}: {exc}", journal=emit
                )
        return Admission(document, record, decision)

    async def settle(self, admission: Admission, emit: Emit) -> Resolution:
        """Wait for the human if the decision needs one; return the agent's reply."""
        document, record, decision = admission.document, admission.record, admission.decision
        if decision.needs_human:
            self._human_wait(record.turn_id, True)
            try:
                self.notifier.request(record)  # in the background, at most once
                record, here = await self._wait_for_human(record, emit, escalated_by=decision.rule)
            finally:
                self._human_wait(record.turn_id, False)
            if not here:  # decided elsewhere: shown in this run
                await self._show(record, emit, escalated_by=decision.rule)
        return self.reply(document, record)

    @staticmethod
    def reply(document: RequestDocument, record: RequestRecord) -> Resolution:
        """The agent's reply for a record in its final state."""
        if record.state is State.ANSWERED and record.answer is not None:
            return Resolution(replies.reply_for(document, record.answer), record)
        if record.state is State.EXPIRED:
            return Resolution(replies.expired_reply(document), record)
        return Resolution(replies.cancelled_reply(document), record)

    async def _show(
        self, record: RequestRecord, emit: Emit, *, escalated_by: str | None = None
    ) -> None:
        """Announce a state another writer recorded, unless :meth:`cancel_turn` here did
        (its ``request.cancelled`` went with that change: one event per cancellation)."""
        if record.state is State.CANCELLED and record.turn_id in self._cancelled_turns:
            return
        await emit(payloads.for_state(record, escalated_by=escalated_by))

    async def _wait_for_human(
        self, record: RequestRecord, emit: Emit, *, escalated_by: str | None
    ) -> tuple[RequestRecord, bool]:
        """The decided record, and whether this process recorded the decision (its event
        then went with it)."""
        request_id = record.request_id
        waiters: set[asyncio.Task[Any]] = {
            asyncio.create_task(self.ledger.wait_answer(request_id, self.wait_timeout))
        }
        if self.terminal is not None:
            waiters.add(asyncio.create_task(self.terminal.ask(record)))
        try:
            while waiters:
                done, waiters = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    try:
                        value = task.result()
                    except TimeoutError:
                        return await self._deadline(record, emit)
                    if isinstance(value, RequestRecord):
                        return value, False
                    if value is not None:
                        # If another surface answered first, the ledger's answer stands.
                        try:
                            result = await self.ledger.answer(
                                request_id,
                                value,
                                decided_by="human",
                                rule=TERMINAL_RULE,
                                escalated_by=escalated_by,
                                journal=emit,
                            )
                            return result.record, not result.replayed
                        except (NotPending, RequestError):
                            return await self.ledger.get(request_id), False
            return await self.ledger.get(request_id), False
        finally:
            await cancel_and_wait(waiters)

    async def _deadline(self, record: RequestRecord, emit: Emit) -> tuple[RequestRecord, bool]:
        """Nobody answered in time: expire it, or (team loop) record a refusal. An answer
        that landed first wins either way."""
        why = f"no answer within {self.wait_timeout:g}s"
        request_id = record.request_id
        if self.on_deadline == "expire" or record.document is None:
            expired = await self.ledger.expire_if_pending(request_id, why, journal=emit)
            return expired, expired.state is State.EXPIRED
        refusal = Decision("deny", DEADLINE_RULE, f"{why}: refused", decided_by="headless")
        try:
            result = await self.ledger.answer(
                request_id,
                refusal.answer(record.document),
                decided_by="headless",
                rule=DEADLINE_RULE,
                reason=refusal.reason,
                journal=emit,
            )
        except (NotPending, RequestError):
            return await self.ledger.get(request_id), False
        if not result.replayed:
            self.refusals.append((record.turn_id, f"{record.kind} {record.title!r}: {why}"))
        return result.record, not result.replayed

    async def refuse(
        self,
        kind: RequestKind,
        reason: str,
        ctx: RequestContext,
        emit: Emit,
        *,
        document: RequestDocument | None = None,
        raw: JsonValue = None,
        oversize: PayloadTooLarge | None = None,
    ) -> RequestRecord:
        """Record a request refused on arrival (malformed, oversize, stale) visibly."""
        text = canonical_json(document.model_dump(mode="json")) if document else canonical_json(raw)
        data = text.encode("utf-8", errors="surrogatepass")
        record = await self.ledger.record_rejected(
            kind,
            reason=reason,
            run_id=ctx.run_id,
            connection_id=ctx.connection_id,
            jsonrpc_id=ctx.jsonrpc_id,
            session_id=ctx.session_id,
            turn_id=ctx.turn_id,
            title=f"{kind} request",
            size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            document=None if oversize else document,
            journal=emit,
        )
        if oversize is not None:
            await emit(payloads.oversize(oversize, subject=f"{kind} request {record.request_id}"))
        return record

    async def delivered(self, record: RequestRecord, emit: Emit) -> None:
        if record.state is not State.ANSWERED:
            return
        await self.ledger.mark_delivered(record.request_id, journal=emit)

    async def cancel_turn(self, turn_id: str, reason: str, emit: Emit) -> list[RequestRecord]:
        """Cancel the turn's open requests (one ``request.cancelled`` each); return them."""
        self._cancelled_turns.add(turn_id)
        return await self.ledger.cancel_for_turn(turn_id, reason, journal=emit)


__all__ = [
    "DEADLINE_RULE",
    "Admission",
    "HumanChannel",
    "InvalidDocument",
    "RequestBroker",
    "RequestContext",
    "Resolution",
]
