"""The ``[budget]`` table of ``baton.toml`` (and ``baton run --budget``): limits per scope.

::

    [budget]
    soft = 0.8                 # the fraction of a limit that notifies and stops new claims
    window = "5h"              # per_window's rolling window: "90m", "5h", "day", "week"
    per_run    = { cost_usd = 2.0, minutes = 30 }
    per_task   = { cost_usd = 10, turns = 40 }      # a task tree (the TASK a human filed)
    per_role   = { tokens = 2_000_000 }
    per_window = { cost_usd = 25 }                  # per credential, across runs and hosts

Each scope may limit any of :data:`DIMENSIONS`. Parsing is pure and strict: an unknown
key, a wrong type or a value that is not positive is a one-line
:class:`~baton.errors.ConfigError` naming it (exit 2 in every command).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, Literal, get_args

from baton.budgets.config_tables import checked_table
from baton.errors import ConfigError

__all__ = [
    "BUDGET_KEYS",
    "DIMENSIONS",
    "SCOPES",
    "SCOPE_TABLES",
    "BudgetConfig",
    "Dimension",
    "Limits",
    "ScopeKind",
    "Window",
    "format_amount",
    "parse_budget_option",
    "parse_window",
]

Dimension = Literal["tokens", "cost_usd", "turns", "tool_calls", "minutes"]
DIMENSIONS: Final[tuple[Dimension, ...]] = get_args(Dimension)
"""What a limit may bound: tokens (in + out + thought), dollars, turns, tool calls, minutes."""

ScopeKind = Literal["run", "task", "role", "window"]
SCOPES: Final[tuple[ScopeKind, ...]] = get_args(ScopeKind)
"""Where spend is charged: a run, a task tree, a role, a credential's rolling window."""

SCOPE_TABLES: Final[Mapping[ScopeKind, str]] = {
    "run": "per_run",
    "task": "per_task",
    "role": "per_role",
    "window": "per_window",
}
BUDGET_KEYS: Final = frozenset({"soft", "window", *SCOPE_TABLES.values()})
"""The keys of the ``[budget]`` table."""

_INTEGER_DIMENSIONS: Final = frozenset({"tokens", "turns", "tool_calls"})
_WINDOW_RE: Final = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|min|h|d)\Z")
_NAMED_WINDOWS: Final = {"hour": 3600.0, "day": 86400.0, "week": 7 * 86400.0}
_UNITS: Final = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
MAX_WINDOW_SECONDS: Final = 31 * 86400.0


@dataclass(frozen=True, slots=True)
class Limits:
    """One scope's limits; ``None``: that dimension is not limited."""

    tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None
    tool_calls: int | None = None
    minutes: float | None = None

    def get(self, dimension: Dimension) -> float | None:
        value: float | None = getattr(self, dimension)
        return value

    def items(self) -> list[tuple[Dimension, float]]:
        """The dimensions that are limited, with their limit."""
        return [(d, v) for d in DIMENSIONS if (v := self.get(d)) is not None]

    def __bool__(self) -> bool:
        return any(self.get(d) is not None for d in DIMENSIONS)

    def updated(self, other: Limits) -> Limits:
        """These limits with every dimension ``other`` sets replaced by its value."""
        changes: dict[str, Any] = dict(other.items())  # each dimension keeps its own type
        return replace(self, **changes)

    def describe(self) -> str:
        return ", ".join(f"{d} {format_amount(d, v)}" for d, v in self.items()) or "no limit"

    # Any: a TOML table as parsed, checked key by key here.
    @classmethod
    def from_table(cls, table: Any, where: str) -> Limits:
        table = checked_table(
            table, where, DIMENSIONS, like="{ cost_usd = 5.0, turns = 20 }", listed="limits"
        )
        values: dict[str, Any] = {str(d): _limit(d, v, f"{where} {d}") for d, v in table.items()}
        return cls(**values)


def _limit(dimension: str, value: Any, where: str) -> int | float:
    if dimension in _INTEGER_DIMENSIONS:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{where}: must be a positive integer (got {value!r})")
        return int(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(f"{where}: must be a positive number (got {value!r})")
    return float(value)


@dataclass(frozen=True, slots=True)
class Window:
    """A rolling window: spend older than ``seconds`` no longer counts."""

    seconds: float
    label: str


# Any: a TOML value, checked here (a ConfigError names a wrong one).
def parse_window(value: Any, where: str = "[budget] window") -> Window:
    """``"90m"``, ``"5h"``, ``"2d"``, ``"hour"``, ``"day"``, ``"week"`` → a :class:`Window`."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f'{where}: must be a duration like "5h" or "day" (got {value!r})')
    text = value.strip().lower()
    seconds = _NAMED_WINDOWS.get(text)
    if seconds is None:
        match = _WINDOW_RE.match(text)
        if match is None:
            raise ConfigError(f'{where}: must be a duration like "5h" or "day" (got {value!r})')
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not 60.0 <= seconds <= MAX_WINDOW_SECONDS:
        raise ConfigError(f"{where}: must be between 1 minute and 31 days (got {value!r})")
    return Window(seconds, value.strip())


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    """The ``[budget]`` table; an empty one limits nothing (usage is still counted)."""

    per_run: Limits = field(default_factory=Limits)
    per_task: Limits = field(default_factory=Limits)
    per_role: Limits = field(default_factory=Limits)
    per_window: Limits = field(default_factory=Limits)
    window: Window | None = None
    soft: float = 0.8

    def limits(self, scope: ScopeKind) -> Limits:
        limits: Limits = getattr(self, SCOPE_TABLES[scope])
        return limits

    @property
    def enabled(self) -> bool:
        return any(self.limits(s) for s in SCOPES)

    def with_run(self, limits: Limits) -> BudgetConfig:
        """These budgets with ``per_run`` replaced where ``limits`` sets it (``--budget``)."""
        return replace(self, per_run=self.per_run.updated(limits))

    # Any: a TOML table as parsed, checked key by key here.
    @classmethod
    def from_table(cls, table: Any) -> BudgetConfig:
        """``[budget]`` checked key by key (a ConfigError names the first wrong one)."""
        table = checked_table(table, "[budget]", sorted(BUDGET_KEYS))
        soft = table.get("soft", 0.8)
        if isinstance(soft, bool) or not isinstance(soft, int | float) or not 0 < soft <= 1:
            raise ConfigError(f"[budget] soft: must be a fraction in (0, 1] (got {soft!r})")
        window = parse_window(table["window"]) if "window" in table else None
        scopes = {
            name: Limits.from_table(table[name], f"[budget] {name}")
            for name in SCOPE_TABLES.values()
            if name in table
        }
        if scopes.get("per_window") and window is None:
            raise ConfigError('[budget] per_window needs a window (e.g. window = "5h")')
        return cls(window=window, soft=float(soft), **scopes)


def parse_budget_option(text: str) -> Limits:
    """``baton run --budget cost_usd=0.50,tokens=200000`` → one run's limits."""
    table: dict[str, float | int] = {}
    for part in text.split(","):
        name, sep, raw = part.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name or not raw:
            raise ConfigError(
                f"--budget {text!r}: write limits as name=value pairs, e.g. cost_usd=0.5,turns=3"
            )
        try:
            value: float | int = int(raw) if name in _INTEGER_DIMENSIONS else float(raw)
        except ValueError:
            raise ConfigError(f"--budget {name}: {raw!r} is not a number") from None
        table[name] = value
    return Limits.from_table(table, "--budget")


def format_amount(dimension: str, value: float | None) -> str:
    """A spend or a limit as people read it: ``$1.23``, ``12,345``, ``4.5 min``."""
    if value is None:
        return "unknown"
    if dimension == "cost_usd":
        return f"${value:,.4f}" if 0 < abs(value) < 0.01 else f"${value:,.2f}"
    if dimension == "minutes":
        return f"{value:,.1f} min"
    return f"{int(value):,}"


_LIMIT_FIELDS = frozenset(f.name for f in fields(Limits))
assert set(DIMENSIONS) == _LIMIT_FIELDS, "Limits has one field per dimension"
