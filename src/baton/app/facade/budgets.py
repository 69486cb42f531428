"""What the CLI and the web use of budgets and spend as the surfaces show them."""

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
