"""The ``[cluster]`` section of ``baton.toml``: where the Ray head and the store are.

::

    [cluster]
    address = "10.0.0.5:6379"      # the Ray head (``ray start --head``)
    store = "host=10.0.0.4 dbname=baton user=baton"   # libpq DSN of the PostgreSQL store
    lease_seconds = 15             # a role actor's lease (renewed every third of it)
    hub_address = "10.0.0.5"       # where the role tools are served over HTTP to the
                                   # workers ("IP" or "IP:PORT"; loopback when absent)
    delivery_wait_seconds = 60     # how long an agent's role tool call waits for an
                                   # absent coordinator before "pending delivery"
    git_remote = "ssh://10.0.0.5/srv/project"   # the coordinator's repository as the
                                   # workers reach it (task branches are pushed there;
                                   # default: its path, for workers sharing its filesystem)

``BATON_CLUSTER_STORE`` in the environment overrides ``store`` (a DSN with a password
belongs in the environment, not in a file the repository may carry). Without the
section baton runs on one machine, as always.

``hub_address`` is an IP address of the coordinator host (not a name: the hub binds
it), optionally with a port (else the kernel picks one); role actors relay their agents'
role tools to ``http://IP:PORT`` with the session's bearer credential
(:mod:`baton.cluster.tool_relay`). Without it the hub serves loopback only, which only
role actors on the coordinator's own host reach.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from baton.errors import ConfigError

__all__ = ["STORE_ENV", "ClusterConfig", "cluster_config"]

STORE_ENV: Final = "BATON_CLUSTER_STORE"
CLUSTER_KEYS: Final = frozenset(
    {"address", "store", "lease_seconds", "hub_address", "delivery_wait_seconds", "git_remote"}
)
_KEYS: Final = CLUSTER_KEYS


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    address: str
    store: str
    lease_s: float = 15.0
    hub_host: str | None = None
    """The IP the hub's HTTP front binds and advertises to workers (None: loopback only)."""
    hub_port: int = 0
    delivery_wait_s: float = 60.0
    """How long a worker agent's role tool call waits for an absent hub."""
    git_remote: str | None = None
    """The coordinator's repository as workers reach it (None: its path on the coordinator)."""


def cluster_config(
    raw: Mapping[str, Any],  # Any: baton.toml as tomllib parsed it, checked here
    environ: Mapping[str, str],
) -> ClusterConfig | None:
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
    hub_host, hub_port = _hub_address(table.get("hub_address"))
    wait = table.get("delivery_wait_seconds", 60)
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 1 <= wait <= 3600:
        raise ConfigError("[cluster] delivery_wait_seconds must be a number from 1 to 3600")
    remote = table.get("git_remote")
    if remote is not None and (
        not isinstance(remote, str)
        or not remote.strip()
        or len(remote) > 1024
        or remote.strip().startswith("-")
        or any(ord(c) < 32 for c in remote)
    ):
        raise ConfigError(
            "[cluster] git_remote must be a git URL or path of the coordinator's repository "
            '(e.g. "ssh://10.0.0.5/srv/project")'
        )
    return ClusterConfig(
        address.strip(),
        store.strip(),
        float(lease),
        hub_host,
        hub_port,
        float(wait),
        remote.strip() if remote is not None else None,
    )


def _hub_address(raw: object) -> tuple[str | None, int]:
    """``"IP"``, ``"IP:PORT"`` or ``"[IPv6]:PORT"`` as (host, port); refused otherwise."""
    if raw is None:
        return None, 0
    wrong = ConfigError('[cluster] hub_address must be an IP address, optionally ":PORT"')
    if not isinstance(raw, str) or not raw.strip() or len(raw) > 64:
        raise wrong
    text = raw.strip()
    host, port = text, "0"
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise wrong
        port = rest[1:] or "0"
    elif text.count(":") == 1:
        host, port = text.split(":")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise wrong from None
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise wrong
    return str(address), int(port)
