"""Metering one session against its budgets: the ledger's entries committed, limits checked.

:class:`BudgetWatch` is the session's usage ledger at work (``baton.budgets.ledger``):

* :meth:`~BudgetWatch.admit`, before a prompt is sent: the turn is charged
  (``turn_start``) in a transaction that first checks every limited scope; a scope
  that already reached a limit refuses the turn (:class:`~baton.errors.BudgetRefused`,
  nothing charged, ``budget.exceeded`` with action ``refused``);
* :meth:`~BudgetWatch.check`, after each run of the agent's notifications is emitted
  (the session's ingest batch, :mod:`.session_events`), only when :meth:`due` says
  something could have moved (a ``usage_update`` arrived, the tool calls reached the
  next threshold; O(1), so the flood path does not pay for budgets): a running total
  that moved is charged (``usage``) in a transaction that reads every scope's spend,
  the live tool calls and minutes are added, and a hard limit reached **cancels the
  running turn** at once through the same ``session/cancel`` path as Ctrl-C
  (:data:`~baton.runner.turn.CancelCause.BUDGET`); a soft one is announced;
* a timer for ``minutes`` (nothing may arrive from a silent agent);
* :meth:`~BudgetWatch.settle`, before the turn's terminal event: its tokens, tool
  calls and seconds (``turn_end``), dollars estimated off the loop when nothing
  priced them.

The spend read in the charging transaction includes every other run's committed rows
(the store's one write lock), so two runs sharing a window both see its end.
Announcements (``budget.threshold``, ``budget.exceeded``) go to the run's stream; the
human is notified once per threshold (a mark in the store), never again by a restart.

Length: the meter's moments (admit, check, the minutes timer, settle) and what they
announce read and update the same standings; apart, each would need the other's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from baton.agent_profile import AgentProfile
from baton.budgets.ledger import Charge, TokenCounts, UsageLedger, needs_price, priced
from baton.budgets.limits import DIMENSIONS, Dimension
from baton.budgets.rules import Breach, ScopeKey, ScopeStanding, Spend, crossed, raise_hint
from baton.errors import BudgetRefused, ControlFlow
from baton.events.acp_normalizer import AcpNormalizer, Draft
from baton.events.bounds import clip_text
from baton.events.model import (
    BudgetExceeded,
    BudgetThreshold,
    BudgetUnmetered,
    CanonicalEvent,
    ExceededAction,
    HarnessDiagnostic,
    UsageCounted,
    UsageReported,
)
from baton.events.sequencer import utc_now
from baton.jsontypes import JsonMapping
from baton.runner.budget_plan import BudgetPlan, credential_key
from baton.store import budget_sql
from baton.store.tx import Tx

if TYPE_CHECKING:
    from baton.runner.handshake import Opened
    from baton.runner.session_events import SessionEvents

__all__ = ["BudgetWatch"]

log = logging.getLogger(__name__)

NO_MARK = math.inf


class _Refused(ControlFlow):
    """A scope reached a limit: the charging transaction rolls back, the turn is refused."""

    def __init__(self, breach: Breach) -> None:
        super().__init__(breach.describe())
        self.breach = breach


@dataclass(kw_only=True, eq=False)
class BudgetWatch:
    """One session's meter (see the module)."""

    plan: BudgetPlan
    events: SessionEvents
    normalizer: AcpNormalizer
    ledger: UsageLedger
    stop: Callable[[str], Awaitable[None]] | None = field(default=None, init=False)
    """Cancels the running turn for a budget (the turn driver sets it)."""
    breach: Breach | None = field(default=None, init=False)
    """The hard limit that stopped the current turn, if one did."""
    _usage_seen: int = field(default=0, init=False)
    _tool_mark: float = field(default=NO_MARK, init=False)
    _tools_base: int = field(default=0, init=False)
    _started: float | None = field(default=None, init=False)
    """Loop time (s) the running turn started; None between turns."""
    _standings: list[ScopeStanding] = field(default_factory=list, init=False)
    _said: set[tuple[ScopeKey, str, str]] = field(default_factory=set, init=False)
    _timer: asyncio.TimerHandle | None = field(default=None, init=False)
    _unmetered_said: bool = field(default=False, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    @classmethod
    def for_session(
        cls,
        plan: BudgetPlan,
        profile: AgentProfile,
        secret_values: Sequence[str],
        *,
        events: SessionEvents,
        normalizer: AcpNormalizer,
    ) -> BudgetWatch:
        """A session's meter, its ledger charged to its credential's window."""
        ledger = UsageLedger(
            profile=profile.name,
            family=profile.family,
            agent_version=profile.version,
            model=profile.model,
            charge=Charge(credential_key(profile.name, secret_values)),
        )
        return cls(plan=plan, events=events, normalizer=normalizer, ledger=ledger)

    # ------------------------------------------------------------------ scope

    def charge_to(self, *, task_id: str | None, tree: str | None, role: str | None) -> None:
        """Where the next turns are charged (a team's TASK, task tree and role)."""
        credential = self.ledger.charge.credential
        self.ledger.charge = Charge(credential, task_id=task_id, tree=tree, role=role)

    def _scopes(self) -> list[ScopeKey]:
        """The scopes the session's spend is checked in (those with limits)."""
        config, charge = self.plan.config, self.ledger.charge
        keys: list[ScopeKey] = []
        if config.per_run:
            keys.append(ScopeKey("run", self.events.run_id))
        if config.per_task and charge.tree:
            keys.append(ScopeKey("task", charge.tree))
        if config.per_role and charge.role:
            keys.append(ScopeKey("role", charge.role))
        if config.per_window and config.window is not None:
            keys.append(ScopeKey("window", charge.credential))
        return keys

    async def opened(self, opened: Opened) -> None:
        """The agent's version and model once known; a resumed or loaded session goes on
        from its running totals as the store last recorded them."""
        ledger = self.ledger
        info = opened.initialized.agent_info or {}
        ledger.agent_version = ledger.agent_version or _text(info.get("version"))
        ledger.model = ledger.model or session_model(opened.result)
        agent_session_id = opened.session_id
        if opened.how == "new" or not agent_session_id or self.events.emitter.store is None:
            return
        store = self.events.emitter.store
        total, reports = await store.aread(
            lambda tx: budget_sql.last_running_total(tx, agent_session_id)
        )
        self.ledger.restore(total, reports)

    # -------------------------------------------------------------- charging

    async def _charge(
        self, entry: UsageCounted, turn_id: str | None, *, admission: bool = False
    ) -> list[tuple[ScopeStanding, Spend]]:
        """Commit ``entry`` with its ledger row; each checked scope's standing after it
        and its spend before it. ``admission``: refuse (raise :class:`_Refused`, nothing
        committed) when a scope already reached a limit."""
        plan, events = self.plan, self.events
        scopes = self._scopes()
        now = plan.clock()
        delta = Spend.of_entry(entry)
        soft = plan.config.soft

        def build(stamped: Sequence[CanonicalEvent]) -> Callable[[Tx], list[ScopeStanding]]:
            event = stamped[0]
            row = budget_sql.LedgerRow(
                event.run_id, event.seq, now, events.agent_session_id, turn_id
            )

            def fn(tx: Tx) -> list[ScopeStanding]:
                budget_sql.charge(tx, row, entry)
                after = budget_sql.standings(tx, plan.config, scopes, now)
                if admission:
                    for standing in after:
                        before = standing.spend.minus(delta)
                        hard = next(
                            (b for b in _hard(standing.scope, before, standing, soft)), None
                        )
                        if hard is not None:
                            raise _Refused(hard)
                return after

            return fn

        after, _ = await events.emitter.commit_stamped(
            [entry], build, session_id=events.agent_session_id, turn_id=turn_id
        )
        self._standings = after
        return [(s, s.spend.minus(delta)) for s in after]

    async def admit(self, turn_id: str, started: float) -> None:
        """Charge the turn before its prompt is sent, or refuse it (see the module)."""
        self.breach = None
        self._said = {k for k in self._said if k[2] == "soft"}
        try:
            moved = await self._charge(self.ledger.turn_start(), turn_id, admission=True)
        except _Refused as refused:
            breach = refused.breach
            await self._announce(breach, "refused", turn_id)
            hint = f"raise it: {raise_hint(breach)}"
            raise BudgetRefused(_refusal(breach), breach=breach, hint=hint) from None
        self._started = started
        self._tools_base = self.normalizer.tool_calls
        self._usage_seen = self.normalizer.usage_updates
        await self._after(moved, turn_id, live=False)

    def due(self) -> bool:
        """Whether :meth:`check` could find anything new (O(1): the ingest path asks)."""
        normalizer = self.normalizer
        return (
            normalizer.usage_updates != self._usage_seen or normalizer.tool_calls >= self._tool_mark
        )

    async def check(self, batch: Sequence[Draft], turn_id: str | None) -> None:
        """After a batch is emitted: charge running totals that moved, check the limits."""
        if self.normalizer.usage_updates != self._usage_seen:
            self._usage_seen = self.normalizer.usage_updates
            for draft in batch:
                payload = draft.payload
                if type(payload) is UsageReported:
                    entry = self.ledger.observe(payload)
                    if entry is not None:
                        when = draft.turn_id or turn_id
                        await self._after(await self._charge(entry, when), when, live=True)
        await self._after([(s, s.spend) for s in self._standings], turn_id, live=True)

    async def settle(
        self, turn_id: str, drafts: Sequence[Draft], *, tool_calls: int, seconds: float
    ) -> None:
        """The turn's closing entry (before its terminal event); a failure here is a
        diagnostic, never the turn's end lost."""
        reports = [d.payload for d in drafts if isinstance(d.payload, UsageReported)]
        try:
            await self._settle(turn_id, reports, tool_calls=tool_calls, seconds=seconds)
        except Exception as exc:  # the ledger's fault never loses the turn's end: a diagnostic
            log.exception("the usage ledger failed to settle %s", turn_id)
            summary = clip_text(f"the usage ledger could not count this turn: {exc}")
            await self.events.emit(
                HarnessDiagnostic(category="internal", summary=summary), turn_id=turn_id
            )

    async def _settle(
        self, turn_id: str, reports: Sequence[UsageReported], *, tool_calls: int, seconds: float
    ) -> None:
        self._unwatch()
        self._started = None
        entry = self.ledger.turn_end(reports, tool_calls=tool_calls, seconds=seconds)
        if needs_price(entry):
            counts = TokenCounts.counted_in(entry)
            try:
                estimate, why = await asyncio.to_thread(
                    self.plan.prices.estimate, self.ledger.model, counts
                )
            except Exception as exc:  # a price table's fault never loses the usage
                log.exception("pricing failed")
                estimate, why = None, f"the price table failed: {type(exc).__name__}"
            entry = priced(entry, estimate, why)
        moved = await self._charge(entry, turn_id)
        await self._after(moved, turn_id, live=False, ended=True)
        if entry.tokens_provenance == "unavailable":
            await self._unmetered(entry.reason or "the agent reports no usage", turn_id)

    def close(self) -> None:
        self._unwatch()
        for task in self._tasks:
            task.cancel()

    # -------------------------------------------------------------- verdicts

    async def _after(
        self,
        moved: Sequence[tuple[ScopeStanding, Spend]],
        turn_id: str | None,
        *,
        live: bool,
        ended: bool = False,
    ) -> None:
        """Announce what the spend crossed; stop the turn at a hard limit (mid-turn)."""
        soft = self.plan.config.soft
        extra = self._live()
        stop: Breach | None = None
        for standing, before in moved:
            now = standing.spend.plus(extra)
            hard_now = {b.dimension for b in _hard(standing.scope, now, standing, soft)}
            for breach in crossed(standing.scope, before.plus(extra), now, standing.limits, soft):
                if breach.level == "soft" and breach.dimension not in hard_now:
                    await self._threshold(breach, turn_id)
            for breach in _hard(standing.scope, now, standing, soft):
                if breach.dimension == "turns" and not ended:
                    continue  # a turn that was admitted runs; the next one is refused
                if live and self._started is not None and stop is None:
                    stop = breach
                elif ended and (standing.scope, breach.dimension, "hard") not in self._said:
                    self._said.add((standing.scope, breach.dimension, "hard"))
                    await self._announce(breach, "ended", turn_id)
        if stop is not None and self.breach is None:
            self.breach = stop
            self._said.add((stop.scope, stop.dimension, "hard"))
            await self._announce(stop, "cancelled", turn_id)
            if self.stop is not None:
                await self.stop(f"budget: {stop.describe()}")
            return
        self._arm(extra)

    def _live(self) -> Spend:
        """The running turn's tool calls and minutes, not yet in the ledger."""
        if self._started is None:
            return Spend()
        elapsed = asyncio.get_running_loop().time() - self._started
        return Spend(
            tool_calls=self.normalizer.tool_calls - self._tools_base,
            minutes=max(0.0, elapsed) / 60.0,
        )

    def _arm(self, extra: Spend) -> None:
        """The next tool call count and time at which a threshold may be crossed."""
        self._unwatch()
        self._tool_mark = NO_MARK
        if self._started is None:
            return
        soft = self.plan.config.soft
        minutes_left = math.inf
        for standing in self._standings:
            spent = standing.spend.plus(extra)
            for dimension, limit in standing.limits.items():
                for level, at in (("soft", soft * limit), ("hard", limit)):
                    if (standing.scope, dimension, level) in self._said:
                        continue
                    left = at - spent.get(dimension)
                    if dimension == "tool_calls":
                        mark = self.normalizer.tool_calls + max(0.0, math.ceil(left))
                        self._tool_mark = min(self._tool_mark, mark)
                    elif dimension == "minutes":
                        minutes_left = min(minutes_left, max(0.0, left))
        if math.isfinite(minutes_left):
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(minutes_left * 60.0 + 0.001, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        task = asyncio.get_running_loop().create_task(self._timed_check())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _timed_check(self) -> None:
        turn = self.events.turn
        if turn is None or self._started is None:
            return
        await self.events.drafts(())  # what the agent said first comes first
        await self._after([(s, s.spend) for s in self._standings], turn.turn_id, live=True)

    def _unwatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ---------------------------------------------------------- announcements

    async def _threshold(self, breach: Breach, turn_id: str | None) -> None:
        key = (breach.scope, breach.dimension, "soft")
        if key in self._said:
            return
        self._said.add(key)
        payload = breach.threshold(self.plan.config.soft)
        await self._say(payload, breach, "no new claims for it", turn_id)

    async def _announce(self, breach: Breach, action: ExceededAction, turn_id: str | None) -> None:
        payload = breach.exceeded(action, self.ledger.charge.task_id)
        await self._say(payload, breach, _ACTIONS[action], turn_id)

    async def _say(
        self,
        payload: BudgetThreshold | BudgetExceeded,
        breach: Breach,
        what: str,
        turn_id: str | None,
    ) -> None:
        events = self.events

        def fn(tx: Tx) -> bool:
            return budget_sql.mark(tx, breach.scope, breach.dimension, breach.level, utc_now())

        first = await events.emitter.commit(
            [payload], fn, session_id=events.agent_session_id, turn_id=turn_id
        )
        if first and self.plan.notify is not None:
            task = asyncio.get_running_loop().create_task(self._notify(breach, what))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _notify(self, breach: Breach, what: str) -> None:
        assert self.plan.notify is not None
        try:
            said = await self.plan.notify(breach, what)
        except Exception:  # a notifier's bug never stops the meter
            log.exception("budget notification failed")
            return
        for payload in said:
            with contextlib.suppress(Exception):
                await self.events.emit(payload, turn_id=None)

    async def _unmetered(self, reason: str, turn_id: str | None) -> None:
        if self._unmetered_said:
            return
        config = self.plan.config
        metered: tuple[Dimension, ...] = ("tokens", "cost_usd")
        if not any(
            config.limits(s.kind).get(d) is not None for s in self._scopes() for d in metered
        ):
            return
        self._unmetered_said = True
        held = [
            d
            for d in DIMENSIONS
            if d not in metered and any(config.limits(s.kind).get(d) for s in self._scopes())
        ]
        await self.events.emit(
            BudgetUnmetered(profile=self.ledger.profile, reason=reason, held_to=held),
            turn_id=turn_id,
        )


_ACTIONS: dict[ExceededAction, str] = {
    "cancelled": "the running turn was cancelled",
    "refused": "no new turn starts",
    "parked": "its task waits for a raise or the window",
    "ended": "the turn had ended; no new turn starts",
}


def _hard(scope: ScopeKey, spend: Spend, standing: ScopeStanding, soft: float) -> list[Breach]:
    """The hard limits ``spend`` reaches in ``standing``'s limits."""
    return [
        Breach(scope, d, spend.get(d), limit, "hard")
        for d, limit in standing.limits.items()
        if spend.get(d) >= limit
    ]


def _refusal(breach: Breach) -> str:
    return f"budget exceeded: {breach.describe()}"


def _text(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) and value else None


def session_model(result: JsonMapping) -> str | None:
    """The model a session runs, from its ``model`` config option (ACP's ``category``)."""
    options = result.get("configOptions")
    if not isinstance(options, list):
        return None
    for option in options:
        if isinstance(option, dict) and (
            option.get("category") == "model" or option.get("id") == "model"
        ):
            return _text(option.get("currentValue"))
    return None
