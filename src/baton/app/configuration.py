"""Every ``baton.toml`` table and its keys, as the parts that read them declare them.

The root is the one place that knows all the parts, so it is the one place that lists
what a configuration may say; ``docs/configuration.md`` documents exactly these (a test
holds the two together, so a new key is documented or the suite fails).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from baton.budgets.limits import BUDGET_KEYS, DIMENSIONS
from baton.budgets.pricing import MODEL_PRICE_KEYS, PRICING_KEYS
from baton.config import PROFILE_KEYS, SECRETS_KEYS
from baton.requests.notify import NOTIFY_KEYS
from baton.team_config import FCOP_MCP_KEYS, ROLE_KEYS, TEAM_KEYS

__all__ = ["CONFIG_TABLES"]

CONFIG_TABLES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "profiles.NAME": PROFILE_KEYS,
        "secrets": SECRETS_KEYS,
        "notify": NOTIFY_KEYS,
        "team": TEAM_KEYS - {"roles", "fcop_mcp"},
        "team.roles.NAME": ROLE_KEYS,
        "team.fcop_mcp": FCOP_MCP_KEYS,
        "budget": BUDGET_KEYS,
        "budget.per_SCOPE": frozenset(DIMENSIONS),
        "pricing": PRICING_KEYS - {"models"},
        "pricing.models.NAME": MODEL_PRICE_KEYS,
    }
)
"""``[table]`` → its keys (sub-tables are tables of their own here)."""
