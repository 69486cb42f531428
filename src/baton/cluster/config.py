"""The ``[cluster]`` section of ``baton.toml``: where the Ray head and the store are.

::

    [cluster]
    address = "10.0.0.5:6379"      # the Ray head (``ray start --head``)
    store = "host=10.0.0.4 dbname=baton user=baton"   # libpq DSN of the PostgreSQL store
    lease_seconds = 15             # a role actor's lease (renewed every third of it)

``BATON_CLUSTER_STORE`` in the environment overrides ``store`` (a DSN with a password
belongs in the environment, not in a file the repository may carry). Without the
section baton runs on one machine, as always.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from baton.errors import ConfigError

__all__ = ["STORE_ENV", "ClusterConfig", "cluster_config"]

STORE_ENV: Final = "BATON_CLUSTER_STORE"
_KEYS: Final = frozenset({"address", "store", "lease_seconds"})


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    address: str
    store: str
    lease_s: float = 15.0


def cluster_config(raw: Mapping[str, Any], environ: Mapping[str, str]) -> ClusterConfig | None:
    """``[cluster]`` as a :class:`ClusterConfig`, ``None`` without the section."""
    table = raw.get("cluster")
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ConfigError("[cluster] must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"[cluster]: unknown keys {', '.join(unknown)}")
    address = table.get("address")
    if not isinstance(address, str) or not address.strip():
        raise ConfigError('[cluster] address must name the Ray head ("HOST:PORT")')
    store = environ.get(STORE_ENV) or table.get("store")
    if not isinstance(store, str) or not store.strip():
        raise ConfigError(f"[cluster] store (or ${STORE_ENV}) must be a PostgreSQL DSN")
    lease = table.get("lease_seconds", 15)
    if isinstance(lease, bool) or not isinstance(lease, int | float) or not 2 <= lease <= 600:
        raise ConfigError("[cluster] lease_seconds must be a number from 2 to 600")
    return ClusterConfig(address.strip(), store.strip(), float(lease))
