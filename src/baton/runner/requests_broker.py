"""Where an agent's request for a decision goes: policy, then the durable ledger.

:class:`RequestBroker` is the runner's single path for ``session/request_permission``,
``cursor/ask_question``, ``cursor/create_plan`` and ``elicitation/create``:

1. the policy decides (allow / deny / escalate, with the rule that made it);
2. the request is persisted in the ledger **before** anything shows it, in one
   transaction with its ``request.created`` event (the turn's journal);
3. an automatic decision is recorded as an answer (with its ``request.answered``,
   atomically); an escalated one waits for a human: the terminal (when there is one)
   or any other process through the ledger (``baton answer``, the dashboard, whose
   own run records the answer), bounded by ``wait_timeout``;
4. the agent's reply is built from the validated answer; the request becomes
   ``delivered`` only once that reply was written to the agent's pipe.

When a turn ends, its open requests are cancelled in the ledger, which wakes the
waiters; they answer the agent ``cancelled`` (ACP §1.7).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from baton.acp.jsonrpc import JsonRpcId
from baton.errors import RequestError
from baton.events.model import Payload
from baton.requests import payloads, replies
from baton.requests.errors import InvalidDocument, NotPending, PayloadTooLarge
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.model import Answer, RequestDocument, canonical_json
from baton.requests.notify import NotifyConfig, notify_if_escalated
from baton.requests.policy import Policy
from baton.requests.states import State

T = TypeVar("T")


class Emit(Protocol):
    """The turn's events: emit one (a view of what happened), or commit a change with its
    events in one transaction (a state change of this process)."""

    async def __call__(self, payload: Payload) -> None: ...

    async def commit(self, payloads: Any, fn: Callable[[Any], T]) -> T: ...


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
    ) -> None:
        self.ledger = ledger
        self.policy = policy
        self.terminal = terminal
        self.wait_timeout = wait_timeout
        """Seconds to wait in the ledger for another process; 0 = nobody to ask."""
        self.notify = notify or NotifyConfig()

    @property
    def human_available(self) -> bool:
        return self.terminal is not None or self.wait_timeout is None or self.wait_timeout > 0

    async def resolve(
        self, document: RequestDocument, ctx: RequestContext, emit: Emit
    ) -> Resolution:
        """Decide, persist, wait if needed; return the agent's reply."""
        decision = self.policy.decide(
            document, workspace=ctx.workspace, human_available=self.human_available
        )
        document = decision.granted(document)
        try:
            record = await self.ledger.create(
                document,
                run_id=ctx.run_id,
                connection_id=ctx.connection_id,
                jsonrpc_id=ctx.jsonrpc_id,
                session_id=ctx.session_id,
                turn_id=ctx.turn_id,
                journal=emit,
            )
        except PayloadTooLarge as exc:
            await self.refuse(document.kind, str(exc), ctx, emit, document=document, oversize=exc)
            raise
        if decision.needs_human:
            if self.notify.enabled:
                for diagnostic in await notify_if_escalated(decision, record, self.notify):
                    await emit(diagnostic)
            record, here = await self._wait_for_human(record, emit)
            if not here:
                await emit(payloads.for_state(record))  # decided elsewhere: shown in this run
        else:
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
                await emit(payloads.for_state(record))
        if record.state is State.ANSWERED and record.answer is not None:
            return Resolution(replies.reply_for(document, record.answer), record)
        return Resolution(replies.cancelled_reply(document), record)

    async def _wait_for_human(
        self, record: RequestRecord, emit: Emit
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
                        expired = await self.ledger.expire_if_pending(
                            request_id, f"no answer within {self.wait_timeout:g}s", journal=emit
                        )
                        return expired, expired.state is State.EXPIRED
                    if isinstance(value, RequestRecord):
                        return value, False
                    if value is not None:
                        # If another surface answered first, the ledger's answer stands.
                        try:
                            result = await self.ledger.answer(
                                request_id,
                                value,
                                decided_by="human",
                                rule="answered at the terminal",
                                journal=emit,
                            )
                            return result.record, not result.replayed
                        except (NotPending, RequestError):
                            return await self.ledger.get(request_id), False
            return await self.ledger.get(request_id), False
        finally:
            for task in waiters:
                task.cancel()
            for task in waiters:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def refuse(
        self,
        kind: Any,
        reason: str,
        ctx: RequestContext,
        emit: Emit,
        *,
        document: RequestDocument | None = None,
        raw: Any = None,
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

    async def cancel_turn(self, turn_id: str, reason: str, emit: Emit) -> None:
        await self.ledger.cancel_for_turn(turn_id, reason, journal=emit)


__all__ = ["HumanChannel", "InvalidDocument", "RequestBroker", "RequestContext", "Resolution"]
