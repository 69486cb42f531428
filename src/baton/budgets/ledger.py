"""The usage ledger of one session: every agent's usage reports as per-turn deltas.

Agents report usage in different shapes (``docs/budgets.md`` has the table): a
``usage_update`` whose ``cost`` is the session's running total (ACP), the prompt
result's ``usage`` for the turn (claude-agent-acp, codex-acp, OpenCode, the Cursor SDK
transport), ``_meta.usage`` per model call summed by the provider extension (Qwen
Code), or nothing (Cursor's ACP, the built-in agent). :class:`UsageLedger` turns what
the normalizer made of them (``usage.reported``) into :class:`UsageCounted` entries:

* ``turn_start``: one turn (``turns`` = 1), before the prompt is sent;
* ``usage``: a running total moved mid-turn: the difference, ``derived`` (a total
  lower than the last one means the agent's counter restarted: the new total counts);
* ``turn_end``: the turn's tokens (``reported``, or ``derived`` from a session total
  for a family whose prompt usage is cumulative, :data:`PROMPT_USAGE_BASIS`), its tool
  calls and seconds, and dollars when nothing else priced the turn: left for
  :func:`priced` to ``estimate`` from a price table, or ``unavailable`` with a reason.

Pure: no clock, no store. The runner restores a resumed session's running totals
from the store (:meth:`UsageLedger.restore`) so a restart never counts them twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Final, Literal

from baton.events.model import UsageCounted, UsageReported

__all__ = [
    "PROMPT_USAGE_BASIS",
    "Charge",
    "Estimate",
    "TokenCounts",
    "UsageLedger",
    "needs_price",
    "priced",
    "replace_entry",
]

PROMPT_USAGE_BASIS: Final[Mapping[str, Literal["turn", "session"]]] = {
    "claude": "turn",
    "codex": "turn",
    "opencode": "turn",
    "qwen": "turn",
    "gemini": "turn",
    "cursor-sdk": "turn",
}
"""Whether a family's prompt-result usage counts the turn or the session so far (ACP
leaves it open); checked against each pinned agent by ``tests/integration``. A family
not listed is taken per turn."""


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """One turn's tokens by kind (``None``: not reported)."""

    input: int | None = None
    output: int | None = None
    thought: int | None = None
    cached_read: int | None = None
    cached_write: int | None = None
    total: int | None = None

    @classmethod
    def of(cls, usage: UsageReported) -> TokenCounts:
        return cls(
            input=usage.input_tokens,
            output=usage.output_tokens,
            thought=usage.thought_tokens,
            cached_read=usage.cached_read_tokens,
            cached_write=usage.cached_write_tokens,
            total=usage.total_tokens,
        )

    @classmethod
    def counted_in(cls, entry: UsageCounted) -> TokenCounts:
        """The tokens a turn's ``usage.counted`` entry holds (what a price estimate reads)."""
        return cls(
            input=entry.input_tokens,
            output=entry.output_tokens,
            thought=entry.thought_tokens,
            cached_read=entry.cached_read_tokens,
            cached_write=entry.cached_write_tokens,
            total=entry.tokens,
        )

    @property
    def counted(self) -> int | None:
        """What a ``tokens`` limit counts: the reported total, else the sum of the parts."""
        if self.total is not None:
            return self.total
        parts = [self.input, self.output, self.thought, self.cached_read, self.cached_write]
        known = [p for p in parts if p is not None]
        return sum(known) if known else None

    def minus(self, earlier: TokenCounts) -> TokenCounts:
        """The difference of two running totals (a total that fell: its counter restarted)."""

        def delta(now: int | None, before: int | None) -> int | None:
            if now is None:
                return None
            return now - before if before is not None and now >= before else now

        return TokenCounts(
            **{f.name: delta(getattr(self, f.name), getattr(earlier, f.name)) for f in fields(self)}
        )


@dataclass(frozen=True, slots=True)
class Charge:
    """Where a turn's spend is charged: its credential's window, and in a team its TASK,
    task tree and role."""

    credential: str
    task_id: str | None = None
    tree: str | None = None
    role: str | None = None


@dataclass(frozen=True, slots=True)
class Estimate:
    """Dollars for some tokens from a price table (``source`` says which and for what)."""

    cost_usd: float
    source: str


@dataclass(slots=True)
class UsageLedger:
    """One session's ledger state: its running totals and what the current turn counted."""

    profile: str
    family: str
    agent_version: str | None = None
    model: str | None = None
    charge: Charge = field(default_factory=lambda: Charge("unknown"))
    cumulative_cost: float | None = None
    """The agent's last running total of dollars (``usage_update.cost``)."""
    cumulative_tokens: TokenCounts | None = None
    """The last session total of tokens (for a family whose prompt usage is cumulative)."""
    reports_cost: bool = False
    """The agent has reported dollars in this session: baton never estimates beside it."""

    def restore(self, cumulative_cost: float | None, reports_cost: bool) -> None:
        """A resumed session's running total, as the store last recorded it."""
        self.cumulative_cost = cumulative_cost
        self.reports_cost = self.reports_cost or reports_cost

    def _entry(
        self, entry: Literal["turn_start", "usage", "turn_end"], **values: object
    ) -> UsageCounted:
        charge = self.charge
        return UsageCounted(
            entry=entry,
            profile=self.profile,
            agent_version=self.agent_version,
            model=self.model,
            credential=charge.credential,
            task_id=charge.task_id,
            tree=charge.tree,
            role=charge.role,
            **values,
        )

    def turn_start(self) -> UsageCounted:
        """The turn itself, counted before its prompt is sent."""
        return self._entry("turn_start", turns=1)

    def observe(self, usage: UsageReported) -> UsageCounted | None:
        """A mid-turn report: an entry when a running total of dollars moved, else None.

        Token counts of a context report (``used``/``size``) are the context window, not
        spend; a turn's own counts wait for :meth:`turn_end`."""
        if not usage.available or usage.scope != "context" or usage.cost_amount is None:
            return None
        if usage.cost_currency not in (None, "USD"):
            return None  # never mixed into dollars; the raw report keeps it
        total = usage.cost_amount
        self.reports_cost = True
        before = self.cumulative_cost
        delta = total - before if before is not None and total >= before else total
        self.cumulative_cost = total
        if delta <= 0:
            return None
        return self._entry(
            "usage",
            cost_usd=delta,
            cost_provenance="derived",
            cost_source="the agent's running total (usage_update.cost)",
            cumulative_cost=total,
        )

    def turn_end(
        self, reports: Iterable[UsageReported], *, tool_calls: int, seconds: float
    ) -> UsageCounted:
        """The turn's closing entry from its final usage reports (the prompt result's, an
        extension's, or the unavailable one with its reason).

        Dollars are left ``None`` with no provenance when the turn has tokens but nothing
        priced it yet: :func:`priced` estimates them (the runner does, off the loop)."""
        turn = next((u for u in reports if u.available and u.scope == "turn"), None)
        reason = next((u.reason for u in reports if not u.available and u.reason), None)
        values: dict[str, object] = {"tool_calls": tool_calls, "seconds": round(seconds, 3)}
        if turn is not None:
            counts = TokenCounts.of(turn)
            provenance: Literal["reported", "derived"] = "reported"
            if PROMPT_USAGE_BASIS.get(self.family, "turn") == "session":
                total, counts = counts, counts.minus(self.cumulative_tokens or TokenCounts())
                self.cumulative_tokens = total
                provenance = "derived"
            values.update(
                tokens=counts.counted,
                input_tokens=counts.input,
                output_tokens=counts.output,
                thought_tokens=counts.thought,
                cached_read_tokens=counts.cached_read,
                cached_write_tokens=counts.cached_write,
                tokens_provenance=provenance,
            )
            if turn.cost_amount is not None and turn.cost_currency in (None, "USD"):
                values.update(
                    cost_usd=turn.cost_amount,
                    cost_provenance="reported",
                    cost_source="the agent's turn usage",
                )
            elif self.reports_cost:  # its dollars are the running total's entries
                values.update(cost_usd=0.0, cost_provenance="derived", cost_source=_RUNNING)
        else:
            why = reason or "the agent reported no usage for this turn"
            values.update(tokens_provenance="unavailable", reason=why)
            if self.reports_cost:
                values.update(cost_usd=0.0, cost_provenance="derived", cost_source=_RUNNING)
            else:
                values.update(cost_provenance="unavailable")
        return self._entry("turn_end", **values)


def needs_price(entry: UsageCounted) -> bool:
    """A closing entry with tokens and no dollars yet: the price table may estimate it."""
    return (
        entry.entry == "turn_end"
        and entry.cost_provenance is None
        and entry.cost_usd is None
        and entry.tokens_provenance in ("reported", "derived")
    )


def priced(entry: UsageCounted, estimate: Estimate | None, why: str | None = None) -> UsageCounted:
    """``entry`` with its dollars: the estimate, labelled as one, or unavailable (``why``)."""
    if not needs_price(entry):
        return entry
    if estimate is None:
        reason = why or "no price known for this model"
        return replace_entry(
            entry, cost_provenance="unavailable", reason=_join(entry.reason, reason)
        )
    return replace_entry(
        entry,
        cost_usd=estimate.cost_usd,
        cost_provenance="estimated",
        cost_source=estimate.source,
    )


def replace_entry(entry: UsageCounted, **changes: object) -> UsageCounted:
    """A frozen payload with some fields changed, validated again."""
    return UsageCounted.model_validate({**entry.model_dump(), **changes})


def _join(first: str | None, second: str) -> str:
    return f"{first}; {second}" if first else second


_RUNNING = "in this turn's usage entries (the agent's running total)"
