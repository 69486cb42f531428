"""What the CLI and the web use of budgets and spend as the surfaces show them.

The surfaces import these names from here, never from the core's modules, so the
core can move behind them (tests/test_architecture.py holds the rule).
"""

from baton.budgets.limits import SCOPE_TABLES, SCOPES, Limits, format_amount, parse_budget_option
from baton.budgets.rules import ScopeKey, ScopeStanding, Spend, raise_hint

__all__ = [
    "SCOPES",
    "SCOPE_TABLES",
    "Limits",
    "ScopeKey",
    "ScopeStanding",
    "Spend",
    "format_amount",
    "parse_budget_option",
    "raise_hint",
]
