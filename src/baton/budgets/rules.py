"""Spend against limits: which limits a spend breaches, which a delta crossed, when a
rolling window lets work go on again. Pure: spend and limits in, verdicts out.

A limit is *hard* when spend reaches it (the running turn is cancelled, the TASK
parked) and *soft* at ``soft × limit`` (a notice, no new claims). Spend that reached a
limit stays over it until the human raises the limit (``baton budget raise``, stored:
the effective limit is the raised one) or, for a window, until enough of it is older
than the window (:func:`window_reopens_at`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from baton.budgets.limits import (
    DIMENSIONS,
    SCOPE_TABLES,
    Dimension,
    Limits,
    ScopeKind,
    format_amount,
)
from baton.events.model import BudgetExceeded, BudgetThreshold, ExceededAction, UsageCounted

__all__ = [
    "Breach",
    "Level",
    "ScopeKey",
    "ScopeStanding",
    "Spend",
    "Standing",
    "breaches",
    "crossed",
    "effective",
    "notice",
    "raise_hint",
    "window_reopens_at",
]

Level = Literal["soft", "hard"]


@dataclass(frozen=True, slots=True)
class Spend:
    """What a scope spent: one number per dimension (tokens and dollars as far as known).

    ``unmetered``: ledger entries (turns) for which the agent reported no tokens, so
    ``tokens`` and ``cost_usd`` undercount by that much; ``estimated``: some of
    ``cost_usd`` is baton's estimate from a price table, not the agent's figure.
    """

    tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    tool_calls: int = 0
    minutes: float = 0.0
    unmetered: int = 0
    estimated: bool = False

    def get(self, dimension: Dimension) -> float:
        value: float = getattr(self, dimension)
        return value

    def plus(self, other: Spend) -> Spend:
        return Spend(
            tokens=self.tokens + other.tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            turns=self.turns + other.turns,
            tool_calls=self.tool_calls + other.tool_calls,
            minutes=self.minutes + other.minutes,
            unmetered=self.unmetered + other.unmetered,
            estimated=self.estimated or other.estimated,
        )

    def minus(self, other: Spend) -> Spend:
        """This spend without ``other`` (what a scope had before an entry was charged)."""
        return Spend(
            tokens=self.tokens - other.tokens,
            cost_usd=self.cost_usd - other.cost_usd,
            turns=self.turns - other.turns,
            tool_calls=self.tool_calls - other.tool_calls,
            minutes=self.minutes - other.minutes,
            unmetered=self.unmetered - other.unmetered,
            estimated=self.estimated,
        )

    @classmethod
    def of_entry(cls, entry: UsageCounted) -> Spend:
        """One ledger entry as spend."""
        return cls(
            tokens=entry.tokens or 0,
            cost_usd=entry.cost_usd or 0.0,
            turns=entry.turns,
            tool_calls=entry.tool_calls,
            minutes=entry.seconds / 60.0,
            unmetered=int(entry.tokens_provenance == "unavailable"),
            estimated=entry.cost_provenance == "estimated",
        )

    def to_json(self) -> dict[str, float | int | bool]:
        return {
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "minutes": round(self.minutes, 3),
            "unmetered_turns": self.unmetered,
            "cost_estimated": self.estimated,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Spend:
        """The inverse of :meth:`to_json`."""
        return cls(
            tokens=int(data.get("tokens") or 0),  # type: ignore[call-overload]
            cost_usd=float(data.get("cost_usd") or 0.0),  # type: ignore[arg-type]
            turns=int(data.get("turns") or 0),  # type: ignore[call-overload]
            tool_calls=int(data.get("tool_calls") or 0),  # type: ignore[call-overload]
            minutes=float(data.get("minutes") or 0.0),  # type: ignore[arg-type]
            unmetered=int(data.get("unmetered_turns") or 0),  # type: ignore[call-overload]
            estimated=bool(data.get("cost_estimated")),
        )

    @property
    def unavailable(self) -> bool:
        """No turn reported usage: tokens and dollars are unknown, never shown as zero."""
        return self.unmetered > 0 and not self.tokens and not self.cost_usd

    def describe(self) -> str:
        counts = f"{self.turns} turns, {self.tool_calls} tool calls"
        if self.unavailable:
            return f"usage unavailable, {counts}"
        cost = format_amount("cost_usd", self.cost_usd) + (" (est.)" if self.estimated else "")
        text = f"{cost}, {self.tokens:,} tokens, {counts}"
        if self.unmetered:
            text += f" ({self.unmetered} turn{'s' if self.unmetered != 1 else ''} without usage)"
        return text


@dataclass(frozen=True, slots=True)
class ScopeKey:
    """One scope instance: a run id, a task tree's root, a role, a credential's window."""

    kind: ScopeKind
    key: str

    def __str__(self) -> str:
        return f"{SCOPE_TABLES[self.kind]} {self.key}"


@dataclass(frozen=True, slots=True)
class Breach:
    """A limit a scope's spend reached (``hard``) or came near (``soft``)."""

    scope: ScopeKey
    dimension: Dimension
    spend: float
    limit: float
    level: Level

    def describe(self) -> str:
        spent = format_amount(self.dimension, self.spend)
        limit = format_amount(self.dimension, self.limit)
        return f"{self.scope} {self.dimension} {spent} of {limit}"

    def threshold(self, soft: float) -> BudgetThreshold:
        """The ``budget.threshold`` event of this (soft) breach: the human is told."""
        return BudgetThreshold(
            scope=self.scope.kind,
            key=self.scope.key,
            dimension=self.dimension,
            spend=self.spend,
            limit=self.limit,
            soft=soft,
        )

    def exceeded(self, action: ExceededAction, task_id: str | None) -> BudgetExceeded:
        """The ``budget.exceeded`` event of this (hard) breach, with what baton did about it."""
        return BudgetExceeded(
            scope=self.scope.kind,
            key=self.scope.key,
            dimension=self.dimension,
            spend=self.spend,
            limit=self.limit,
            action=action,
            task_id=task_id,
        )


def effective(limits: Limits, raised: Mapping[str, float]) -> Limits:
    """The configured limits with the human's raises (``baton budget raise``) applied."""
    values = {d: raised[d] for d in DIMENSIONS if d in raised}
    return limits.updated(Limits(**values)) if values else limits  # type: ignore[arg-type]


def breaches(scope: ScopeKey, spend: Spend, limits: Limits, soft: float) -> list[Breach]:
    """Every limit of ``scope`` that ``spend`` reaches (hard) or nears (soft), hard first."""
    out: list[Breach] = []
    for dimension, limit in limits.items():
        value = spend.get(dimension)
        if value >= limit:
            out.append(Breach(scope, dimension, value, limit, "hard"))
        elif value >= soft * limit:
            out.append(Breach(scope, dimension, value, limit, "soft"))
    out.sort(key=lambda b: b.level != "hard")
    return out


def crossed(
    scope: ScopeKey, before: Spend, after: Spend, limits: Limits, soft: float
) -> list[Breach]:
    """The thresholds a delta took ``scope`` across: each level at most once, hard first."""
    was = {(b.dimension, b.level) for b in breaches(scope, before, limits, soft)}
    now = breaches(scope, after, limits, soft)
    out = [b for b in now if (b.dimension, b.level) not in was]
    # reaching hard straight from below soft also crossed soft: the notice says hard only
    return out


@dataclass(frozen=True, slots=True)
class ScopeStanding:
    """One scope's spend and its effective limits (configured, or raised by a human)."""

    scope: ScopeKey
    spend: Spend
    limits: Limits

    def breaches(self, soft: float) -> list[Breach]:
        return breaches(self.scope, self.spend, self.limits, soft)

    def to_json(self, soft: float) -> dict[str, object]:
        return {
            "scope": self.scope.kind,
            "key": self.scope.key,
            "spend": self.spend.to_json(),
            "limits": {d: v for d, v in self.limits.items()},
            "breaches": [
                {"dimension": b.dimension, "level": b.level, "spend": b.spend, "limit": b.limit}
                for b in self.breaches(soft)
            ],
        }


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a TASK's scopes stand against their limits (a fact of the team loop)."""

    breaches: tuple[Breach, ...] = ()
    spend: Spend | None = None
    """The TASK tree's own spend (what ``task show`` and the review document say)."""

    @property
    def hard(self) -> Breach | None:
        return next((b for b in self.breaches if b.level == "hard"), None)

    @property
    def soft(self) -> Breach | None:
        """The first breach that stops new claims: a hard one, else a soft one."""
        return self.hard or next(iter(self.breaches), None)


def window_reopens_at(
    entries: Iterable[tuple[float, float]], limit: float, window: float, below: float = 1.0
) -> float | None:
    """When a rolling window's spend falls under ``below × limit`` again.

    ``entries``: ``(at, amount)`` of the spend inside the window (seconds since the
    epoch); each leaves the window ``window`` seconds after ``at``. ``None``: it is
    under already. Never sooner than the oldest entry leaves.
    """
    ordered: Sequence[tuple[float, float]] = sorted(entries)
    total = sum(amount for _, amount in ordered)
    threshold = below * limit
    if total < threshold:
        return None
    for at, amount in ordered:
        total -= amount
        if total < threshold:
            return at + window
    return ordered[-1][0] + window if ordered else None


def raise_hint(breach: Breach) -> str:
    """The command that lifts ``breach`` (``baton budget raise``), with a value that does."""
    flag = "--" + breach.dimension.replace("_", "-")
    value = max(breach.limit * 2, breach.spend * 1.5)
    shown = f"{value:.2f}" if breach.dimension in ("cost_usd", "minutes") else f"{int(value)}"
    return f"baton budget raise {breach.scope.kind} {breach.scope.key} {flag} {shown}"


def notice(breach: Breach, what: str) -> tuple[str, str, str, dict[str, object]]:
    """What ``[notify]`` sends for a threshold or a limit reached: id, kind, title, JSON."""
    level = "limit reached" if breach.level == "hard" else "threshold"
    ident = f"budget:{breach.scope.kind}:{breach.scope.key}:{breach.dimension}:{breach.level}"
    title = f"budget {level}: {breach.describe()}; {what}"
    data: dict[str, object] = {
        "id": ident,
        "kind": "budget",
        "title": title,
        "scope": breach.scope.kind,
        "key": breach.scope.key,
        "dimension": breach.dimension,
        "level": breach.level,
        "spend": breach.spend,
        "limit": breach.limit,
        "answer_with": raise_hint(breach),
    }
    return ident, "budget", title, data
