"""Drives one prompt turn to its single terminal event: the I/O around :mod:`.turn`.

:class:`TurnDriver` sends ``session/prompt``, waits for the answer within the turn's
deadline, sends ``session/cancel`` when asked (or when the deadline passes), stops the
agent when it ignores the cancel, and settles the turn: open requests cancelled
(their waiters answer ``cancelled``; before any ``session/cancel``, on every path, and
the cancel waits, bounded, until those answers are on the pipe), coalesced text flushed,
open tool calls
settled, usage reported honestly, then exactly one of ``turn.completed``,
``turn.failed``, ``turn.cancelled``. Which one is decided by
:func:`baton.runner.turn.settle`, never by inspecting strings. A session's budget meter
(:mod:`.budget_watch`) admits each turn before its prompt, may stop it at a hard limit
(:data:`~baton.runner.turn.CancelCause.BUDGET`) and counts it before its terminal event.

Length: one turn's I/O from prompt to its one terminal event, every way it can end.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from baton.acp import jsonrpc
from baton.acp.client import AcpClient
from baton.acp.transport import AgentTransport
from baton.errors import AgentExited, RemoteCallError, RemoteProtocolError, UsageError
from baton.events.acp_normalizer import AcpNormalizer
from baton.events.bounds import DIAGNOSTIC_PREVIEW_BYTES, clip_text
from baton.events.model import (
    HarnessDiagnostic,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnSubmitted,
    UsageReported,
)
from baton.jsontypes import JsonMapping
from baton.runner.liveness import DEFAULT_STALL_SECONDS, Liveness
from baton.runner.requests_broker import RequestBroker
from baton.runner.session_events import SessionEvents
from baton.runner.stall_watch import StallWatch
from baton.runner.turn import CancelCause, PromptEnd, Turn, TurnEvent, settle

if TYPE_CHECKING:
    from baton.requests.ledger import RequestRecord
    from baton.runner.approvals import ApprovalGuard
    from baton.runner.budget_watch import BudgetWatch

__all__ = ["CANCEL_GRACE_SECONDS", "TurnDriver", "TurnOutcome", "now_ms"]

CANCEL_GRACE_SECONDS = 5.0
"""How long an agent has to stop after ``session/cancel`` before it is killed."""
REPLY_GRACE_SECONDS = 2.0
"""How long a cancel waits for pending requests' ``cancelled`` answers to be written."""

REPLY_WRITE_GRACE_SECONDS = 2.0
"""How long a turn's end waits for a reply still being written to the agent (one that is
written is always recorded ``delivered`` before the turn cancels what is left)."""

Terminal = TurnCompleted | TurnFailed | TurnCancelled


def now_ms() -> float:
    """The running loop's clock, in ms: every wait of a turn is a timer on that clock."""
    return asyncio.get_running_loop().time() * 1000.0


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended; mirrors the one terminal event."""

    turn_id: str
    status: Literal["completed", "failed", "cancelled"]
    stop_reason: str | None = None
    error: str | None = None
    tool_calls: int = 0
    usage: UsageReported | None = None
    """The turn's reported token usage; ``None`` when the agent reported none."""
    files_written: tuple[str, ...] = ()
    """Workspace-relative files the agent wrote through ``fs/write_text_file``."""
    unapproved_mutations: int = 0
    """Mutations no recorded decision allowed (``security.unapproved_mutation``), not
    counting those a profile with ``agent_approves`` expects."""
    budget: str | None = None
    """The budget limit that cancelled the turn (``per_run cost_usd $1.02 of $1.00``)."""


@dataclass(slots=True)
class _Prompt:
    """What the driver learnt from the ``session/prompt`` request."""

    end: PromptEnd
    stop_reason: str | None = None
    usage: Any = None
    error: BaseException | None = None
    stopped_on_cancel: bool = False


@dataclass(kw_only=True, eq=False)
class TurnDriver:
    """The turns of one session, one at a time."""

    client: AcpClient
    transport: AgentTransport
    events: SessionEvents
    normalizer: AcpNormalizer
    requests: RequestBroker
    replies_settled: Callable[[str, float], Awaitable[None]] | None = None
    """Waits until the turn's written replies are recorded (the client methods')."""
    cancel_grace: float = CANCEL_GRACE_SECONDS
    approvals: ApprovalGuard | None = None
    replies_written: Callable[[Sequence[RequestRecord], float], Awaitable[None]] | None = None
    stall_timeout: float | None = None
    """Silence (seconds) before the running turn gets ``turn.stalled`` (None: the default)."""
    budget: BudgetWatch | None = None
    """The session's meter: admits each turn, stops one at a hard limit."""
    _watch: StallWatch | None = field(default=None, init=False)
    _stopping: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        if self.budget is not None:
            self.budget.stop = self._budget_stop

    # ------------------------------------------------------------------ public

    @property
    def watch(self) -> StallWatch | None:
        """The running turn's silence watch (``None`` between turns)."""
        return self._watch

    async def run(self, prompt: str | Sequence[JsonMapping], *, timeout: float) -> TurnOutcome:
        events = self.events
        if events.turn is not None:
            raise UsageError("a turn is already running in this session; baton does not queue")
        session_id = events.agent_session_id
        assert session_id is not None
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        data = text.encode("utf-8", errors="surrogatepass")
        turn = Turn(turn_id=f"turn-{uuid.uuid4().hex[:12]}", started_ms=now_ms())
        if self.budget is not None:  # a limit already reached refuses it (BudgetRefused)
            await self.budget.admit(turn.turn_id, turn.started_ms / 1000.0)
        events.turn = turn
        files_before = frozenset(events.stats.files_written)
        tool_calls_before = self.normalizer.tool_calls
        events.stats.turns += 1
        await events.drafts(self.normalizer.begin_turn(session_id, turn.turn_id))
        await events.emit(
            TurnSubmitted(
                prompt_preview=clip_text(events.redactor.text(text), 400),
                prompt_bytes=len(data),
                prompt_sha256=hashlib.sha256(data).hexdigest(),
            )
        )
        self._watch_turn(turn, timeout)
        try:
            try:
                turn.request = await self.client.start_prompt(session_id, blocks)
                ended = await self._await(turn, turn.request, timeout)
            except AgentExited as exc:  # the prompt could not even be written
                ended = _Prompt(PromptEnd.EXITED, error=exc)
            except asyncio.CancelledError:
                # The caller is going away: never leave the agent running a turn.
                await self.kill("the caller was cancelled", cause=CancelCause.INTERRUPTED)
                turn.fire(TurnEvent.CANCELLED)
                outcome = TurnCancelled(
                    reason="baton was interrupted",
                    duration_ms=turn.elapsed_ms(now_ms()),
                    forced=True,
                )
                await self._finish(turn, outcome, None, tool_calls_before, files_before)
                raise
            terminal = self._terminal(turn, ended, timeout)
            return await self._finish(turn, terminal, ended.usage, tool_calls_before, files_before)
        finally:
            await self._unwatch()

    async def cancel(self, reason: str, cause: CancelCause = CancelCause.USER) -> None:
        """Ask the agent to stop the running turn (ACP ``session/cancel``)."""
        turn = self.events.turn
        if turn is None or turn.done:
            return
        turn.ask_stop(cause, reason)
        await self._cancel_asks(turn, reason, before_cancel=True)
        await self._send_cancel()

    async def _budget_stop(self, reason: str) -> None:
        """A hard limit reached mid-turn: Ctrl-C's ``session/cancel`` from a task of its
        own (this runs inside the reader's batch), a kill if the agent ignores it."""
        turn = self.events.turn
        if turn is None or turn.done:
            return
        turn.ask_stop(CancelCause.BUDGET, reason)  # the cause is recorded now, first
        loop = asyncio.get_running_loop()

        async def stop() -> None:
            await self.cancel(reason, CancelCause.BUDGET)
            request = turn.request
            if request is not None and not request.done():
                done, _ = await asyncio.wait({request}, timeout=self.cancel_grace)
                if not done and not turn.done:
                    await self.kill(f"the agent ignored session/cancel for {self.cancel_grace:g}s")

        task = loop.create_task(stop(), name="budget-stop")
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def kill(self, reason: str, *, cause: CancelCause = CancelCause.IGNORED) -> None:
        """Stop the agent now (it ignored cancel, or baton is leaving)."""
        turn = self.events.turn
        if turn is not None and not turn.done:
            if turn.cause is None:
                turn.cause = cause
            turn.mark_killed(reason)
        await self.transport.kill()
        await self.events.emit(
            HarnessDiagnostic(
                category="killed",
                summary=clip_text(reason),
                stderr_preview=self.stderr_preview(),
                exit_code=self.transport.returncode,
            ),
            turn_id=turn.turn_id if turn else None,
        )

    def stderr_preview(self) -> str:
        """Redact the whole ring, then cut at a line start (a tail could begin mid-secret)."""
        ring = self.transport.stderr
        return self.events.redactor.preview(
            ring.tail(ring.capacity),
            DIAGNOSTIC_PREVIEW_BYTES,
            whole=ring.total_bytes <= ring.capacity,
        )

    # ---------------------------------------------------------------- waiting

    def _watch_turn(self, turn: Turn, limit: float) -> None:
        """Start the turn's silence watch (:mod:`baton.runner.stall_watch`)."""
        started = turn.started_ms
        deadline = started + limit * 1000.0 if math.isfinite(limit) else None
        watch = StallWatch(
            liveness=Liveness.start(
                self.stall_timeout or DEFAULT_STALL_SECONDS, started, deadline_ms=deadline
            ),
            turn_id=turn.turn_id,
            emit=lambda payload: self.events.emit(payload, turn_id=turn.turn_id),
            clock=now_ms,
        )
        self._watch = watch
        watch.start(self.client.conn, self.requests)

    async def _unwatch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            await watch.stop()

    async def _await(self, turn: Turn, request: asyncio.Future[Any], limit: float) -> _Prompt:
        done, _ = await asyncio.wait({request}, timeout=limit)
        if not done:
            turn.ask_stop(CancelCause.TIMEOUT, f"turn timeout after {limit:g}s")
            # As on every cancel path: pending requests are answered `cancelled` first, so
            # an agent blocked on one can see the session/cancel that follows (ACP §1.7).
            await self._cancel_asks(turn, turn.reason or "turn timeout", before_cancel=True)
            await self._send_cancel()
            done, _ = await asyncio.wait({request}, timeout=self.cancel_grace)
            if not done:
                await self.kill(f"the agent ignored session/cancel for {self.cancel_grace:g}s")
                # The kill fails the request (the agent is gone) or its answer lands.
                await asyncio.wait({request}, timeout=self.cancel_grace)
            return _Prompt(PromptEnd.TIMED_OUT, stopped_on_cancel=bool(done))
        try:
            raw = request.result()
        except RemoteCallError as exc:
            return _Prompt(PromptEnd.REMOTE_ERROR, error=exc)
        except AgentExited as exc:
            await self.transport.wait(self.transport.exit_grace)  # stdout closes before reaping
            return _Prompt(PromptEnd.EXITED, error=exc)
        try:
            parsed = self.client.prompt_response(raw)
        except RemoteProtocolError as exc:
            return _Prompt(PromptEnd.MALFORMED, error=exc)
        usage = _prompt_usage(raw)
        return _Prompt(PromptEnd.ANSWERED, stop_reason=parsed.stop_reason, usage=usage)

    def _terminal(self, turn: Turn, ended: _Prompt, limit: float) -> Terminal:
        ending = settle(turn.state, ended.end, ended.stop_reason)
        turn.fire(ending.event)
        duration = turn.elapsed_ms(now_ms())
        if ending.event is TurnEvent.COMPLETE:
            return TurnCompleted(stop_reason=ended.stop_reason or "end_turn", duration_ms=duration)
        if ending.event is TurnEvent.CANCELLED:
            return TurnCancelled(
                reason=turn.reason or "the agent cancelled the turn",
                duration_ms=duration,
                forced=ending.forced,
            )
        return self._failure(ended, limit, duration)

    def _failure(self, ended: _Prompt, limit: float, duration: int) -> TurnFailed:
        exc = ended.error
        if ended.end is PromptEnd.TIMED_OUT:
            how = (
                "the agent stopped on session/cancel"
                if ended.stopped_on_cancel
                else "its process was killed"
            )
            return TurnFailed(
                error_type="AgentTimeout",
                message=f"the turn exceeded its {limit:g}s limit; {how}",
                duration_ms=duration,
                stderr_preview=self.stderr_preview(),
            )
        if ended.end is PromptEnd.MALFORMED:
            return TurnFailed(
                error_type="RemoteProtocolError", message=clip_text(str(exc)), duration_ms=duration
            )
        if ended.end is PromptEnd.EXITED:
            code = self.transport.returncode
            message = (
                f"the agent exited during the turn (exit code {code})"
                if code is not None
                else f"the agent closed its connection during the turn: {exc}"
            )
            return TurnFailed(
                error_type="AgentExited",
                message=message,
                duration_ms=duration,
                stderr_preview=self.stderr_preview(),
            )
        auth = isinstance(exc, RemoteCallError) and exc.code == jsonrpc.AUTH_REQUIRED
        return TurnFailed(
            error_type="AuthRequired" if auth else "RemoteCallError",
            message=clip_text(self.events.redactor.text(str(exc))),
            duration_ms=duration,
            stderr_preview=self.stderr_preview(),
        )

    # -------------------------------------------------------------- settling

    async def _finish(
        self,
        turn: Turn,
        outcome: Terminal,
        usage: Any,
        tool_calls_before: int,
        files_before: frozenset[str],
    ) -> TurnOutcome:
        events, normalizer = self.events, self.normalizer
        await self._unwatch()  # nothing of the watch comes after the terminal event
        await self._cancel_asks(turn, f"the turn ended ({outcome.TYPE})")
        drafts = normalizer.flush()
        if not isinstance(outcome, TurnCompleted):
            status = "cancelled" if isinstance(outcome, TurnCancelled) else "failed"
            drafts.extend(normalizer.settle_open(status, now_ms()))  # each on its own turn
        drafts.extend(normalizer.end_turn(usage))
        turn_usage = next(
            (
                d.payload
                for d in drafts
                if isinstance(d.payload, UsageReported)
                and d.payload.available
                and d.payload.scope == "turn"
            ),
            None,
        )
        await events.drafts(drafts)
        if self.budget is not None:
            await self.budget.settle(
                turn.turn_id,
                drafts,
                tool_calls=normalizer.tool_calls - tool_calls_before,
                seconds=turn.elapsed_ms(now_ms()) / 1000.0,
            )
        await events.emit(outcome, turn_id=turn.turn_id)
        stats = events.stats
        stats.usage_available = stats.usage_available or normalizer.usage_reported
        tool_calls = normalizer.tool_calls - tool_calls_before
        stats.tool_calls += tool_calls
        events.last_turn, events.turn = turn, None
        return TurnOutcome(
            turn_id=turn.turn_id,
            status=_STATUS[type(outcome)],
            stop_reason=outcome.stop_reason if isinstance(outcome, TurnCompleted) else None,
            error=outcome.message if isinstance(outcome, TurnFailed) else None,
            tool_calls=tool_calls,
            usage=turn_usage,
            files_written=tuple(sorted(stats.files_written - files_before)),
            unapproved_mutations=self.approvals.unapproved(turn.turn_id) if self.approvals else 0,
            budget=(
                self.budget.breach.describe()
                if self.budget is not None
                and self.budget.breach is not None
                and turn.cause is CancelCause.BUDGET
                else None
            ),
        )

    async def _cancel_asks(self, turn: Turn, reason: str, *, before_cancel: bool = False) -> None:
        """Open requests of this turn are cancelled; their waiters answer ``cancelled``.

        A reply the agent already has is recorded ``delivered`` first, never cancelled.
        ``before_cancel``: a ``session/cancel`` follows, so wait (briefly) until the
        ``cancelled`` answers are on the agent's pipe: ACP has the client answer pending
        requests first.
        """
        if self.replies_settled is not None:
            await self.replies_settled(turn.turn_id, REPLY_WRITE_GRACE_SECONDS)
        records = await self.requests.cancel_turn(
            turn.turn_id, reason, self.events.for_turn(turn.turn_id)
        )
        if before_cancel and records and self.replies_written is not None:
            await self.replies_written(records, REPLY_GRACE_SECONDS)

    async def _send_cancel(self) -> None:
        session_id = self.events.agent_session_id
        if session_id is not None:
            await self.client.cancel(session_id)


def _prompt_usage(result: Any) -> Any:
    """A prompt result's usage: ``usage`` (ACP, unstable), else ``_meta.usage``."""
    if not isinstance(result, dict):
        return None
    usage = result.get("usage")
    if usage is None and isinstance(result.get("_meta"), dict):
        usage = result["_meta"].get("usage")
    return usage


_STATUS: dict[type[Terminal], Literal["completed", "failed", "cancelled"]] = {
    TurnCompleted: "completed",
    TurnFailed: "failed",
    TurnCancelled: "cancelled",
}
