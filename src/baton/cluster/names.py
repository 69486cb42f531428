"""The names baton gives things on a Ray cluster: actors, host and checkout resources, runs.

Ray's names are a cache of the store's decisions: an actor's name comes from its slot's
stored epoch (and its team), so a new driver finds it by name from the store alone.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from baton.errors import ConfigError
from baton.security.paths import sanitize_id

__all__ = [
    "CHECKOUT_PREFIX",
    "HOST_PREFIX",
    "NAMESPACE",
    "actor_name",
    "checkout_resource",
    "holder_run_id",
    "host_resource",
]

NAMESPACE: Final = "baton"
"""The Ray namespace of every baton actor (names are unique within it)."""


def actor_name(slot: str, epoch: int, project: str = "") -> str:
    """The actor of ``slot`` under ``epoch``: a new placement never collides with a stale copy,
    nor with another team's slot of that name on the same Ray cluster (``project``: its FCoP
    workspace id, as a short digest; none keeps the name of before)."""
    if not project:
        return f"baton-role-{sanitize_id(slot)}-e{epoch}"
    team = hashlib.sha256(project.encode()).hexdigest()[:12]
    return f"baton-role-{team}-{sanitize_id(slot)}-e{epoch}"


HOST_PREFIX: Final = "baton-host-"
CHECKOUT_PREFIX: Final = "baton-checkout-"
_HOST_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def host_resource(host: str) -> str:
    """The custom resource ``baton worker --host NAME`` declares (the actor asks 0.01 of it).

    Host names are refused, never rewritten, outside ``[A-Za-z0-9._-]`` (at most 63):
    the name is read back from the resource key (:func:`~baton.cluster.driver.hosts_from_nodes`).
    """
    if not _HOST_NAME.fullmatch(host):
        raise ConfigError(f"host name {host[:80]!r}: use letters, digits, '.', '_', '-' (<= 63)")
    return f"{HOST_PREFIX}{host}"


def checkout_resource(slot: str) -> str:
    """The resource a worker declares for each role slot whose checkout it holds."""
    return f"{CHECKOUT_PREFIX}{sanitize_id(slot)}"


def holder_run_id(parent_run: str, slot: str, epoch: int) -> str:
    return f"{parent_run}.{sanitize_id(slot)}.e{epoch}"
