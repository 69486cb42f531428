"""Every ``baton.toml`` table and its keys, as the parts that read them declare them.

The root is the one place that knows all the parts, so it is the one place that lists
what a configuration may say; ``docs/configuration.md`` documents exactly these (a test
holds the two together, so a new key is documented or the suite fails).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from baton.budgets.limits import BUDGET_KEYS, DIMENSIONS
from baton.budgets.pricing import MODEL_PRICE_KEYS, PRICING_KEYS
from baton.config import PROFILE_KEYS, SECRETS_KEYS, BatonConfig
from baton.requests.notify import NOTIFY_KEYS, NotifyConfig
from baton.team_config import FCOP_MCP_KEYS, ROLE_KEYS, TEAM_KEYS, parse_team

__all__ = ["CONFIG_TABLES", "check_config"]

if TYPE_CHECKING:
    CONFIG_TABLES: Mapping[str, frozenset[str]]
    """``[table]`` → its keys (sub-tables are tables of their own here)."""


@functools.cache
def _config_tables() -> Mapping[str, frozenset[str]]:
    from baton.cluster.config import CLUSTER_KEYS  # only when asked: never on one machine

    return MappingProxyType(
        {
            "profiles.NAME": PROFILE_KEYS,
            "secrets": SECRETS_KEYS,
            "notify": NOTIFY_KEYS,
            "team": TEAM_KEYS - {"roles", "fcop_mcp"},
            "team.roles.NAME": ROLE_KEYS,
            "team.fcop_mcp": FCOP_MCP_KEYS,
            "cluster": CLUSTER_KEYS,
            "budget": BUDGET_KEYS,
            "budget.per_SCOPE": frozenset(DIMENSIONS),
            "pricing": PRICING_KEYS - {"models"},
            "pricing.models.NAME": MODEL_PRICE_KEYS,
        }
    )


def __getattr__(name: str) -> object:  # PEP 562: CONFIG_TABLES is built on first use
    if name == "CONFIG_TABLES":
        return _config_tables()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_config(config: BatonConfig, environ: Mapping[str, str] | None = None) -> BatonConfig:
    """Every table of ``baton.toml`` parsed by the part that owns it, at load.

    ``load_config`` already refused unknown top-level tables and checked ``[profiles]``
    and ``[secrets]``; this parses the rest, so a wrong type or an unknown key in any
    table is a one-line :class:`~baton.errors.ConfigError` (exit 2) in every command,
    never an internal error later, whichever command reads that table first.
    """
    raw = config.raw
    if "notify" in raw:
        NotifyConfig.from_table(raw["notify"])
    if "team" in raw:
        parse_team(raw["team"], known_profiles=set(config.profiles), on_cluster="cluster" in raw)
    if "cluster" in raw:
        from baton.cluster.config import cluster_config  # a cluster project only

        cluster_config(raw, os.environ if environ is None else environ)
    return config
